"""Each side's evidence is judged by its own side's code and the shared code (issue 16,
item 4): the reference is anchored to the policy ref, a PR that changes only candidate code
keeps the protected reference run formal, and a narrowed [freeze] exclude does not void
evidence whose code is unchanged."""

from __future__ import annotations

import json

import pytest

from tests.helpers import Workspace, commit_all, declare_entrypoints, signed_run, write
from tests.lossgen import train_losses

SIDES = 'reference = ["reference/"]\ncandidate = ["paddleformers/*"]\n'
LOSSES = train_losses(100)


def _pin_head(ws: Workspace, capsys: pytest.CaptureFixture[str], message: str) -> str:
    """Commit the worktree, pin that commit, commit the pin (as `gates freeze pin` + commit)."""
    sha = commit_all(ws.repo, message)
    assert ws.gates(capsys, "freeze", "pin", sha).code == 0
    commit_all(ws.repo, f"pin {sha[:12]}")
    return sha


def _main(ws: Workspace, capsys: pytest.CaptureFixture[str], *, sides: bool = True) -> None:
    """main: both entrypoints declared, the reference's own module, [sides] in force."""
    declare_entrypoints(ws.root)
    write(ws.root, "reference/torch_model.py", "def forward(x):\n    return x\n")
    if sides:
        config = ws.root / "gates.toml"
        text = config.read_text()
        assert "shared.\nreference = []\ncandidate = []\n" in text  # as `gates init` writes it
        config.write_text(text.replace("reference = []\ncandidate = []\n", SIDES))
    _pin_head(ws, capsys, "main: the policy and the reference")


