"""What is stale and refresh (`gates evidence`, `gates refresh`), checker outputs that are
never downgraded, throwaway checks, the pin after a rebase, and progress on a terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import git
import numpy as np
import pytest

from tests.helpers import Workspace, commit_all, declare_entrypoints, signed_run
from tests.lossgen import train_losses

REF, CAND = "results/torch/loss.json", "results/paddle/loss.json"
CHECK = "outputs/loss_check.json"
CHECK_RECEIPT = "outputs/loss_check.receipt.json"


@pytest.fixture
def pair(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    """Signed runs of both declared entrypoints and a signed loss check over them."""
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, "torch", train_losses(5))
    signed_run(ws.root, capsys, "paddle", train_losses(5))
    result = ws.gates(capsys, "check", "loss", REF, CAND, "--required-steps", "5")
    assert result.code == 0, result.err
    return ws


def audit(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    return {r["path"]: r for r in report["receipts"]}


@pytest.mark.slow
def test_a_checker_says_what_the_audit_will_count(
    pair: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = pair.gates(capsys, "check", "loss", REF, CAND, "--required-steps", "5")
    assert f"audit: {CHECK_RECEIPT}: counts (formal" in result.err
    assert "formal/1" not in result.out


@pytest.mark.slow
def test_a_rejected_checker_input_after_a_rerun_names_the_file_and_the_command(
    pair: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    signed_run(pair.root, capsys, "paddle", train_losses(5, seed=3))  # the candidate re-run
    entry = audit(pair, capsys)[CHECK_RECEIPT]
    assert entry["status"] == "rejected"
    reason = str(entry["reason"])
    assert "(results/paddle/loss.receipt.json)" in reason
    assert f"re-run `gates check loss --required-steps 5 {REF} {CAND}`" in reason
    assert "gates refresh" in reason

    listed = pair.gates(capsys, "evidence", "--format", "json")
    assert listed.code == 1
    items = {i["path"]: i for i in json.loads(listed.out)["evidence"]}
    assert items[CHECK_RECEIPT]["state"] == "stale"
    assert items[CHECK_RECEIPT]["command"] == f"gates check loss --required-steps 5 {REF} {CAND}"
    assert items["results/paddle/loss.receipt.json"]["state"] == "formal"

    refreshed = pair.gates(capsys, "refresh")
    assert f"exit 0: gates check loss --required-steps 5 {REF} {CAND}" in refreshed.out
    entry = audit(pair, capsys)[CHECK_RECEIPT]
    assert entry["status"] == "formal", entry["reason"]
    output = json.loads((pair.root / CHECK).read_text())
    assert output["first_divergence_step"] is not None, "the re-run compared the new losses"


def test_evidence_lists_what_is_missing_with_the_command(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    result = ws.gates(capsys, "evidence")
    assert result.code == 1
    assert "missing  results/torch/loss.json (loss)" in result.out
    assert "fix: gates run --framework torch -- python trainer/train.py" in result.out
    assert "fix: gates check loss results/torch/loss.json results/paddle/loss.json" in result.out


@pytest.mark.slow
def test_refresh_never_runs_a_forged_command(
    pair: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """A receipt is the PR author's file: a recorded `gates run` is shown, never run."""
    from gates.receipts.create import ReceiptRequest, create_receipt  # noqa: PLC0415
    from gates.receipts.model import ArtifactKind  # noqa: PLC0415
    from gates.workspace.repository import open_workspace  # noqa: PLC0415

    (pair.root / "outputs/forged.json").write_text("{}\n")
    pwned = pair.root / "pwned"
    request = ReceiptRequest(
        kind=ArtifactKind.LOSS_CHECK,
        subjects=("outputs/forged.json",),
        command=("gates", "run", "--force", "--", "touch", str(pwned)),
        output="outputs/forged.receipt.json",
        probe_reasons=("made by hand",),
    )
    create_receipt(open_workspace(pair.root), request)
    result = pair.gates(capsys, "refresh")
    assert not pwned.exists()
    assert "no stale checker output to refresh" in result.out
    listed = pair.gates(capsys, "evidence")
    assert "(not re-run by gates refresh: check it)" in listed.out


def test_a_throwaway_check_writes_nothing_and_blocks_nothing(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, seed in ((REF, 0), (CAND, 1)):
        target = ws.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"losses": train_losses(5, seed=seed)}))
    result = ws.gates(capsys, "check", "loss", REF, CAND, "--required-steps", "5", "--no-receipt")
    assert result.code == 0, result.err
    assert "throwaway check (--no-receipt)" in result.out
    assert "consistent_steps=" in result.out
    assert not (ws.root / "outputs").exists()
    as_json = ws.gates(
        capsys,
        "check",
        "loss",
        REF,
        CAND,
        "--no-receipt",
        "--format",
        "json",
        "--required-steps",
        "5",
    )
    assert json.loads(as_json.out)["receipt"] is None
    assert not any(r["path"].startswith("outputs/") for r in audit(ws, capsys).values())


