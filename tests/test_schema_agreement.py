"""The receipt JSON Schema file and the pydantic model must accept exactly the same documents."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from gates.core.resources import schema, validator
from gates.receipts.model import Provenance, Receipt, Subject

VALID: dict[str, Any] = {
    "receiptVersion": "gates.receipt/v1",
    "id": "sha256:" + "a" * 64,
    "kind": "loss",
    "framework": "paddle",
    "createdAt": "2026-08-19T10:00:00Z",
    "subjects": [{"path": "results/paddle/loss.json", "sha256": "b" * 64, "size": 10}],
    "provenance": {
        "gitHead": "c" * 40,
        "pin": "c" * 40,
        "dirty": False,
        "freezeVerdict": "pass",
        "freezeReasons": [],
        "sourceTree": "d" * 64,
        "command": ["python", "train.py"],
        "environment": {"PADDLE_TRAINER_ID": "0"},
        "profile": {"tp": "2"},
        "inputs": [],
        "tool": "gates 0.1.0",
    },
    "evidenceClass": "formal",
    "formalWeight": 1,
    "stampReasons": [],
}

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return apply


def _delete(path: str) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        del target[last]

    return apply


MUTATIONS: dict[str, Mutation] = {
    "valid": lambda doc: None,
    "probe": lambda doc: doc.update(evidenceClass="probe", formalWeight=0),
    "probe-weight-1": _set("evidenceClass", "probe"),
    "formal-weight-0": _set("formalWeight", 0),
    "weight-true": _set("formalWeight", True),
    "weight-2": _set("formalWeight", 2),
    "formal-blocked": _set("provenance.freezeVerdict", "blocked"),
    "probe-blocked": lambda doc: (
        doc.update(evidenceClass="probe", formalWeight=0)
        or doc["provenance"].update(freezeVerdict="blocked")
    ),
    "framework-null": _set("framework", None),
    "framework-jax": _set("framework", "jax"),
    "kind-unknown": _set("kind", "gradients"),
    "version-2": _set("receiptVersion", "gates.receipt/v2"),
    "id-short": _set("id", "sha256:abc"),
    "id-upper": _set("id", "sha256:" + "A" * 64),
    "created-local": _set("createdAt", "2026-08-19 10:00:00"),
    "subjects-empty": _set("subjects", []),
    "subject-extra": _set("subjects.0.mode", "0644"),
    "subject-size-negative": _set("subjects.0.size", -1),
    "subject-size-float": _set("subjects.0.size", 1.0),
    "subject-size-string": _set("subjects.0.size", "10"),
    "subject-sha-short": _set("subjects.0.sha256", "b" * 63),
    "subject-path-empty": _set("subjects.0.path", ""),
    "dirty-string": _set("provenance.dirty", "false"),
    "dirty-int": _set("provenance.dirty", 0),
    "head-null": _set("provenance.gitHead", None),
    "head-short": _set("provenance.gitHead", "c" * 12),
    "head-sha256": _set("provenance.gitHead", "c" * 64),
    "tree-null": _set("provenance.sourceTree", None),
    "command-null": _set("provenance.command", None),
    "command-string": _set("provenance.command", "python train.py"),
    "env-int": _set("provenance.environment", {"WORLD": 4}),
    "profile-int": _set("provenance.profile", {"tp": 2}),
    "profile-key-upper": _set("provenance.profile", {"TP": "2"}),
    "inputs-bad": _set("provenance.inputs", ["md5:00"]),
    "provenance-extra": _set("provenance.host", "gpu01"),
    "top-extra": _set("signature", "x"),
    "reasons-int": _set("stampReasons", [1]),
    **{f"missing-{key}": _delete(key) for key in VALID},
    **{f"missing-provenance.{key}": _delete(f"provenance.{key}") for key in VALID["provenance"]},
    **{f"missing-subject.{key}": _delete(f"subjects.0.{key}") for key in VALID["subjects"][0]},
}


def _schema_accepts(doc: dict[str, Any]) -> bool:
    return not list(validator("receipt").iter_errors(doc))


def _model_accepts(doc: dict[str, Any]) -> bool:
    try:
        Receipt.model_validate(doc)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_schema_and_model_agree(name: str) -> None:
    doc = copy.deepcopy(VALID)
    MUTATIONS[name](doc)
    assert _schema_accepts(doc) == _model_accepts(doc), json.dumps(doc)


def test_the_mutations_cover_both_outcomes() -> None:
    outcomes = set()
    for mutation in MUTATIONS.values():
        doc = copy.deepcopy(VALID)
        mutation(doc)
        outcomes.add(_schema_accepts(doc))
    assert outcomes == {True, False}


@pytest.mark.parametrize(
    ("model", "pointer"),
    [(Receipt, None), (Provenance, "provenance"), (Subject, "subject")],
)
def test_property_names_and_required_fields_agree(
    model: type[BaseModel], pointer: str | None
) -> None:
    document = schema("receipt")
    part = document if pointer is None else document["$defs"][pointer]
    generated = model.model_json_schema(by_alias=True)
    assert set(part["properties"]) == set(generated["properties"])
    assert set(part["required"]) == set(generated.get("required", []))
