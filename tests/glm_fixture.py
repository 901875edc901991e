"""A GLM-like minimal checkpoint pair, built in code and written by the safetensors library.

Reference (HF/torch naming, `[out, in]` linear weights, BF16 with an F32
router bias): a dense layer 0, an MoE layer 1 (two routed experts and a
shared expert), and the MTP layer 2 (a full MoE decoder layer with its DSA
indexer, plus eh_proj, enorm, hnorm and shared_head.norm).

Candidate (PaddleFormers/PaddleFleet naming and layout), converted here by
explicit code, independently of gates' rule engine: embedding and lm_head
renamed, the indexer nested under core_attention, the MTP decoder keys under
transformer_layer, shared_head.norm as norm, every linear weight transposed,
gate_proj + up_proj fused into up_gate_proj (gate first, along axis 1), and
the router weight cast to F32. With `drop_mtp_indexer`, the five MTP indexer
tensors are missing, as in the seed PR.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors import TensorSpec, serialize_file

from bench.glm52_keyset import INDEXER, LINEAR, paddle_name

Arrays = dict[str, tuple[str, np.ndarray]]

HIDDEN, Q_LORA, KV_LORA, HEADS_DIM, FFN, EXPERT_FFN, VOCAB, INDEX_DIM = 8, 6, 4, 12, 16, 4, 32, 4
MTP = 2
_NAMES = {"BF16": "bfloat16", "F32": "float32", "F16": "float16"}


def _bf16(rng: np.random.Generator, *shape: int) -> tuple[str, np.ndarray]:
    values = rng.standard_normal(shape).astype("<f4")
    return "BF16", (values.view("<u4") >> 16).astype("<u2")


def _layer(rng: np.random.Generator, prefix: str, *, moe: bool) -> Arrays:
    tensors: Arrays = {
        f"{prefix}.input_layernorm.weight": _bf16(rng, HIDDEN),
        f"{prefix}.post_attention_layernorm.weight": _bf16(rng, HIDDEN),
        f"{prefix}.self_attn.q_a_proj.weight": _bf16(rng, Q_LORA, HIDDEN),
        f"{prefix}.self_attn.q_a_layernorm.weight": _bf16(rng, Q_LORA),
        f"{prefix}.self_attn.q_b_proj.weight": _bf16(rng, HEADS_DIM, Q_LORA),
        f"{prefix}.self_attn.kv_a_proj_with_mqa.weight": _bf16(rng, KV_LORA + 2, HIDDEN),
        f"{prefix}.self_attn.kv_a_layernorm.weight": _bf16(rng, KV_LORA),
        f"{prefix}.self_attn.kv_b_proj.weight": _bf16(rng, 2 * HEADS_DIM, KV_LORA),
        f"{prefix}.self_attn.o_proj.weight": _bf16(rng, HIDDEN, HEADS_DIM),
        f"{prefix}.self_attn.indexer.wq_b.weight": _bf16(rng, 2 * INDEX_DIM, Q_LORA),
        f"{prefix}.self_attn.indexer.wk.weight": _bf16(rng, INDEX_DIM, HIDDEN),
        f"{prefix}.self_attn.indexer.k_norm.weight": _bf16(rng, INDEX_DIM),
        f"{prefix}.self_attn.indexer.k_norm.bias": _bf16(rng, INDEX_DIM),
        f"{prefix}.self_attn.indexer.weights_proj.weight": _bf16(rng, 2, HIDDEN),
    }
    if not moe:
        for proj, shape in (
            ("gate_proj", (FFN, HIDDEN)),
            ("up_proj", (FFN, HIDDEN)),
            ("down_proj", (HIDDEN, FFN)),
        ):
            tensors[f"{prefix}.mlp.{proj}.weight"] = _bf16(rng, *shape)
        return tensors
    tensors[f"{prefix}.mlp.gate.weight"] = _bf16(rng, 2, HIDDEN)
    tensors[f"{prefix}.mlp.gate.e_score_correction_bias"] = (
        "F32",
        rng.standard_normal(2).astype("<f4").view("<u4"),
    )
    for owner in ("shared_experts", "experts.0", "experts.1"):
        for proj, shape in (
            ("gate_proj", (EXPERT_FFN, HIDDEN)),
            ("up_proj", (EXPERT_FFN, HIDDEN)),
            ("down_proj", (HIDDEN, EXPERT_FFN)),
        ):
            tensors[f"{prefix}.mlp.{owner}.{proj}.weight"] = _bf16(rng, *shape)
    return tensors


def reference_arrays(seed: int = 0) -> Arrays:
    rng = np.random.default_rng(seed)
    tensors: Arrays = {
        "model.embed_tokens.weight": _bf16(rng, VOCAB, HIDDEN),
        "model.norm.weight": _bf16(rng, HIDDEN),
        "lm_head.weight": _bf16(rng, VOCAB, HIDDEN),
    }
    tensors.update(_layer(rng, "model.layers.0", moe=False))
    tensors.update(_layer(rng, "model.layers.1", moe=True))
    tensors.update(_layer(rng, f"model.layers.{MTP}", moe=True))
    for name, shape in (
        ("eh_proj.weight", (HIDDEN, 2 * HIDDEN)),
        ("enorm.weight", (HIDDEN,)),
        ("hnorm.weight", (HIDDEN,)),
        ("shared_head.norm.weight", (HIDDEN,)),
    ):
        tensors[f"model.layers.{MTP}.{name}"] = _bf16(rng, *shape)
    return tensors


def paddle_arrays(reference: Arrays, *, drop_mtp_indexer: bool = False) -> Arrays:
    converted: Arrays = {}
    for name, (dtype, array) in reference.items():
        parts = name.split(".")
        value, kind = array, dtype
        if parts[-1] == "weight" and parts[-2] in LINEAR:
            value = np.ascontiguousarray(array.T)
        if name.endswith(".mlp.gate.weight"):
            kind, value = "F32", array.astype("<u4") << 16
        converted[paddle_name(name, MTP)] = (kind, value)
    for name in [n for n in converted if n.endswith(".gate_proj.weight")]:
        up = name.replace(".gate_proj.", ".up_proj.")
        fused = np.concatenate([converted.pop(name)[1], converted.pop(up)[1]], axis=1)
        converted[name.replace(".gate_proj.", ".up_gate_proj.")] = ("BF16", fused)
    if drop_mtp_indexer:
        prefix = f"model.layers.{MTP}.transformer_layer.self_attn.core_attention.indexer."
        for suffix in INDEXER:
            del converted[prefix + suffix]
    return converted


def write_checkpoint(folder: Path, arrays: Arrays, *, shards: int = 2) -> Path:
    """Shards written by safetensors' own serializer, plus model.safetensors.index.json."""
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(arrays)
    weight_map = {}
    for index in range(shards):
        shard = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        chosen = names[index::shards]
        keep = {n: np.ascontiguousarray(arrays[n][1]) for n in chosen}
        specs = {
            n: TensorSpec(
                dtype=_NAMES[arrays[n][0]],
                shape=list(keep[n].shape),
                data_ptr=keep[n].ctypes.data,
                data_len=keep[n].nbytes,
            )
            for n in chosen
        }
        serialize_file(specs, str(folder / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(chosen, shard))
    index_doc = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index_doc, indent=2))
    return folder


