"""The consumption probe of the reference forward at a sequence longer than `index_topk`:

    gates probe consumed model/probe_indexer.py:build

Does transformers' `GlmMoeDsaForCausalLM` consume its DSA indexer tensors? While the
sequence is not longer than `index_topk` the indexer selects every key and cannot change
the output (the training batch's 16 tokens against 32); at a real length it chooses. The
probe records the sequence it ran with, which the tensor-inventory contract requires.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from common import OFFICIAL, PROBE_SEQUENCE, config, tokens
from transformers import GlmMoeDsaForCausalLM


def build() -> tuple[Callable[[], Any], dict[str, Any], dict[str, int]]:
    torch.use_deterministic_algorithms(True)
    model = GlmMoeDsaForCausalLM.from_pretrained(
        OFFICIAL, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    ids = torch.from_numpy(tokens(PROBE_SEQUENCE, batch=1)[0])

    def forward() -> Any:
        with torch.no_grad():
            return model(input_ids=ids, use_cache=False).logits

    indexer = {n: p for n, p in model.named_parameters() if ".indexer." in n}
    ran = {"sequence_length": PROBE_SEQUENCE, "index_topk": int(config()["index_topk"])}
    return forward, indexer, ran
