"""The GLM-5.2 tensor key set (names, dtypes, shapes) from its config.json, on both sides.

Reference: the official HF/torch checkpoint naming (`[out, in]` linear
weights, BF16, F32 router bias). Candidate: the PaddleFormers/PaddleFleet
naming and layout (embedding and lm_head renamed, the DSA indexer nested under
core_attention, the MTP decoder keys under transformer_layer, shared_head.norm
as norm, linear weights transposed, gate_proj + up_proj fused into
up_gate_proj along axis 1, the router weight cast to F32), written
independently of gates' rule engine. With ``drop_mtp_indexer`` the five MTP
indexer tensors are missing, as in the seed PR.

`write_header_only` writes real safetensors headers whose data section is a
hole (the file has its full size but no data blocks), so a 1.5 TB key set
takes a few MB of disk. Used by bench/make_glm52_headers.py (full size) and by
the tests (a reduced config: fewer layers and experts, the same families).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

CONFIG = Path(__file__).resolve().parent / "data" / "glm52-config.json"
SHARD_BYTES = 5 * 1024**3
INDEXER = ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight")
LINEAR = {
    "q_a_proj",
    "q_b_proj",
    "kv_a_proj_with_mqa",
    "kv_b_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "eh_proj",
    "wq_b",
    "wk",
    "weights_proj",
}
BYTES = {"BF16": 2, "F32": 4}

Keyset = dict[str, tuple[str, tuple[int, ...]]]


def load_config(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(CONFIG.read_text())
    config.update(overrides or {})
    return config


def _layer(c: dict[str, Any], prefix: str, *, moe: bool) -> Keyset:
    hidden, q_lora, kv_lora = c["hidden_size"], c["q_lora_rank"], c["kv_lora_rank"]
    heads, index_heads, index_dim = (
        c["num_attention_heads"],
        c["index_n_heads"],
        c["index_head_dim"],
    )
    bf16 = "BF16"
    keys: Keyset = {
        f"{prefix}.input_layernorm.weight": (bf16, (hidden,)),
        f"{prefix}.post_attention_layernorm.weight": (bf16, (hidden,)),
        f"{prefix}.self_attn.q_a_proj.weight": (bf16, (q_lora, hidden)),
        f"{prefix}.self_attn.q_a_layernorm.weight": (bf16, (q_lora,)),
        f"{prefix}.self_attn.q_b_proj.weight": (bf16, (heads * c["qk_head_dim"], q_lora)),
        f"{prefix}.self_attn.kv_a_proj_with_mqa.weight": (
            bf16,
            (kv_lora + c["qk_rope_head_dim"], hidden),
        ),
        f"{prefix}.self_attn.kv_a_layernorm.weight": (bf16, (kv_lora,)),
        f"{prefix}.self_attn.kv_b_proj.weight": (
            bf16,
            (heads * (c["qk_nope_head_dim"] + c["v_head_dim"]), kv_lora),
        ),
        f"{prefix}.self_attn.o_proj.weight": (bf16, (hidden, heads * c["v_head_dim"])),
        f"{prefix}.self_attn.indexer.wq_b.weight": (bf16, (index_heads * index_dim, q_lora)),
        f"{prefix}.self_attn.indexer.wk.weight": (bf16, (index_dim, hidden)),
        f"{prefix}.self_attn.indexer.k_norm.weight": (bf16, (index_dim,)),
        f"{prefix}.self_attn.indexer.k_norm.bias": (bf16, (index_dim,)),
        f"{prefix}.self_attn.indexer.weights_proj.weight": (bf16, (index_heads, hidden)),
    }
    owners = [("mlp", c["intermediate_size"])]
    if moe:
        experts, ffn = c["n_routed_experts"], c["moe_intermediate_size"]
        keys[f"{prefix}.mlp.gate.weight"] = (bf16, (experts, hidden))
        keys[f"{prefix}.mlp.gate.e_score_correction_bias"] = ("F32", (experts,))
        owners = [("mlp.shared_experts", ffn * c["n_shared_experts"])]
        owners += [(f"mlp.experts.{e}", ffn) for e in range(experts)]
    for owner, ffn in owners:
        keys[f"{prefix}.{owner}.gate_proj.weight"] = (bf16, (ffn, hidden))
        keys[f"{prefix}.{owner}.up_proj.weight"] = (bf16, (ffn, hidden))
        keys[f"{prefix}.{owner}.down_proj.weight"] = (bf16, (hidden, ffn))
    return keys


def reference_keyset(config: dict[str, Any]) -> Keyset:
    """Every tensor of the official checkpoint: layers, MoE experts and the MTP layer."""
    hidden, vocab, mtp = config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]
    keys: Keyset = {
        "model.embed_tokens.weight": ("BF16", (vocab, hidden)),
        "model.norm.weight": ("BF16", (hidden,)),
        "lm_head.weight": ("BF16", (vocab, hidden)),
    }
    for layer in range(mtp + config["num_nextn_predict_layers"]):
        moe = layer >= config["first_k_dense_replace"]
        keys.update(_layer(config, f"model.layers.{layer}", moe=moe))
    for name, shape in (
        ("eh_proj.weight", (hidden, 2 * hidden)),
        ("enorm.weight", (hidden,)),
        ("hnorm.weight", (hidden,)),
        ("shared_head.norm.weight", (hidden,)),
    ):
        keys[f"model.layers.{mtp}.{name}"] = ("BF16", shape)
    return keys


def paddle_name(name: str, mtp: int) -> str:
    """A reference (HF) tensor name as the PaddleFormers conversion names it."""
    if name == "model.embed_tokens.weight":
        return "model.embedding.embed_tokens.weight"
    if name == "lm_head.weight":
        return "model.lm_head.weight"
    prefix = f"model.layers.{mtp}."
    if name.startswith(prefix):
        rest = name[len(prefix) :]
        if rest == "shared_head.norm.weight":
            name = f"{prefix}norm.weight"
        elif rest.split(".")[0] in (
            "self_attn",
            "mlp",
            "input_layernorm",
            "post_attention_layernorm",
        ):
            name = f"{prefix}transformer_layer.{rest}"
    return name.replace(".self_attn.indexer.", ".self_attn.core_attention.indexer.")


def paddle_keyset(reference: Keyset, mtp: int, *, drop_mtp_indexer: bool) -> Keyset:
    """The candidate a PaddleFormers conversion writes from ``reference``."""
    converted: Keyset = {}
    for name, (dtype, shape) in reference.items():
        parts = name.split(".")
        kind, dims = dtype, shape
        if parts[-1] == "weight" and parts[-2] in LINEAR:
            dims = tuple(reversed(shape))
        if name.endswith(".mlp.gate.weight"):
            kind = "F32"
        converted[paddle_name(name, mtp)] = (kind, dims)
    for name in [n for n in converted if n.endswith(".gate_proj.weight")]:
        dtype, (rows, cols) = converted.pop(name)
        converted.pop(name.replace(".gate_proj.", ".up_proj."))
        converted[name.replace(".gate_proj.", ".up_gate_proj.")] = (dtype, (rows, 2 * cols))
    if drop_mtp_indexer:
        prefix = f"model.layers.{mtp}.transformer_layer.self_attn.core_attention.indexer."
        for suffix in INDEXER:
            del converted[prefix + suffix]
    return converted


def nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * BYTES[dtype]


def _write_shard(path: Path, tensors: list[tuple[str, str, tuple[int, ...]]]) -> None:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        size = nbytes(dtype, shape)
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        handle.truncate(8 + len(raw) + offset)  # the data is a hole: no blocks on disk


def write_header_only(folder: Path, keys: Keyset, *, shard_bytes: int = SHARD_BYTES) -> int:
    """Shards of about ``shard_bytes`` (in name order) plus the index; returns the shard count."""
    folder.mkdir(parents=True, exist_ok=True)
    groups: list[list[tuple[str, str, tuple[int, ...]]]] = [[]]
    filled = 0
    for name in sorted(keys):
        dtype, shape = keys[name]
        if groups[-1] and filled + nbytes(dtype, shape) > shard_bytes:
            groups.append([])
            filled = 0
        groups[-1].append((name, dtype, shape))
        filled += nbytes(dtype, shape)
    weight_map: dict[str, str] = {}
    for number, group in enumerate(groups, start=1):
        shard = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        _write_shard(folder / shard, group)
        weight_map.update(dict.fromkeys((name for name, _, _ in group), shard))
    total = sum(nbytes(*keys[name]) for name in keys)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return len(groups)
