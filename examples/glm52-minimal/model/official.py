"""The "official minimal checkpoint" of the tiny GLM-like model, in HF/torch naming.

Built deterministically with numpy from config.json: layer 0 is an MoE layer
(F32 router, two routed experts with gate/up/down projections in torch
`[out, in]` layout), layer `num_hidden_layers` is the MTP layer with its DSA
indexer (wq_b, wk, k_norm weight and bias, weights_proj), eh_proj, enorm,
hnorm and shared_head.norm. Both training scripts start from these weights.

`mtp_forward` is the official MTP layer's forward (numpy): its attention keeps, for
each query, the top `INDEX_TOPK` keys that the DSA indexer scores highest. While a
sequence is not longer than that, every key is kept, whatever the indexer says.
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


INDEX_TOPK = 16  # GLM-5's index_topk is 2048; this tiny model's sequences hold 12 tokens


def _rms(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    scale = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6))
    out: np.ndarray = (x * scale * weight).astype(np.float32)
    return out


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    centered = x - x.mean(axis=-1, keepdims=True)
    normed = centered / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + 1e-6)
    out: np.ndarray = (normed * weight + bias).astype(np.float32)
    return out


def mtp_forward(weights: dict[str, np.ndarray], ids: np.ndarray) -> np.ndarray:
    """The MTP layer on token ids (the embeddings stand in for the main model's hidden
    state): eh_proj over [enorm(emb), hnorm(hidden)], causal attention over the keys the
    indexer selects, shared_head.norm."""
    c = config()
    mtp = f"model.layers.{c['num_hidden_layers']}"
    w = {name.removeprefix(mtp + "."): value for name, value in weights.items()}
    emb = weights["model.embed_tokens.weight"][ids]
    joined = np.concatenate([_rms(emb, w["enorm.weight"]), _rms(emb, w["hnorm.weight"])], -1)
    x = joined @ w["eh_proj.weight"].T
    normed = _rms(x, w["input_layernorm.weight"])
    batch, seq, _ = normed.shape
    heads, index = 2, c["index_head_dim"]
    # the DSA indexer: per query, a score for every key
    queries = (normed @ w["self_attn.indexer.wq_b.weight"].T).reshape(batch, seq, heads, index)
    keys = _layer_norm(
        normed @ w["self_attn.indexer.wk.weight"].T,
        w["self_attn.indexer.k_norm.weight"],
        w["self_attn.indexer.k_norm.bias"],
    )
    head_weights = normed @ w["self_attn.indexer.weights_proj.weight"].T
    scores = np.einsum("bshd,btd->bsht", queries, keys)
    scores = (np.maximum(scores, 0) * head_weights[..., None]).sum(axis=2)
    causal = np.tril(np.ones((seq, seq), bool))
    scores = np.where(causal, scores, -np.inf)
    keep = min(INDEX_TOPK, seq)
    chosen = np.argsort(-scores, axis=-1, kind="stable")[..., :keep]
    selected = np.zeros_like(causal, shape=scores.shape)
    np.put_along_axis(selected, chosen, True, axis=-1)
    mask = selected & causal
    logits = np.where(mask, normed @ normed.transpose(0, 2, 1) / np.sqrt(normed.shape[-1]), -np.inf)
    attention = np.exp(logits - logits.max(axis=-1, keepdims=True))
    attention /= attention.sum(axis=-1, keepdims=True)
    out = x + (attention @ normed).astype(np.float32)
    return _rms(out, w["shared_head.norm.weight"])
