"""The "official minimal checkpoint" of the tiny GLM-like model, in HF/torch naming.

Built deterministically with numpy from config.json: layer 0 is an MoE layer
(F32 router, two routed experts with gate/up/down projections in torch
`[out, in]` layout), layer `num_hidden_layers` is the MTP layer with its DSA
indexer (wq_b, wk, k_norm weight and bias, weights_proj), eh_proj, enorm,
hnorm and shared_head.norm. Both training scripts start from these weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CONFIG = Path(__file__).with_name("config.json")


def config() -> dict[str, int]:
    loaded: dict[str, int] = json.loads(CONFIG.read_text())
    return loaded


def official_weights() -> dict[str, np.ndarray]:
    c = config()
    rng = np.random.default_rng(c["seed"])
    hidden, ffn, vocab, index = (
        c["hidden_size"],
        c["moe_intermediate_size"],
        c["vocab_size"],
        c["index_head_dim"],
    )

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    ones = np.ones(hidden, np.float32)
    weights = {
        "model.embed_tokens.weight": normal(vocab, hidden),
        "model.layers.0.input_layernorm.weight": ones.copy(),
        "model.layers.0.mlp.gate.weight": normal(c["n_routed_experts"], hidden),
        "model.norm.weight": ones.copy(),
        "lm_head.weight": normal(vocab, hidden),
    }
    for expert in range(c["n_routed_experts"]):
        prefix = f"model.layers.0.mlp.experts.{expert}"
        weights[f"{prefix}.gate_proj.weight"] = normal(ffn, hidden)
        weights[f"{prefix}.up_proj.weight"] = normal(ffn, hidden)
        weights[f"{prefix}.down_proj.weight"] = normal(hidden, ffn)
    mtp = f"model.layers.{c['num_hidden_layers']}"
    weights.update(
        {
            f"{mtp}.input_layernorm.weight": ones.copy(),
            f"{mtp}.self_attn.indexer.wq_b.weight": normal(2 * index, hidden),
            f"{mtp}.self_attn.indexer.wk.weight": normal(index, hidden),
            f"{mtp}.self_attn.indexer.k_norm.weight": np.ones(index, np.float32),
            f"{mtp}.self_attn.indexer.k_norm.bias": np.zeros(index, np.float32),
            f"{mtp}.self_attn.indexer.weights_proj.weight": normal(2, hidden),
            f"{mtp}.eh_proj.weight": normal(hidden, 2 * hidden),
            f"{mtp}.enorm.weight": ones.copy(),
            f"{mtp}.hnorm.weight": ones.copy(),
            f"{mtp}.shared_head.norm.weight": ones.copy(),
        }
    )
    return weights


def tokens() -> tuple[np.ndarray, np.ndarray]:
    c = config()
    rng = np.random.default_rng(c["seed"] + 1)
    data = rng.integers(0, c["vocab_size"], (c["batch_size"], c["seq_len"] + 1))
    return data[:, :-1].astype("int64"), data[:, 1:].astype("int64")
