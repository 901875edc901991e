"""Every artifact schema has a valid and an invalid example, and our readers agree with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from gates.core.resources import schema, schemas_dir
from gates.receipts.artifacts import artifact_problem, schema_errors
from gates.receipts.model import ArtifactKind

EXAMPLES = schemas_dir() / "examples"
KINDS = ["manifest", "env", "loss", "raw_loss", "loss_check"]


def example(kind: str, validity: str) -> Path:
    suffix = ".jsonl" if kind == "raw_loss" else ".json"
    return EXAMPLES / f"{kind}.{validity}{suffix}"


def documents(path: Path) -> list[object]:
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.loads(text)]


@pytest.mark.parametrize("name", sorted(p.name for p in schemas_dir().glob("*.schema.json")))
def test_every_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    Draft202012Validator.check_schema(json.loads((schemas_dir() / name).read_text()))


@pytest.mark.parametrize("kind", KINDS)
def test_valid_example_passes_schema_and_reader(kind: str) -> None:
    path = example(kind, "valid")
    for document in documents(path):
        assert schema_errors(ArtifactKind(kind), document) == []
    assert artifact_problem(ArtifactKind(kind), path, path.name) is None


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "raw_loss"])
def test_invalid_example_fails_schema_and_reader(kind: str) -> None:
    path = example(kind, "invalid")
    assert schema_errors(ArtifactKind(kind), documents(path)[0]) != []
    problem = artifact_problem(ArtifactKind(kind), path, path.name)
    assert problem is not None
    assert problem.startswith(path.name)


def test_invalid_raw_loss_example_fails_the_reader_on_the_repeated_step() -> None:
    path = example("raw_loss", "invalid")
    problem = artifact_problem(ArtifactKind.RAW_LOSS, path, path.name)
    assert problem is not None
    assert "line 2: step 1 where step 2 was expected (a repeated step)" in problem


def test_first_schema_error_names_its_json_path(tmp_path: Path) -> None:
    path = example("env", "invalid")
    problem = artifact_problem(ArtifactKind.ENV, path, "results/paddle/env.json")
    assert problem == (
        "results/paddle/env.json: $.model_config_sha256: '185f93ee' does not match "
        "'^[0-9a-f]{64}$' (and 2 more)"
    )


def test_manifest_format_is_the_supported_list() -> None:
    assert schema("manifest")["properties"]["format"]["enum"] == ["gates.run-manifest/v1"]
