"""`gates audit --format github` points at the files and TOML keys a criterion names in its
typed fields (`Criterion.files`, `Criterion.key`), never at what its detail merely mentions:
a detail quotes evidence, and evidence is written by whoever ran the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.core.criteria import Criterion
from gates.engine.audit import run_audit
from gates.reporters.github_report import files_named
from tests.helpers import RUN_ENV, Workspace, inputs_at, write


def annotated(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The `file=` of every annotation (`::error file=F,line=N,title=...::`)."""
    result = ws.gates(capsys, "audit", "--format", "github")
    assert result.code == 1, result.err
    return [
        line.split("file=", 1)[1].split(",", 1)[0]
        for line in result.out.splitlines()
        if " file=" in line
    ]


def env_file(ws: Workspace, framework: str, **fields: str) -> None:
    document = {"framework": framework, **RUN_ENV, **fields}
    write(ws.root, f"results/{framework}/env.json", json.dumps(document))


def line_of(ws: Workspace, contract: str, key: str) -> int:
    lines = (ws.root / contract).read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.startswith(f"{key} ="))


def test_a_path_a_detail_only_mentions_is_not_annotated(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    # env.json's values are the job's to write: they name files of the workspace on purpose
    env_file(ws, "torch", revision="README.md", model_config_sha256="trainer/train.py")
    env_file(ws, "paddle", revision="../../etc/passwd.txt")
    lines = ws.gates(capsys, "audit", "--format", "github").out
    assert "revision README.md is not the pinned" in lines  # the detail still says it
    files = annotated(ws, capsys)
    assert "results/torch/env.json" in files
    assert "results/paddle/env.json" in files
    assert "README.md" not in files
    assert "trainer/train.py" not in files
    assert not [f for f in files if ".." in f or f.startswith("/")]


def test_a_named_file_that_is_a_symlink_is_not_annotated(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    env_file(ws, "torch")
    (ws.root / "results/paddle").mkdir(parents=True)
    (ws.root / "results/paddle/env.json").symlink_to(ws.root / "results/torch/env.json")
    files = annotated(ws, capsys)
    assert "results/torch/env.json" in files  # its model_config_sha256 is not the pin
    assert "results/paddle/env.json" not in files


def test_an_untracked_source_file_is_annotated_through_the_freeze(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "paddleformers/glm/extra.py", "X = 1\n")
    result = ws.gates(capsys, "audit", "--format", "github")
    assert any(
        line.startswith(
            "::error file=paddleformers/glm/extra.py,line=1,"
            "title=contract_environment.source-freeze-head-vs-pin%3A worktree_clean::"
        )
        for line in result.out.splitlines()
    )


def test_a_contract_is_annotated_at_its_criterion_key(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ws.gates(capsys, "audit", "--format", "github")
    by_file = {
        line.split("file=", 1)[1].split(",", 1)[0]: line
        for line in result.out.splitlines()
        if line.startswith("::error file=contracts/")
    }
    results = "contracts/results-schema-and-provenance.toml"
    inventory = "contracts/tensor-inventory.toml"
    # entrypoints_declared (key reference_entrypoint) is the results contract's first unmet
    assert f",line={line_of(ws, results, 'reference_entrypoint')}," in by_file[results]
    # reference_valid: no checkpoint at the folder `reference = ` names
    assert f",line={line_of(ws, inventory, 'reference')}," in by_file[inventory]
    # a criterion without a key (manifests_found): the id line
    manifests = "contracts/manifest-format-key.toml"
    assert f",line={line_of(ws, manifests, 'id')}," in by_file[manifests]


def test_only_regular_files_inside_the_workspace_are_named(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("outside\n")
    (ws.root / "linked").symlink_to(ws.root / "trainer")
    (ws.root / "outside.txt").symlink_to(tmp_path / "outside.txt")
    audit = run_audit(inputs_at(ws.root))
    given = (
        "../outside.txt",
        str(tmp_path / "outside.txt"),
        "outside.txt",
        "linked/train.py",
        "trainer",
        "missing.json",
        "./README.md",
        "README.md",
        "trainer/train.py",
    )
    criterion = Criterion("c", False, "detail", files=given)
    assert files_named(audit, criterion) == ["README.md", "trainer/train.py"]