def _audit(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    result = ws.gates(capsys, *args, "audit", "--format", "json")
    assert result.code in (0, 1), result.err
    loaded: dict[str, object] = json.loads(result.out)
    return loaded


def _status(report: dict[str, object], path: str) -> tuple[str, str]:
    entry = {r["path"]: r for r in report["receipts"]}[path]  # type: ignore[attr-defined]
    return entry["status"], entry["reason"]


TORCH_LOSS = "results/torch/loss.receipt.json"
PADDLE_LOSS = "results/paddle/loss.receipt.json"


@pytest.mark.slow
def test_a_pr_changing_only_candidate_code_keeps_the_protected_reference_run_formal(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _main(ws, capsys)
    signed_run(ws.root, capsys, "torch", LOSSES)  # the reference, run once on main
    ws.repo.git.checkout("-q", "-b", "pr")
    write(ws.root, "paddleformers/glm/modeling.py", "def forward(x):\n    return x * 1\n")
    _pin_head(ws, capsys, "pr: candidate code only")
    signed_run(ws.root, capsys, "paddle", LOSSES)
    report = _audit(ws, capsys, "--policy-ref", "main")
    assert _status(report, TORCH_LOSS)[0] == "formal", _status(report, TORCH_LOSS)
    assert _status(report, PADDLE_LOSS)[0] == "formal"
    assert report["formal_alignment_steps"] == 100


@pytest.mark.slow
def test_without_sides_all_code_is_shared_and_the_reference_must_rerun(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _main(ws, capsys, sides=False)
    signed_run(ws.root, capsys, "torch", LOSSES)
    ws.repo.git.checkout("-q", "-b", "pr")
    write(ws.root, "paddleformers/glm/modeling.py", "def forward(x):\n    return x * 1\n")
    _pin_head(ws, capsys, "pr: what is shared code without [sides]")
    signed_run(ws.root, capsys, "paddle", LOSSES)
    report = _audit(ws, capsys, "--policy-ref", "main")
    status, reason = _status(report, TORCH_LOSS)
    assert status == "probe"
    assert "reference code changed in this PR: not in force until merged" in reason
    assert "paddleformers/glm/modeling.py" in reason
    assert report["formal_alignment_steps"] == 0


@pytest.mark.slow
def test_a_pr_changing_reference_code_makes_reference_evidence_probe(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _main(ws, capsys)
    ws.repo.git.checkout("-q", "-b", "pr")
    write(ws.root, "reference/torch_model.py", "def forward(x):\n    return x + 0\n")
    _pin_head(ws, capsys, "pr: edits the reference")
    signed_run(ws.root, capsys, "torch", LOSSES)  # re-run at the PR's own pin: still not in force
    signed_run(ws.root, capsys, "paddle", LOSSES)
    report = _audit(ws, capsys, "--policy-ref", "main")
    status, reason = _status(report, TORCH_LOSS)
    assert status == "probe"
    assert "reference code changed in this PR: not in force until merged" in reason
    assert "reference/torch_model.py" in reason and "refs/heads/main" in reason
    assert _status(report, PADDLE_LOSS)[0] == "formal"  # the candidate's own code is unchanged
    assert report["formal_alignment_steps"] == 0
    assert report["verdict"] == "blocked"


@pytest.mark.slow
def test_a_reference_run_of_older_protected_code_is_not_in_force(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _main(ws, capsys)
    signed_run(ws.root, capsys, "torch", LOSSES)
    write(ws.root, "reference/torch_model.py", "def forward(x):\n    return -x\n")
    _pin_head(ws, capsys, "main: the reference changes after its run")
    ws.repo.git.checkout("-q", "-b", "pr")
    signed_run(ws.root, capsys, "paddle", LOSSES)
    report = _audit(ws, capsys, "--policy-ref", "main")
    status, reason = _status(report, TORCH_LOSS)
    assert status == "probe"
    assert "its run's reference code is not the policy ref's" in reason
    assert "reference/torch_model.py" in reason


@pytest.mark.slow
def test_unprotected_both_sides_are_judged_against_the_pin(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _main(ws, capsys)
    signed_run(ws.root, capsys, "torch", LOSSES)
    signed_run(ws.root, capsys, "paddle", LOSSES)
    write(ws.root, "paddleformers/glm/modeling.py", "def forward(x):\n    return x * 1\n")
    _pin_head(ws, capsys, "candidate code changes after both runs")
    report = _audit(ws, capsys)
    assert _status(report, TORCH_LOSS)[0] == "formal"
    status, reason = _status(report, PADDLE_LOSS)
    assert status == "probe"
    assert "its candidate code differs in paddleformers/glm/modeling.py" in reason


@pytest.mark.slow
def test_a_narrowed_exclude_on_main_does_not_void_unchanged_evidence(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write(ws.root, "docs/notes.md", "notes\n")
    config = ws.root / "gates.toml"
    config.write_text(config.read_text().replace("exclude = []", 'exclude = ["docs"]'))
    _main(ws, capsys)
    signed_run(ws.root, capsys, "torch", LOSSES)
    signed_run(ws.root, capsys, "paddle", LOSSES)
    before = _audit(ws, capsys)
    assert before["formal_alignment_steps"] == 100
    config.write_text(config.read_text().replace('exclude = ["docs"]', "exclude = []"))
    commit_all(ws.repo, "main: docs/ is source now (a narrowed exclude)")
    after = _audit(ws, capsys, "--policy-ref", "main")
    assert after["policy"]["ref"] == "refs/heads/main"  # type: ignore[index]
    assert _status(after, TORCH_LOSS)[0] == "formal", _status(after, TORCH_LOSS)
    assert _status(after, PADDLE_LOSS)[0] == "formal"
    assert after["formal_alignment_steps"] == 100


def test_sides_in_the_pr_are_a_proposed_change_not_applied(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _main(ws, capsys)
    signed_run(ws.root, capsys, "torch", LOSSES)
    ws.repo.git.checkout("-q", "-b", "pr")
    config = ws.root / "gates.toml"
    config.write_text(config.read_text().replace('reference = ["reference/"]', "reference = []"))
    write(ws.root, "reference/torch_model.py", "def forward(x):\n    return x + 0\n")
    _pin_head(ws, capsys, "pr: edits the reference and calls it candidate code")
    report = _audit(ws, capsys, "--policy-ref", "main")
    assert any("[sides] reference" in c for c in report["policy"]["proposed_changes"])  # type: ignore[index]
    assert "reference code changed in this PR" in _status(report, TORCH_LOSS)[1]