@pytest.mark.slow
def test_an_unsigned_check_never_replaces_a_signed_one(
    pair: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (pair.root / CHECK_RECEIPT).read_bytes()
    monkeypatch.delenv("GATES_SIGNING_KEY")
    result = pair.gates(capsys, "check", "loss", REF, CAND, "--required-steps", "5")
    assert result.code == 2
    assert f"refusing to replace {CHECK}: the output there is signed and this one" in result.err
    assert "pass --force" in result.err
    assert (pair.root / CHECK_RECEIPT).read_bytes() == before
    forced = pair.gates(capsys, "check", "loss", REF, CAND, "--required-steps", "5", "--force")
    assert forced.code == 0
    assert "attestation" not in json.loads((pair.root / CHECK_RECEIPT).read_text())


def _checkpoint(folder: Path) -> None:
    from safetensors.numpy import save_file  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    tensors = {f"model.layers.{i}.weight": rng.standard_normal((256, 256)) for i in range(4)}
    save_file(
        {k: v.astype(np.float32) for k, v in tensors.items()}, str(folder / "model.safetensors")
    )


def test_a_mistyped_checkpoint_path_never_replaces_a_committed_output(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _checkpoint(ws.root / "results/paddle/checkpoint")
    first = ws.gates(capsys, "check", "checkpoint", "results/paddle/checkpoint")
    assert first.code == 0, first.err
    output = ws.root / "outputs/checkpoint_check.json"
    committed = output.read_bytes()
    typo = ws.gates(capsys, "check", "checkpoint", "results/paddle/chekpoint")
    assert typo.code == 2
    assert "no checkpoint folder results/paddle/chekpoint: nothing checked" in typo.err
    assert output.read_bytes() == committed
    assert json.loads(committed)["valid"] is True


def test_a_failed_check_never_replaces_a_formal_output(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = ws.root / "results/paddle/checkpoint"
    _checkpoint(folder)
    assert ws.gates(capsys, "check", "checkpoint", "results/paddle/checkpoint").code == 0
    committed = (ws.root / "outputs/checkpoint_check.json").read_bytes()
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00[1,2,3]x")
    failed = ws.gates(capsys, "check", "checkpoint", "results/paddle/checkpoint")
    assert failed.code == 2
    assert "the output there is a formal pass and this check failed" in failed.err
    assert (ws.root / "outputs/checkpoint_check.json").read_bytes() == committed


def test_a_rebase_leaving_the_pin_behind_suggests_repinning(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pinned = commit_all(ws.repo, "the state to pin")
    assert ws.gates(capsys, "freeze", "pin", "HEAD").code == 0
    ws.pin = pinned
    ws.repo.git.commit("--amend", "-q", "-a", "-m", "rebased")  # the pinned commit is rewritten
    clone = tmp_path / "ci-clone"
    git.Repo.clone_from(str(ws.root), str(clone), no_local=True)  # only reachable objects
    result = Workspace(clone, git.Repo(clone), ws.pin).gates(capsys, "freeze", "show")
    assert result.code == 1
    assert f"pin {ws.pin} is not in this clone" in result.out
    assert "`gates freeze pin HEAD`" in result.out


def _on_a_terminal(ws: Workspace, *args: str) -> str:
    """Run `gates ARGS` with stderr on a pseudo-terminal; return what the terminal showed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # 120 columns
    env = {**os.environ, "GATES_PROGRESS_DELAY": "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gates", "-C", str(ws.root), *args],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        shown += chunk
    process.wait(timeout=120)
    os.close(leader)
    return shown.decode("utf-8", "replace")


@pytest.mark.slow
def test_hashing_shows_progress_on_a_terminal_only(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _checkpoint(ws.root / "results/paddle/checkpoint")
    shown = _on_a_terminal(ws, "check", "checkpoint", "results/paddle/checkpoint", "--no-receipt")
    assert "hashing 1 shard(s)" in shown
    assert "/1.00M" in shown, "the shard's 1 MiB of tensor bytes, in binary units"
    quiet = _on_a_terminal(
        ws, "check", "checkpoint", "results/paddle/checkpoint", "--no-receipt", "--format", "json"
    )
    assert "hashing" not in quiet
    piped = ws.gates(capsys, "check", "checkpoint", "results/paddle/checkpoint", "--no-receipt")
    assert "hashing" not in piped.err, "not a terminal: silent"


def test_evidence_and_refresh_survive_a_broken_results_contract(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = ws.root / "contracts/results-schema-and-provenance.toml"
    contract.write_text(
        contract.read_text().replace("required_steps = 100", 'required_steps = "x"')
    )
    listed = ws.gates(capsys, "evidence", "--format", "json")
    assert listed.code == 1, listed.err
    assert "internal error" not in listed.err
    assert isinstance(json.loads(listed.out)["evidence"], list)
    dry = ws.gates(capsys, "refresh", "--dry-run")
    assert dry.code == 0, dry.err
    assert "no stale checker output to refresh" in dry.out


@pytest.mark.slow
def test_refresh_dry_run_lists_without_running(
    pair: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    signed_run(pair.root, capsys, "paddle", train_losses(5, seed=3))
    before = (pair.root / CHECK).read_bytes()
    dry = pair.gates(capsys, "refresh", "--dry-run", "--format", "json")
    assert dry.code == 0
    refreshed = json.loads(dry.out)["refreshed"]
    assert [r["path"] for r in refreshed] == [CHECK_RECEIPT]
    assert refreshed[0]["exit_status"] is None
    assert (pair.root / CHECK).read_bytes() == before
