"""The freeze covers what runs (issue 16, item 6): committed symlinks that lead out of the
source tree fail it, a declared entrypoint must be a regular file of the pinned tree, and
argv[0] is resolved, never matched by its basename."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    CPU_PROFILE,
    REPO_ROOT,
    RUN_ENV,
    Workspace,
    commit_all,
    declare_entrypoints,
    profile_args,
    run_script,
    signed_run,
    write,
)
from tests.lossgen import train_losses

FREEZE_SCRIPT = str(REPO_ROOT / "audit_source_freeze.py")


def _repin(ws: Workspace, message: str) -> str:
    sha = commit_all(ws.repo, message)
    config = ws.root / "gates.toml"
    config.write_text(config.read_text().replace(ws.pin, sha))
    ws.pin = sha
    return commit_all(ws.repo, "pin")


def _freeze(ws: Workspace) -> dict[str, object]:
    result = run_script(FREEZE_SCRIPT, "-C", str(ws.root), "--json")
    assert result.code in (0, 1), result.err
    loaded: dict[str, object] = json.loads(result.out)
    return loaded


def _link(ws: Workspace, relpath: str, target: str) -> None:
    path = ws.root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("../../experiments/layers.py", "outside the source tree: experiments/layers.py"),
        ("/tmp/elsewhere/layers.py", "leaves the repository"),
        ("../../../outside.py", "leaves the repository"),
        ("../../.git/hooks/pre-commit", "into .git"),
        ("../..", "the repository root"),
    ],
)
def test_a_committed_symlink_leaving_the_source_tree_fails_the_freeze(
    ws: Workspace, target: str, why: str
) -> None:
    write(ws.root, "experiments/layers.py", "def layer(x):\n    return x\n")
    _link(ws, "paddleformers/glm/layers.py", target)
    _repin(ws, "a layer through a symlink")
    report = _freeze(ws)
    assert report["verdict"] == "blocked"
    messages = [r["message"] for r in report["reasons"]]  # type: ignore[union-attr,index]
    codes = [r["code"] for r in report["reasons"]]  # type: ignore[union-attr,index]
    assert codes == ["escaping_symlink"], messages
    assert "paddleformers/glm/layers.py" in messages[0] and why in messages[0]


def test_a_symlink_through_another_symlink_is_followed(ws: Workspace) -> None:
    _link(ws, "paddleformers/up", "..")  # harmless alone: paddleformers/up is the repo root's
    _link(ws, "paddleformers/glm/escape.py", "../up/../results/x.py")  # via it, out of the tree
    _repin(ws, "symlinks")
    messages = str(_freeze(ws)["reasons"])
    assert "paddleformers/glm/escape.py" in messages
    assert "paddleformers/up -> .." in messages  # points at the repository root itself


def test_a_symlink_inside_the_source_tree_passes(ws: Workspace) -> None:
    _link(ws, "paddleformers/glm/alias.py", "modeling.py")
    _repin(ws, "an alias")
    assert _freeze(ws)["verdict"] == "pass"


@pytest.mark.slow
def test_a_symlink_into_an_excluded_path_fails(ws: Workspace) -> None:
    config = ws.root / "gates.toml"
    config.write_text(config.read_text().replace("exclude = []", 'exclude = ["vendor"]'))
    write(ws.root, "vendor/lib.py", "X = 1\n")
    _link(ws, "trainer/lib.py", "../vendor/lib.py")
    _repin(ws, "vendored")
    assert "outside the source tree: vendor/lib.py" in str(_freeze(ws)["reasons"])


def _criterion(report: dict[str, object], name: str) -> dict[str, object]:
    for contract in report["contracts"]:  # type: ignore[attr-defined]
        for criterion in contract["criteria"]:
            if criterion["name"] == name:
                return criterion  # type: ignore[no-any-return]
    raise AssertionError(name)


@pytest.mark.slow
def test_a_symlinked_entrypoint_is_not_an_entrypoint(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    (ws.root / "trainer/train.py").rename(ws.root / "trainer/real_train.py")
    _link(ws, "trainer/train.py", "real_train.py")  # inside the tree: the freeze passes
    _repin(ws, "entrypoint through a symlink")
    assert _freeze(ws)["verdict"] == "pass"
    signed_run(ws.root, capsys, "paddle", train_losses(5), force=True)
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    criterion = _criterion(report, "entrypoints_declared")
    assert criterion["met"] is False
    assert "trainer/train.py is a symlink" in str(criterion["detail"])
    statuses = {r["path"]: r["status"] for r in report["receipts"]}
    assert statuses["results/paddle/loss.receipt.json"] != "formal"
    assert report["verdict"] == "blocked"


def test_an_entrypoint_symlinked_only_in_the_worktree_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    _repin(ws, "declare")
    target = ws.root / "trainer/train.py"
    (ws.root / "trainer/other.py").write_text(target.read_text())
    target.unlink()
    target.symlink_to("other.py")
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    assert "trainer/train.py is a symlink" in str(
        _criterion(report, "entrypoints_declared")["detail"]
    )
    assert report["verdict"] == "blocked"


def _fake_python(folder: Path) -> Path:
    """An executable named `python` that is not the interpreter: it runs the real one, as a
    wrapper that could rewrite what runs would."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "python"
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


@pytest.mark.slow
def test_anything_named_python_is_not_the_declared_python(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    declare_entrypoints(ws.root)
    _repin(ws, "declare")
    fake = _fake_python(tmp_path / "anything")
    losses = json.dumps(train_losses(5))
    # the sandbox shows only the Python environment gates runs with: the impostor is not even
    # there to start, and the audit names why the run would not count had it run
    signed_run(
        ws.root,
        capsys,
        "paddle",
        [],
        program=(str(fake), "trainer/train.py", "paddle", losses),
        expect=1,
    )
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    run = {r["path"]: r for r in report["receipts"]}["results/paddle/run.receipt.json"]
    assert run["status"] == "probe"
    assert "the run failed" in str(run["reason"])
    assert not (ws.root / "results/paddle/loss.json").exists()


def test_the_interpreter_gates_runs_with_is_python(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    _repin(ws, "declare")
    signed_run(ws.root, capsys, "paddle", train_losses(5))  # argv[0] = sys.executable
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    run = {r["path"]: r for r in report["receipts"]}["results/paddle/run.receipt.json"]
    assert run["status"] == "formal", run["reason"]


def test_an_impostor_python_outside_the_sandbox_is_still_not_the_declared_python(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without the sandbox the impostor runs; the audit still resolves argv[0] and names it."""
    declare_entrypoints(ws.root)
    _repin(ws, "declare")
    fake = _fake_python(tmp_path / "anything")
    losses = json.dumps(train_losses(5))
    config = ws.root / "gates.toml"  # no isolation required: the interpreter is the only reason
    config.write_text(config.read_text() + "\n[sandbox]\nrequired = false\n")
    result = ws.gates(
        capsys,
        "run",
        "--framework",
        "paddle",
        "--no-sandbox",
        "--force",
        *profile_args(CPU_PROFILE),
        "--",
        str(fake),
        "trainer/train.py",
        "paddle",
        losses,
        f"env={json.dumps(RUN_ENV)}",
    )
    assert result.code == 0, result.err
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    run = {r["path"]: r for r in report["receipts"]}["results/paddle/run.receipt.json"]
    assert run["status"] == "probe"
    assert "is not the declared paddle entrypoint" in str(run["reason"])
