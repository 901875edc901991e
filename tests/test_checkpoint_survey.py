"""Naming forensics on the GLM-like pair: every difference classified, content through the rules."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from gates.checkpoints.check import check_checkpoint, compare_pair
from gates.core.hashing import StatCache
from gates.naming.rules import RuleSet
from tests.glm_fixture import INDEXER, MTP, paddle_arrays, reference_arrays, write_checkpoint
from tests.helpers import REPO_ROOT


def glm_rules(mtp: int = MTP) -> RuleSet:
    params = tomllib.loads((REPO_ROOT / "contracts/tensor-inventory.toml").read_text())["params"]
    return RuleSet.model_validate(
        {"rules": params["rules"], "placeholders": {**params["placeholders"], "mtp": str(mtp)}}
    )


def pair(tmp_path: Path, *, drop: bool) -> tuple[Path, Path]:
    reference = reference_arrays()
    write_checkpoint(tmp_path / "results/torch/checkpoint", reference, shards=3)
    write_checkpoint(
        tmp_path / "results/paddle/checkpoint", paddle_arrays(reference, drop_mtp_indexer=drop)
    )
    return tmp_path / "results/torch/checkpoint", tmp_path / "results/paddle/checkpoint"


def compare(tmp_path: Path, rules: RuleSet, *, drop: bool):  # type: ignore[no-untyped-def]
    pair(tmp_path, drop=drop)
    cache = StatCache(None)
    ref = check_checkpoint(tmp_path, "results/torch/checkpoint", cache=cache)
    cand = check_checkpoint(tmp_path, "results/paddle/checkpoint", cache=cache)
    return compare_pair(ref, cand, rules)


def test_the_seed_pair_has_exactly_the_five_mtp_indexer_tensors_as_structural(
    tmp_path: Path,
) -> None:
    report = compare(tmp_path, glm_rules(), drop=True)
    structural = report.survey.structural
    assert sorted(d.reference[0] for d in structural) == sorted(
        f"model.layers.{MTP}.self_attn.indexer.{suffix}" for suffix in INDEXER
    )
    assert all("missing on the candidate side" in d.detail for d in structural)
    for difference in report.survey.differences:
        if difference.klass != "structural":
            assert difference.rules, difference
    counts = report.survey.counts()
    assert counts["structural"] == 5
    assert counts["naming"] > 0 and counts["layout"] > 0
    assert counts["dtype"] == 1  # layer 1 router; the MTP router is also renamed: naming
    assert report.content is not None
    assert report.content.unequal == ()
    assert report.content.hash_match is False  # five tensors are missing


def test_the_full_pair_matches_through_fusion_transposes_and_the_cast(tmp_path: Path) -> None:
    report = compare(tmp_path, glm_rules(), drop=False)
    assert report.survey.structural == []
    assert report.content is not None
    assert report.content.hash_match is True
    assert report.content.mapped_reference_digest == report.content.candidate_digest
    assert report.reference.digest != report.candidate.digest  # raw hashes differ: naming alone


def test_classification_of_each_family(tmp_path: Path) -> None:
    report = compare(tmp_path, glm_rules(), drop=True)
    by_name = {d.reference[0]: d for d in report.survey.differences if d.reference}
    assert by_name["model.embed_tokens.weight"].klass == "naming"
    assert by_name["model.embed_tokens.weight"].rules == ("embedding",)
    gate = by_name["model.layers.0.mlp.gate_proj.weight"]
    assert gate.klass == "naming"
    assert gate.candidate == ("model.layers.0.mlp.up_gate_proj.weight",)
    assert set(gate.rules) == {"linear-transpose", "ffn-fusion"}
    mtp_expert = by_name[f"model.layers.{MTP}.mlp.experts.1.up_proj.weight"]
    assert set(mtp_expert.rules) == {"mtp-wrapper", "linear-transpose", "ffn-fusion"}
    assert mtp_expert.candidate == (
        f"model.layers.{MTP}.transformer_layer.mlp.experts.1.up_gate_proj.weight",
    )
    assert by_name["model.layers.1.self_attn.o_proj.weight"].klass == "layout"
    assert by_name["model.layers.1.mlp.gate.weight"].klass == "dtype"
    assert by_name["model.layers.1.self_attn.indexer.k_norm.bias"].klass == "naming"
    assert "model.layers.1.mlp.gate.e_score_correction_bias" not in by_name
    assert "model.norm.weight" not in by_name


def test_a_changed_value_breaks_hash_match_and_is_named(tmp_path: Path) -> None:
    reference = reference_arrays()
    candidate = paddle_arrays(reference)
    name = "model.layers.1.mlp.experts.0.up_gate_proj.weight"
    dtype, array = candidate[name]
    changed = array.copy()
    changed[0, 0] ^= np.uint16(1)
    candidate[name] = (dtype, changed)
    write_checkpoint(tmp_path / "ref", reference)
    write_checkpoint(tmp_path / "cand", candidate)
    cache = StatCache(None)
    report = compare_pair(
        check_checkpoint(tmp_path, "ref", cache=cache),
        check_checkpoint(tmp_path, "cand", cache=cache),
        glm_rules(),
    )
    assert report.content is not None
    assert report.content.unequal == (name,)
    assert report.content.hash_match is False


def test_an_undeclared_shape_change_and_an_extra_tensor_are_structural(tmp_path: Path) -> None:
    reference = reference_arrays()
    candidate = paddle_arrays(reference)
    candidate["model.norm.weight"] = ("BF16", np.zeros(9, "<u2"))
    candidate["model.extra_bias"] = ("BF16", np.zeros(2, "<u2"))
    write_checkpoint(tmp_path / "ref", reference)
    write_checkpoint(tmp_path / "cand", candidate)
    cache = StatCache(None)
    report = compare_pair(
        check_checkpoint(tmp_path, "ref", cache=cache),
        check_checkpoint(tmp_path, "cand", cache=cache),
        glm_rules(),
    )
    details = sorted(d.detail for d in report.survey.structural)
    assert details == [
        "extra on the candidate side: model.extra_bias",
        "model.norm.weight: expected BF16 [8], found BF16 [9]",
    ]


def test_without_rules_every_renamed_tensor_is_structural(tmp_path: Path) -> None:
    report = compare(tmp_path, RuleSet(), drop=False)
    counts = report.survey.counts()
    assert counts["naming"] == counts["layout"] == counts["dtype"] == 0
    assert counts["structural"] > 40


@pytest.mark.parametrize("shards", [1, 4])
def test_the_digest_does_not_depend_on_sharding(tmp_path: Path, shards: int) -> None:
    reference = reference_arrays()
    write_checkpoint(tmp_path / "a", reference, shards=2)
    write_checkpoint(tmp_path / "b", reference, shards=shards)
    cache = StatCache(None)
    assert (
        check_checkpoint(tmp_path, "a", cache=cache).digest
        == check_checkpoint(tmp_path, "b", cache=cache).digest
    )


@pytest.mark.slow
def test_paddle_and_numpy_writers_give_the_same_digest(tmp_path: Path) -> None:
    import paddle  # noqa: PLC0415  (slow import, only here)
    from safetensors.numpy import save_file as numpy_save  # noqa: PLC0415
    from safetensors.paddle import save_file as paddle_save  # noqa: PLC0415

    arrays = {
        "embed.weight": np.random.default_rng(1).standard_normal((16, 4)).astype(np.float32),
        "head.bias": np.arange(4, dtype=np.float32),
    }
    (tmp_path / "np").mkdir()
    (tmp_path / "pd").mkdir()
    numpy_save(arrays, str(tmp_path / "np/model.safetensors"))
    paddle_save(
        {k: paddle.to_tensor(v) for k, v in arrays.items()}, str(tmp_path / "pd/model.safetensors")
    )
    cache = StatCache(None)
    from_numpy = check_checkpoint(tmp_path, "np", cache=cache)
    from_paddle = check_checkpoint(tmp_path, "pd", cache=cache)
    assert from_numpy.valid and from_paddle.valid
    assert from_numpy.digest == from_paddle.digest