def glm_aoa_statements() -> list[str]:
    """The same conversion as PaddleFormers-style AOA statements (MTP statements first)."""
    mtp, wrapped = "model.layers.$MTP", "model.layers.$MTP.transformer_layer"
    layer = "model.layers.$LAYER_ID"
    attention = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
    indexer = (
        "wq_b.weight^T",
        "wk.weight^T",
        "k_norm.weight",
        "k_norm.bias",
        "weights_proj.weight^T",
    )
    statements = [
        f"{mtp}.shared_head.norm.weight -> {mtp}.norm.weight",
        f"{mtp}.eh_proj.weight^T -> {mtp}.eh_proj.weight",
        f"{mtp}.mlp.gate.weight -> {wrapped}.mlp.gate.weight, dtype='float32'",
    ]
    for part in (
        "input_layernorm.weight",
        "post_attention_layernorm.weight",
        "mlp.gate.e_score_correction_bias",
        "self_attn.q_a_layernorm.weight",
        "self_attn.kv_a_layernorm.weight",
    ):
        statements.append(f"{mtp}.{part} -> {wrapped}.{part}")
    for source, target in ((mtp, wrapped), (layer, layer)):
        for owner in ("mlp", "mlp.shared_experts", "mlp.experts.$EXPERT_ID"):
            statements.append(
                f"{source}.{owner}.gate_proj.weight^T, {source}.{owner}.up_proj.weight^T"
                f" -> {target}.{owner}.up_gate_proj.weight, fused_ffn"
            )
            statements.append(
                f"{source}.{owner}.down_proj.weight^T -> {target}.{owner}.down_proj.weight"
            )
        for proj in attention:
            statements.append(
                f"{source}.self_attn.{proj}.weight^T -> {target}.self_attn.{proj}.weight"
            )
        for name in indexer:
            bare = name.removesuffix("^T")
            statements.append(
                f"{source}.self_attn.indexer.{name}"
                f" -> {target}.self_attn.core_attention.indexer.{bare}"
            )
    statements += [
        "model.embed_tokens.weight -> model.embedding.embed_tokens.weight",
        "lm_head.weight -> model.lm_head.weight",
        f"{layer}.mlp.gate.weight -> {layer}.mlp.gate.weight, dtype='float32'",
    ]
    return statements
