"""Each checker output model and its JSON Schema (receipts/schemas/) accept exactly the same
documents: realistic ones as the checkers write them, and each with one thing wrong."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gates.core.errors import GatesError
from gates.core.resources import schemas_dir, validator
from gates.outputs.checkpoint_check import CheckpointCheck
from gates.outputs.loss_check import DeterminismCheck, PairCheck
from gates.outputs.models import MODELS, check_output, parse_output
from gates.outputs.read import Opaque, read_output
from gates.receipts.model import ArtifactKind, Receipt
from gates.receipts.verify import Judgement, Status
from tests.test_schema_agreement import VALID as VALID_RECEIPT
from tests.test_schema_agreement import Mutation, _delete, _set

SHA = "ab" * 32
RECEIPT = "sha256:" + "cd" * 32


def _input(path: str) -> dict[str, Any]:
    return {"path": path, "receipt": RECEIPT, "steps": 100, "rounded": False, "series_sha256": SHA}


PAIR: dict[str, Any] = json.loads(
    (schemas_dir() / "examples" / "loss_check.valid.json").read_text(encoding="utf-8")
)
DETERMINISM: dict[str, Any] = {
    "format": "gates.loss_check/v1",
    "mode": "determinism",
    "runs": [_input("experiments/paddle-1/loss.json"), _input("experiments/paddle-2/loss.json")],
    "steps": 100,
    "deterministic_steps": 100,
    "first_differing_step": None,
    "lengths_match": True,
    "rounded": False,
    "deterministic": True,
    "series_sha256": SHA,
}
CHECKPOINT: dict[str, Any] = {
    "format": "gates.checkpoint_check/v1",
    "mode": "full",
    "path": "checkpoints/paddle/step-100",
    "valid": True,
    "problems": [],
    "hygiene_clean": True,
    "hygiene": [],
    "incomplete": [],
    "ranks": [{"rank": 0, "shards": ["model-00001-of-00002.safetensors"], "bytes": 4096}],
    "tensor_count": 12,
    "shard_count": 2,
    "digest": SHA,
    "layout_digest": SHA,
    "tensor_contents": {"model.embed_tokens.weight": SHA},
    "against": {
        "reference": "checkpoints/torch/step-100",
        "reference_digest": SHA,
        "structural_differences": 0,
        "hash_match": True,
        "mapped_reference_digest": SHA,
        "unequal_tensors": [],
        "mapping_problems": [],
    },
}
PARTIAL = {
    **{k: v for k, v in CHECKPOINT.items() if k not in ("against", "ranks", "incomplete")},
    "mode": "partial",
    "digest": None,
    "shard_range": {"index": 0, "count": 2, "shards": ["model-00001-of-00002.safetensors"]},
}
PARITY: dict[str, Any] = {
    "format": "gates.structure_parity/v1",
    "reference": {"path": "checkpoints/torch", "tensor_count": 12, "valid": True, "problems": []},
    "candidate": {"path": "checkpoints/paddle", "tensor_count": 11, "valid": True, "problems": []},
    "rules": "contracts/tensor-inventory.toml",
    "matched": 10,
    "counts": {"naming": 1, "layout": 1, "dtype": 0, "structural": 0},
    "differences": [
        {
            "class": "layout",
            "reference": [
                "model.layers.0.mlp.gate_proj.weight",
                "model.layers.0.mlp.up_proj.weight",
            ],
            "candidate": ["model.layers.0.mlp.up_gate_proj.weight"],
            "rules": ["fuse gate_proj+up_proj"],
            "detail": "fused along axis 1",
        }
    ],
    "rule_problems": [],
    "notes": [],
}

DOCUMENTS: dict[str, tuple[ArtifactKind, str, dict[str, Any]]] = {
    "pair": (ArtifactKind.LOSS_CHECK, "loss_check", PAIR),
    "determinism": (ArtifactKind.LOSS_CHECK, "loss_check", DETERMINISM),
    "checkpoint": (ArtifactKind.CHECKPOINT_CHECK, "checkpoint_check", CHECKPOINT),
    "partial": (ArtifactKind.CHECKPOINT_CHECK, "checkpoint_check", PARTIAL),
    "parity": (ArtifactKind.STRUCTURE_PARITY, "structure_parity", PARITY),
}

MUTATIONS: dict[str, dict[str, Mutation]] = {
    "pair": {
        "mode-unknown": _set("mode", "triple"),
        "format-2": _set("format", "gates.loss_check/v2"),
        "max-diff-int": _set("max_diff", 0),
        "max-diff-negative": _set("max_diff", -0.5),
        "max-diff-string": _set("max_diff", "0.5"),
        "divergence-0": _set("first_divergence_step", 0),
        "divergence-null": _set("first_divergence_step", None),
        "length-int": _set("length_match", 1),
        "dtype-half": _set("ulp_dtype", "float16"),
        "input-extra": _set("reference.host", "gpu01"),
        "input-sha-short": _set("candidate.series_sha256", "ab"),
        "input-receipt-bare": _set("candidate.receipt", "cd" * 32),
        "input-path-empty": _set("reference.path", ""),
        "input-steps-0": _set("reference.steps", 0),
        "top-extra": _set("note", "allowed beside the named keys"),
        "missing-max_ulp": _delete("max_ulp"),
        "missing-reference": _delete("reference"),
        "missing-input-rounded": _delete("reference.rounded"),
    },
    "determinism": {
        "one-run": lambda doc: doc.update(runs=doc["runs"][:1]),
        "deterministic-string": _set("deterministic", "true"),
        "sha-null": _set("series_sha256", None),
        "steps-0": _set("steps", 0),
        "differing-3": _set("first_differing_step", 3),
        "missing-runs": _delete("runs"),
        "missing-lengths_match": _delete("lengths_match"),
    },
    "checkpoint": {
        "mode-sliced": _set("mode", "sliced"),
        "top-extra": _set("host", "gpu01"),
        "digest-null": _set("digest", None),
        "digest-upper": _set("digest", SHA.upper()),
        "count-negative": _set("tensor_count", -1),
        "count-bool": _set("tensor_count", True),
        "rank-extra": _set("ranks.0.host", "gpu01"),
        "contents-short": _set("tensor_contents", {"w": "ab"}),
        "against-null": _set("against", None),
        "hash-null": _set("against.hash_match", None),
        "hash-string": _set("against.hash_match", "true"),
        "against-extra": _set("against.note", "x"),
        "missing-against-reference": _delete("against.reference"),
        "missing-layout_digest": _delete("layout_digest"),
        "missing-hygiene": _delete("hygiene"),
        "path-empty": _set("path", ""),
    },
    "partial": {
        "incomplete-named": _set("incomplete", ["model-00002-of-00002.safetensors.tmp"]),
        "count-0": _set("shard_range.count", 0),
        "index-negative": _set("shard_range.index", -1),
        "missing-shards": _delete("shard_range.shards"),
    },
    "parity": {
        "class-unknown": _set("differences.0.class", "rename"),
        "counts-extra": _set("counts.other", 1),
        "missing-counts-dtype": _delete("counts.dtype"),
        "rules-null": _set("rules", None),
        "rules-int": _set("rules", 3),
        "side-valid-int": _set("reference.valid", 1),
        "difference-extra": _set("differences.0.note", "x"),
        "missing-notes": _delete("notes"),
        "missing-rule_problems": _delete("rule_problems"),
        "matched-negative": _set("matched", -1),
    },
}
CASES = [
    (document, name)
    for document, mutations in MUTATIONS.items()
    for name in ["valid", *sorted(mutations)]
]


def _mutated(document: str, name: str) -> dict[str, Any]:
    doc = copy.deepcopy(DOCUMENTS[document][2])
    if name != "valid":
        MUTATIONS[document][name](doc)
    return doc


def _schema_accepts(schema: str, doc: dict[str, Any]) -> bool:
    return not list(validator(schema).iter_errors(doc))


@pytest.mark.parametrize(("document", "name"), CASES)
def test_model_and_schema_agree(document: str, name: str) -> None:
    kind, schema, _ = DOCUMENTS[document]
    doc = _mutated(document, name)
    assert _schema_accepts(schema, doc) == (parse_output(kind, doc) is not None), json.dumps(doc)


def test_the_cases_cover_both_outcomes() -> None:
    for document, mutations in MUTATIONS.items():
        kind, schema, _ = DOCUMENTS[document]
        outcomes = {_schema_accepts(schema, _mutated(document, n)) for n in mutations}
        assert outcomes == {True, False}, document
        assert parse_output(kind, _mutated(document, "valid")) is not None


def test_every_kind_with_a_model_has_a_schema() -> None:
    for kind in MODELS:
        assert (schemas_dir() / f"{kind.value}.schema.json").is_file()


def test_the_modes_parse_to_their_own_models() -> None:
    assert isinstance(parse_output(ArtifactKind.LOSS_CHECK, PAIR), PairCheck)
    assert isinstance(parse_output(ArtifactKind.LOSS_CHECK, DETERMINISM), DeterminismCheck)
    checkpoint = parse_output(ArtifactKind.CHECKPOINT_CHECK, CHECKPOINT)
    assert isinstance(checkpoint, CheckpointCheck)
    assert checkpoint.hash_match is True
    assert parse_output(ArtifactKind.ENV, {"framework_version": "3.0"}) is None


def test_a_checker_cannot_write_what_its_model_rejects() -> None:
    check_output(ArtifactKind.CHECKPOINT_CHECK, CHECKPOINT, "outputs/checkpoint_check.json")
    with pytest.raises(GatesError) as caught:
        check_output(
            ArtifactKind.CHECKPOINT_CHECK, {**CHECKPOINT, "valid": "yes"}, "outputs/c.json"
        )
    assert caught.value.one_line().startswith(
        "outputs/c.json: the checkpoint_check output does not fit its model at valid:"
    )


def _judged(path: str, kind: str, status: Status = Status.FORMAL) -> Judgement:
    doc = copy.deepcopy(VALID_RECEIPT)
    doc.update(kind=kind, subjects=[{"path": path, "sha256": SHA, "size": 1}])
    return Judgement(
        path.removesuffix(".json") + ".receipt.json", Receipt.model_validate(doc), status, "why"
    )


def test_outputs_are_read_into_their_models(tmp_path: Path) -> None:
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "c.json").write_text(json.dumps(CHECKPOINT), encoding="utf-8")
    (tmp_path / "outputs" / "p.json").write_text(json.dumps({**PARITY, "matched": -1}), "utf-8")
    (tmp_path / "outputs" / "l.json").write_text("[1, 2]", encoding="utf-8")
    checkpoint = read_output(tmp_path, _judged("outputs/c.json", "checkpoint_check"))
    assert isinstance(checkpoint, CheckpointCheck)
    assert checkpoint.against is not None and checkpoint.against.reference_digest == SHA
    # a document that does not fit its model is shown as the plain object it is
    assert read_output(tmp_path, _judged("outputs/p.json", "structure_parity")) == {
        **PARITY,
        "matched": -1,
    }
    assert read_output(tmp_path, _judged("outputs/l.json", "loss_check")) == Opaque(1)
    assert read_output(tmp_path, _judged("outputs/missing.json", "loss_check")) == Opaque(1)
    rejected = _judged("outputs/c.json", "checkpoint_check", Status.REJECTED)
    assert read_output(tmp_path, rejected) is None
