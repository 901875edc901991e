"""The gated launch with a real Paddle training run on the CPU: receipts written by the run,
formal on a frozen workspace and probe on a dirty one; repeats bit-identical; exit status,
signals and per-rank folders handled."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, Workspace, commit_all, run_script, write

MODEL = REPO_ROOT / "examples" / "glm52-minimal" / "model"
PROFILE = ["--profile", "name=tiny", "--profile", "dtype=float32"]
TINY_PROFILE = '[profile]\nname = "tiny"\ndtype = "float32"\ndevice = "cpu"\n'


@pytest.fixture
def paddle_ws(ws: Workspace) -> Workspace:
    shutil.copytree(MODEL, ws.root / "model")
    contract = ws.root / "contracts/results-schema-and-provenance.toml"
    contract.write_text(
        contract.read_text().replace(
            "candidate_entrypoint = []",
            'candidate_entrypoint = ["python", "model/train_paddle.py"]',
        )
    )
    for path in (ws.root / "contracts").glob("*.toml"):  # the profile the tiny run really has
        path.write_text(re.sub(r"\[profile\]\n(?:[^\[\n].*\n)*", TINY_PROFILE, path.read_text()))
    pin = commit_all(ws.repo, "tiny paddle model")
    text = (ws.root / "gates.toml").read_text().replace(ws.pin, pin)
    (ws.root / "gates.toml").write_text(text)
    ws.pin = pin
    return ws


def gates_run(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gates", "-C", str(ws.root), "run", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ws.root,
    )


def receipt(ws: Workspace, relpath: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((ws.root / relpath).read_text())
    return loaded


@pytest.mark.slow
@pytest.mark.heavy
def test_a_formal_run_on_a_frozen_workspace(paddle_ws: Workspace) -> None:
    done = gates_run(
        paddle_ws,
        "--framework",
        "paddle",
        *PROFILE,
        "--output",
        "checkpoint=results/paddle/checkpoint",
        "--",
        sys.executable,
        "model/train_paddle.py",
    )
    assert done.returncode == 0, done.stderr
    for name in ("manifest", "env", "loss", "raw_loss"):
        stamped = receipt(paddle_ws, f"results/paddle/{name}.receipt.json")
        assert (stamped["evidenceClass"], stamped["formalWeight"]) == ("formal", 1), name
    log = paddle_ws.root / json.loads(done.stdout.splitlines()[-1])["log"]
    assert "No ccache found" in log.read_text(), "Paddle's import warning, kept in the run log"
    assert "No ccache found" not in done.stderr, "and kept off the terminal"
    checkpoint = receipt(paddle_ws, "results/paddle/checkpoint.receipt.json")
    assert [s["path"] for s in checkpoint["subjects"]] == [
        "results/paddle/checkpoint/model.safetensors"
    ]  # type: ignore[index]
    dump = receipt(paddle_ws, "results/paddle/tensors.receipt.json")
    assert (dump["kind"], dump["evidenceClass"]) == ("tensor_dump", "formal")
    dumped = [s["path"] for s in dump["subjects"]]  # type: ignore[attr-defined]
    assert "results/paddle/tensors/step-000003/order.json" in dumped and len(dumped) == 15
    manifest = json.loads((paddle_ws.root / "results/paddle/manifest.json").read_text())
    assert manifest["format"] == "gates.run-manifest/v1"
    assert manifest["exit_status"] == 0
    assert manifest["profile"]["name"] == "tiny" and manifest["profile"]["tp"] == 1
    losses = json.loads((paddle_ws.root / "results/paddle/loss.json").read_text())["losses"]
    assert len(losses) == 100 and losses[-1] < losses[0]
    env = json.loads((paddle_ws.root / "results/paddle/env.json").read_text())
    assert env["framework"] == "paddle" and env["framework_version"]
    assert (
        env["model_config_sha256"]
        == __import__("hashlib").sha256((MODEL / "config.json").read_bytes()).hexdigest()
    )
    assert env["git_head"] == paddle_ws.pin
    steps = subprocess.run(
        [
            sys.executable,
            "-m",
            "gates",
            "-C",
            str(paddle_ws.root),
            "check",
            "checkpoint",
            "results/paddle/checkpoint",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert steps.returncode == 0, steps.stdout


@pytest.mark.slow
@pytest.mark.heavy
def test_three_repeats_are_bit_identical(
    paddle_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [f"experiments/e053-moe-determinism/runs/paddle_det/repeat-{i}" for i in (1, 2, 3)]
    for run in runs:
        done = gates_run(
            paddle_ws,
            "--framework",
            "paddle",
            "--out",
            run,
            *PROFILE,
            "--",
            sys.executable,
            "model/train_paddle.py",
        )
        assert done.returncode == 0, done.stderr
    result = paddle_ws.gates(capsys, "check", "determinism", *runs, "--format", "json")
    assert result.code == 0
    figures = json.loads(result.out)
    assert figures["deterministic"] is True
    assert figures["deterministic_steps"] == 100
    check = receipt(paddle_ws, "outputs/determinism_check.receipt.json")
    assert check["evidenceClass"] == "formal"
    assert len(check["provenance"]["inputs"]) == 3  # type: ignore[index]


@pytest.mark.slow
@pytest.mark.heavy
def test_a_dirty_workspace_refuses_then_runs_as_probe(paddle_ws: Workspace) -> None:
    write(paddle_ws.root, "model/scratch.py", "x = 1\n")
    refused = gates_run(
        paddle_ws, "--framework", "paddle", "--", sys.executable, "model/train_paddle.py"
    )
    assert refused.returncode == 1
    assert "refusing a formal run while the source freeze is blocked" in refused.stderr
    assert "untracked files inside the source tree: model/scratch.py" in refused.stderr
    assert not (paddle_ws.root / "results/paddle/loss.json").exists()
    probed = gates_run(
        paddle_ws, "--framework", "paddle", "--probe", "--", sys.executable, "model/train_paddle.py"
    )
    assert probed.returncode == 0, probed.stderr
    stamped = receipt(paddle_ws, "results/paddle/loss.receipt.json")
    assert (stamped["evidenceClass"], stamped["formalWeight"]) == ("probe", 0)
    assert any("model/scratch.py" in reason for reason in stamped["stampReasons"])  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_exit_status_is_passed_through_and_stamps_probe(paddle_ws: Workspace) -> None:
    done = gates_run(
        paddle_ws,
        "--force",
        "--out",
        "outputs/failing",
        "--",
        sys.executable,
        "-c",
        "import sys; sys.exit(3)",
    )
    assert done.returncode == 3
    manifest = receipt(paddle_ws, "outputs/failing/manifest.receipt.json")
    assert manifest["evidenceClass"] == "probe"
    assert "the run failed (exit status 3)" in manifest["stampReasons"]  # type: ignore[operator]


@pytest.mark.slow
def test_sigterm_reaches_the_child_and_the_receipts_say_so(
    paddle_ws: Workspace, tmp_path: Path
) -> None:
    child = (  # the sandbox shows the child nothing of the test's: it says "up" on stdout
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gates",
            "-C",
            str(paddle_ws.root),
            "run",
            "--force",
            "--out",
            "outputs/killed",
            "--",
            sys.executable,
            "-c",
            child,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "up\n", process.communicate()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 42, err
    manifest = json.loads((paddle_ws.root / "outputs/killed/manifest.json").read_text())
    assert manifest["interrupted_by"] == ["SIGTERM"]
    stamped = receipt(paddle_ws, "outputs/killed/manifest.receipt.json")
    assert stamped["evidenceClass"] == "probe"
    assert "the run was interrupted (SIGTERM)" in stamped["stampReasons"]  # type: ignore[operator]
    leftovers = [
        p.name for p in (paddle_ws.root / "outputs/killed").iterdir() if p.name.endswith(".tmp")
    ]
    assert leftovers == []


@pytest.mark.slow
@pytest.mark.heavy
def test_each_rank_records_its_own_folder_and_the_ranks_must_agree(paddle_ws: Workspace) -> None:
    launch = (
        f"PADDLE_TRAINERS_NUM=2 PADDLE_TRAINER_ID=0 {sys.executable} model/train_paddle.py & "
        f"PADDLE_TRAINERS_NUM=2 PADDLE_TRAINER_ID=1 {sys.executable} model/train_paddle.py; wait"
    )
    done = gates_run(paddle_ws, "--framework", "paddle", "--force", "--", "sh", "-c", launch)
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        stamped = receipt(paddle_ws, f"results/paddle/rank-{rank}/loss.receipt.json")
        assert stamped["evidenceClass"] == "formal"
    env = json.loads((paddle_ws.root / "results/paddle/rank-1/env.json").read_text())
    assert env["rank"]["PADDLE_TRAINER_ID"] == "1"
    write(
        paddle_ws.root,
        "results/paddle/rank-1/env.json",
        json.dumps({**env, "model_config_sha256": "0" * 64}),
    )
    from gates.training.recorder import aggregate_ranks  # noqa: PLC0415

    _, problems = aggregate_ranks(paddle_ws.root / "results/paddle")
    assert problems == [
        f"ranks disagree on model_config_sha256: {'0' * 64}, {env['model_config_sha256']}"
    ]


def test_environment_capture_without_paddle() -> None:
    code = (
        "import sys, json; sys.modules['paddle'] = None\n"
        "from gates.training.env import capture; print(json.dumps(capture()))"
    )
    done = run_script("-c", code)
    assert done.code == 0, done.err
    found = json.loads(done.out)
    assert found["framework"] is None and found["framework_version"] is None
    assert found["world_size"] == 1


def test_environment_records_determinism_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from gates.training.env import capture  # noqa: PLC0415

    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "4")
    monkeypatch.setenv("PADDLE_CURRENT_ENDPOINT", "10.0.0.1:6170")
    found = capture()
    assert found["determinism"]["NCCL_ALGO"] == "Ring"
    assert found["world_size"] == 4
    assert found["rank"]["PADDLE_CURRENT_ENDPOINT"] == "10.0.0.1:6170"
    assert found["libraries"]["paddlepaddle"]


@pytest.mark.slow
def test_trainer_callback_records_each_logged_step(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """Drives GatesCallback the way a PaddleFormers Trainer calls a TrainerCallback
    (PaddleFormers itself is not installed here; the interface is three methods)."""
    from types import SimpleNamespace  # noqa: PLC0415

    import paddle  # noqa: PLC0415

    from gates.training.recorder import GatesCallback, RunRecorder  # noqa: PLC0415

    callback = GatesCallback(
        RunRecorder(
            ws.root / "results/paddle", framework="paddle", model_config=MODEL / "config.json"
        )
    )
    state, control = SimpleNamespace(global_step=0), SimpleNamespace()
    for step in range(1, 4):
        state.global_step = step
        loss = paddle.to_tensor(1.0 / step + 1e-9, dtype="float32")
        assert callback.on_step_end(None, state, control) is control
        callback.on_log(None, state, control, logs={"loss": float(loss), "learning_rate": 0.1})
    callback.on_train_end(None, state, control)
    losses = json.loads((ws.root / "results/paddle/loss.json").read_text())["losses"]
    assert losses[0] == float(paddle.to_tensor(1.0 + 1e-9, dtype="float32"))
    stamped = receipt(ws, "results/paddle/loss.receipt.json")
    assert stamped["evidenceClass"] == "formal"
    state.global_step = 7
    with (
        pytest.raises(Exception, match="step 7 recorded where step 1 was expected"),
        RunRecorder(
            ws.root / "outputs/gap", framework="paddle", model_config=MODEL / "config.json"
        ) as gap,
    ):
        GatesCallback(gap).on_log(None, state, control, logs={"loss": 1.5})


@pytest.mark.slow
def test_third_party_warnings_go_to_the_log_only(ws: Workspace) -> None:
    write(
        ws.root,
        "model/noisy.py",
        "import sys, warnings\n"
        "library = '/opt/lib/site-packages/lib.py'\n"
        "warnings.warn_explicit('from a library', UserWarning, library, 7)\n"
        "warnings.warn('from our own code')\n"
        "print('step 1 loss 2.5', file=sys.stderr)\n",
    )
    pinned = commit_all(ws.repo, "noisy entrypoint")
    text = (ws.root / "gates.toml").read_text().replace(ws.pin, pinned)
    (ws.root / "gates.toml").write_text(text)
    done = gates_run(
        ws, "--probe", "--out", "results/noisy", "--", sys.executable, "model/noisy.py"
    )
    assert done.returncode == 0, done.stderr
    assert "from a library" not in done.stderr
    assert "UserWarning: from our own code" in done.stderr
    assert "step 1 loss 2.5" in done.stderr
    log = (ws.root / json.loads(done.stdout.splitlines()[-1])["log"]).read_text()
    assert "/opt/lib/site-packages/lib.py:7: UserWarning: from a library" in log
    assert "from our own code" in log and "step 1 loss 2.5" in log
