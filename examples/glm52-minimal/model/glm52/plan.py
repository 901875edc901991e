"""What the Paddle GLM-5.2 model builds from its config: the layer plan, attribute by attribute.

The model code of the example: `gates check config` finds here where each
config attribute is read (model/glm52/configuration.py only stores them).
"""

from __future__ import annotations

from typing import Any


def attention(config: Any) -> dict[str, Any]:
    """MLA attention with the DSA indexer."""
    return {
        "heads": config.num_attention_heads,
        "kv_heads": config.num_key_value_heads,
        "head_dim": config.head_dim,
        "qk_head_dim": config.qk_head_dim,
        "qk_nope_head_dim": config.qk_nope_head_dim,
        "qk_rope_head_dim": config.qk_rope_head_dim,
        "v_head_dim": config.v_head_dim,
        "q_lora_rank": config.q_lora_rank,
        "kv_lora_rank": config.kv_lora_rank,
        "qk_norm": config.use_qk_norm,
        "bias": config.attention_bias,
        "dropout": config.attention_dropout,
        "rope": {
            "type": config.rope_parameters["rope_type"],
            "theta": config.rope_theta,
            "interleave": config.rope_interleave,
            "max_positions": config.max_position_embeddings,
        },
        "indexer": {
            "heads": config.index_n_heads,
            "head_dim": config.index_head_dim,
            "topk": config.index_topk,
            "topk_freq": config.index_topk_freq,
            "skip_topk_offset": config.index_skip_topk_offset,
            "topk_pattern": config.index_topk_pattern,
            "share_for_mtp": config.index_share_for_mtp_iteration,
            "rope_interleave": config.rotary_interleaved,
            "per_layer": getattr(config, "indexer_types", None),
        },
    }


def mlp(config: Any, layer: int) -> dict[str, Any]:
    types = getattr(config, "mlp_layer_types", None)
    dense = types[layer] == "dense" if types else layer < config.first_k_dense_replace
    if dense or layer % config.moe_layer_freq:
        return {"kind": "dense", "size": config.intermediate_size, "act": config.hidden_act}
    return {
        "kind": "moe",
        "experts": config.n_routed_experts,
        "shared": config.n_shared_experts,
        "per_token": config.num_experts_per_tok,
        "size": config.moe_intermediate_size,
        "groups": (config.n_group, config.topk_group),
        "router": (config.scoring_func, config.topk_method, config.norm_topk_prob),
        "scale": config.routed_scaling_factor,
        "act": config.hidden_act,
    }


def layer_plan(config: Any) -> dict[str, Any]:
    layers = config.num_hidden_layers + config.num_nextn_predict_layers
    return {
        "architecture": config.architectures[0],
        "model_type": config.model_type,
        "dtype": config.dtype,
        "vocab": config.vocab_size,
        "hidden": config.hidden_size,
        "norm_eps": config.rms_norm_eps,
        "init_std": config.initializer_range,
        "tokens": {"pad": config.pad_token_id, "eos": config.eos_token_id},
        "tie_embeddings": config.tie_word_embeddings,
        "kv_cache": config.use_cache,
        "attention": attention(config),
        "layers": [mlp(config, layer) for layer in range(layers)],
    }
