"""Cross-checks (issue 16, item 8): the run attestation is the authority for the run's id,
commit and framework; an env capture the run wrote that disagrees with it is rejected, with
the reason named, and nothing that run bound counts formal."""

from __future__ import annotations

import json
import sys

import pytest

from tests import helpers
from tests.helpers import RUN_ENV, Workspace, declare_entrypoints, signed_run
from tests.lossgen import train_losses

LOSSES = train_losses(100)


def _audit(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    result = ws.gates(capsys, "audit", "--format", "json")
    assert result.code in (0, 1), result.err
    loaded: dict[str, object] = json.loads(result.out)
    return loaded


def _receipts(report: dict[str, object]) -> dict[str, dict[str, str]]:
    return {r["path"]: r for r in report["receipts"]}  # type: ignore[attr-defined]


def _run_with_capture(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    framework: str,
    **capture: object,
) -> None:
    """Both sides run honestly under `gates run`; ``framework``'s trainer writes an env.json
    with ``capture`` merged in (what a copied or made-up capture would say)."""
    declare_entrypoints(ws.root)
    other = "paddle" if framework == "torch" else "torch"
    signed_run(ws.root, capsys, other, LOSSES)
    for key, value in capture.items():
        monkeypatch.setitem(helpers.RUN_ENV, key, value)
    signed_run(ws.root, capsys, framework, LOSSES)


def _assert_rejected(report: dict[str, object], side: str, *words: str) -> None:
    found = _receipts(report)
    env = found[f"results/{side}/env.receipt.json"]
    assert env["status"] == "rejected"
    for word in words:
        assert word in env["reason"], env["reason"]
    run = found[f"results/{side}/run.receipt.json"]
    assert run["status"] == "probe" and "its capture" in run["reason"]
    assert found[f"results/{side}/loss.receipt.json"]["status"] == "probe"
    assert report["formal_alignment_steps"] == 0
    assert report["verdict"] == "blocked"


@pytest.mark.slow
def test_an_env_capture_with_another_run_id_is_rejected(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_with_capture(ws, capsys, monkeypatch, "paddle", run_id="paddle-20250101T000000Z-7")
    _assert_rejected(_audit(ws, capsys), "paddle", "run_id", "paddle-20250101T000000Z-7")


@pytest.mark.slow
def test_an_env_capture_with_another_git_head_is_rejected(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_with_capture(ws, capsys, monkeypatch, "paddle", git_head="1" * 40)
    _assert_rejected(_audit(ws, capsys), "paddle", "git_head", "1" * 40)


@pytest.mark.slow
def test_a_torch_run_whose_capture_shows_no_torch_is_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_with_capture(ws, capsys, monkeypatch, "torch", framework_version=None)
    _assert_rejected(_audit(ws, capsys), "torch", "a torch run whose capture shows no torch")


def test_a_capture_naming_the_other_framework_is_rejected(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, "torch", LOSSES)
    signed_run(
        ws.root,
        capsys,
        "paddle",
        [],
        program=(
            sys.executable,
            "trainer/train.py",
            "torch",  # the paddle run's trainer writes a torch capture
            json.dumps(LOSSES),
            f"env={json.dumps(RUN_ENV)}",
        ),
    )
    report = _audit(ws, capsys)
    env = _receipts(report)["results/paddle/env.receipt.json"]
    assert env["status"] == "rejected"
    assert "framework 'torch' disagrees" in env["reason"]


def test_an_honest_capture_passes_the_cross_checks(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_with_capture(ws, capsys, monkeypatch, "paddle")
    report = _audit(ws, capsys)
    assert _receipts(report)["results/paddle/env.receipt.json"]["status"] == "formal"
    assert report["formal_alignment_steps"] == 100


RANK_MANIFEST = """
rank = folder / "rank-0"
rank.mkdir(exist_ok=True)
(rank / "env.json").write_text(json.dumps({"framework": framework, **env}) + "\\n")
(rank / "manifest.json").write_text(json.dumps({"format": "gates.run-manifest/v1",
    "run_id": "paddle-19990101T000000Z-1", "framework": framework}) + "\\n")
"""


@pytest.mark.slow
def test_a_rank_manifest_naming_another_run_is_rejected(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """A launcher's rank folder is the run's own writing: its manifest, bound by the run
    attestation, claims a run id the attestation did not give."""
    declare_entrypoints(ws.root)
    script = ws.root / "trainer/train.py"
    script.write_text(script.read_text() + RANK_MANIFEST)
    pin = helpers.commit_all(ws.repo, "a trainer that writes a rank folder")
    assert ws.gates(capsys, "freeze", "pin", pin).code == 0
    signed_run(ws.root, capsys, "torch", LOSSES)
    signed_run(ws.root, capsys, "paddle", LOSSES)
    report = _audit(ws, capsys)
    found = _receipts(report)
    manifest = found["results/paddle/rank-0/manifest.receipt.json"]
    assert manifest["status"] == "rejected"
    assert "run_id 'paddle-19990101T000000Z-1' disagrees" in manifest["reason"]
    assert found["results/paddle/loss.receipt.json"]["status"] == "probe"
    assert report["formal_alignment_steps"] == 0
