"""What both sides share: the official-style config, the training batch, the schedule, and the
mapping of the GLM config onto PaddleFormers' DeepseekV3Config.

The official weights are `official/` (transformers' `save_pretrained` of a
`GlmMoeDsaForCausalLM` built from `config.json`, generate.py); both sides load them, the
candidate through PaddleFormers' own HF conversion (`convert_from_hf=True`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "config.json"  # the official-style GlmMoeDsa config.json (45 keys)
OFFICIAL = HERE / "official"  # the official weights, HF naming and layout
TRAIN_STEPS = 20
LEARNING_RATE = 0.1
BATCH, SEQUENCE = 2, 16  # the training batch: not longer than index_topk (32)
PROBE_SEQUENCE = 48  # the consumption probe's sequence: longer than index_topk
DUMPED_STEPS = "1:2"
SEED = 5


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(CONFIG.read_text(encoding="utf-8"))
    return loaded


def tokens(sequence: int = SEQUENCE, batch: int = BATCH) -> tuple[np.ndarray, np.ndarray]:
    """The fixed batch: input ids and next-token labels, int64."""
    rng = np.random.default_rng(SEED)
    data = rng.integers(0, config()["vocab_size"], (batch, sequence + 1))
    return data[:, :-1].astype("int64"), data[:, 1:].astype("int64")


def paddle_config() -> dict[str, Any]:
    """The GLM config as PaddleFormers' DeepseekV3Config takes it: RoPE as `rope_theta` and a
    `rope_scaling` with `factor` (its attention reads `factor` even for default RoPE), and
    `fuse_rms_norm=False` (no CPU kernel for `fused_rms_norm_ext`)."""
    mapped = config()
    rope = mapped.pop("rope_parameters")
    mapped.update(
        rope_theta=rope["rope_theta"],
        rope_scaling={"rope_type": rope["rope_type"], "factor": 1.0},
        fuse_rms_norm=False,
    )
    return mapped
