"""Step commitments and `gates replay` with real Paddle runs on the CPU: a signed run of the
example's entrypoint commits every step; replay re-executes windows drawn from a verifier's
seed from the saved states and matches bit for bit; the audit counts formal steps only with
the replay the policy asks for; every forgery the issue lists is caught."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import git
import numpy as np
import pytest

from gates.receipts.artifacts import schema_errors
from gates.receipts.model import ArtifactKind
from gates.replay.commitments import loss_bits
from gates.replay.state import load_state, save_state
from gates.replay.windows import sample_windows
from gates.sandbox.materialize import materialize
from gates.training.recorder import GatesCallback, RunRecorder
from gates.workspace.repository import open_workspace
from tests.helpers import (
    CPU_PROFILE,
    REPO_ROOT,
    TrustSetup,
    Workspace,
    commit_all,
    declare_entrypoints,
    make_repo,
    make_trust,
    signed_run,
)
from tests.kernels import assert_close_files, kernels_as_recorded

MODEL = REPO_ROOT / "examples" / "glm52-minimal" / "model"
CANDIDATE, REFERENCE = "results/paddle", "results/reference"
PROFILE = [arg for key, value in CPU_PROFILE.items() for arg in ("--profile", f"{key}={value}")]
REPLAY_ARGV = (
    '["python", "model/train_paddle.py", "--resume", "{state}", "--start", "{start}", '
    '"--end", "{end}", "--out", "{out}"]'
)
REPLAY = {"state_save_every": "10", "replay_windows": "2", "min_repeats": "0"}
# Both sides run the example's Paddle entrypoint here (torch is not installed): the audit's
# replay rule is the same for each side.
PARAMS = {
    "reference": '"results/reference"',
    "reference_framework": '"paddle"',
    "reference_entrypoint": '["python", "model/train_paddle.py"]',
    "candidate_entrypoint": '["python", "model/train_paddle.py"]',
    "reference_replay": REPLAY_ARGV,
    "candidate_replay": REPLAY_ARGV,
    **REPLAY,
}
# The reference side is the example's torch entrypoint (torch is in the test extra).
TORCH_PARAMS = {
    **PARAMS,
    "reference_framework": '"torch"',
    "reference_entrypoint": '["python", "model/train_torch.py"]',
    "reference_replay": REPLAY_ARGV.replace("train_paddle", "train_torch"),
}
#: A run on another framework build than the verifier's: its recorder's env.json names a
#: patched cluster build (as such an image records itself).
OTHER_BUILD = (
    "    return 0\n\n\nif __name__",
    """    if not replaying:
        import json

        recorded = run.folder / "env.json"
        env = json.loads(recorded.read_text())
        env["framework_version"] = env["framework_version"] + ".cluster"
        recorded.write_text(json.dumps(env))
    return 0


if __name__""",
)
#: The fabricating entrypoint: a full run signs step 43's loss one ULP off; a replay
#: (which resumes from a state) computes the true value.
FORGE_STEP_43 = (
    "run.record(step, loss, state=state)",
    "run.record(step, np.nextafter(float(loss), 9.0) if step == 43 and not replaying "
    "else loss, state=state)",
)
#: ... signs a saved state that is not the one it committed (as a run that resumed from
#: a state it did not record would), and leaves out a state its commitments name.
TAMPER_STATE_40 = (
    "    return 0\n\n\nif __name__",
    """    if not replaying:
        from gates.replay.state import save_state

        tampered = run.folder / "states" / "step-000030.safetensors"
        saved = load_state(tampered, str(tampered))
        name = sorted(saved.parts["parameters"])[0]
        saved.parts["parameters"][name] = saved.parts["parameters"][name] * 2
        save_state(saved, tampered)
        (run.folder / "states" / "step-000060.safetensors").unlink()
    return 0


if __name__""",
)
#: The lazy entrypoint: takes --start/--end but trains from the initial weights.
IGNORE_RESUME = (
    "start = restore_paddle(load_state(args.resume, str(args.resume)), model.weights, optimizer)",
    "pass  # the state is ignored",
)


def environment(trust: TrustSetup, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATES_")}
    env.update({"GATES_SIGNING_KEY": str(trust.key), "GATES_TRUST": str(trust.trust)})
    env.update({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"})
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"], env[f"GIT_{role}_EMAIL"] = "Gates Test", "test@gates.invalid"
    return env


def gates_in(
    root: Path, env: dict[str, str] | None, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gates", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        env=env,
    )


def set_params(root: Path, values: dict[str, str]) -> None:
    contract = root / "contracts/results-schema-and-provenance.toml"
    text = contract.read_text()
    for key, value in values.items():
        lines = [line for line in text.splitlines() if not line.startswith(f"{key} =")]
        text = "\n".join(lines) + f"\n{key} = {value}\n"
    contract.write_text(text)


def repin(root: Path, message: str) -> str:
    repo = git.Repo(root)
    pin = commit_all(repo, message)
    config = root / "gates.toml"
    old = next(line for line in config.read_text().splitlines() if line.startswith("pin = "))
    config.write_text(config.read_text().replace(old, f'pin = "{pin}"'))
    commit_all(repo, "pin")
    return pin


def trained_workspace(
    root: Path,
    env: dict[str, str],
    edits: tuple[tuple[str, str], ...] = (),
    sides: int = 2,
    *,
    torch_reference: bool = False,
) -> Workspace:
    """A pinned workspace with the example model, the replay policy, and signed runs (the
    reference side the example's torch entrypoint with ``torch_reference``)."""
    repo = make_repo(root)
    assert gates_in(root, env, "init", "--pin", "HEAD").returncode == 0
    shutil.copytree(MODEL, root / "model")
    script = root / "model" / "train_paddle.py"
    for old, new in edits:
        assert old in script.read_text()
        script.write_text(script.read_text().replace(old, new))
    declare_entrypoints(root)  # the profile this machine really runs, in every contract
    set_params(root, TORCH_PARAMS if torch_reference else PARAMS)
    pin = repin(root, "the tiny model and the replay policy")
    runs = [(CANDIDATE, "paddle"), (REFERENCE, "torch" if torch_reference else "paddle")]
    for folder, framework in runs[:sides]:
        done = gates_in(
            root, env, "run", "--framework", framework, "--out", folder, *PROFILE, "--",
            sys.executable, f"model/train_{framework}.py",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    return Workspace(root, repo, pin)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, session_trust: TrustSetup) -> Path:
    home = tmp_path_factory.mktemp("home")
    root = tmp_path_factory.mktemp("base") / "ws"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in environment(session_trust, home).items():
            patch.setenv(key, value)
        trained_workspace(root, dict(os.environ))
    return root


@pytest.fixture
def trained(base: Path, tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    shutil.copytree(base, root, symlinks=True)
    repo = git.Repo(root)
    yield Workspace(root, repo, repo.head.commit.hexsha)


def gates(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return gates_in(ws.root, None, *args)


def replay(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return gates(ws, "replay", *args)


def steps(ws: Workspace) -> dict[str, object]:
    done = gates(ws, "steps", "--format", "json")
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded


@pytest.mark.slow
@pytest.mark.heavy
def test_a_run_commits_every_step_and_saves_every_kth_state(trained: Workspace) -> None:
    commitments = json.loads((trained.root / CANDIDATE / "commitments.json").read_text())
    assert schema_errors(ArtifactKind.COMMITMENTS, commitments) == []
    assert [c["step"] for c in commitments["steps"]] == list(range(101))
    losses = json.loads((trained.root / CANDIDATE / "loss.json").read_text())["losses"]
    assert [c["loss_bits"] for c in commitments["steps"][1:]] == [loss_bits(v) for v in losses]
    assert commitments["save_every"] == 10, "K comes from the policy through `gates run`"
    saved = sorted(p.name for p in (trained.root / CANDIDATE / "states").iterdir())
    assert saved == [f"step-{s:06d}.safetensors" for s in range(0, 101, 10)]
    parts = load_state(trained.root / CANDIDATE / "states/step-000040.safetensors", "s").parts
    assert parts["data"]["position"].tolist() == [40]
    assert any(name.startswith("paddle.") for name in parts["rng"])
    stamps = json.loads((trained.root / CANDIDATE / "states.receipt.json").read_text())
    assert (stamps["kind"], stamps["evidenceClass"]) == ("training_state", "formal")
    run = json.loads((trained.root / CANDIDATE / "run.receipt.json").read_text())
    bound = [s["path"] for s in run["subjects"]]
    assert f"{CANDIDATE}/commitments.json" in bound
    assert f"{CANDIDATE}/states/step-000100.safetensors" in bound


@pytest.mark.slow
@pytest.mark.heavy
def test_replay_matches_bit_for_bit_and_the_audit_then_counts_the_steps(
    trained: Workspace,
) -> None:
    before = steps(trained)
    assert before["formal_alignment_steps"] == 0
    assert "not replayed as required: no replay attestation" in str(before["why"])
    for folder in (CANDIDATE, REFERENCE):
        done = replay(trained, folder, "--seed", "ci-build-4711", "--format", "json")
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)
        drawn = [(w.first, w.last) for w in sample_windows("ci-build-4711", 100, 2, 1)]
        assert [(w["first"], w["last"]) for w in report["windows"]] == drawn
        assert {w["result"] for w in report["windows"]} == {"match"}
        assert all(w["resumed_from"] == (w["first"] - 1) // 10 * 10 for w in report["windows"])
        assert "escapes with probability about (1 - f)^2" in report["detection_power"]
        receipt = json.loads((trained.root / folder / "replay.receipt.json").read_text())
        assert (receipt["kind"], receipt["evidenceClass"]) == ("replay", "formal")
    after = steps(trained)
    assert after["formal_alignment_steps"] == 100, after["why"]
    audit = gates(trained, "audit")
    assert "formal_alignment_steps = 100 / 100" in audit.stdout
    assert "replay: 2 window(s) of 1 step(s) over 100 steps" in audit.stdout
    status = gates(trained, "status")
    assert "(1 - f)^2" in status.stdout


@pytest.mark.slow
@pytest.mark.heavy
def test_a_seed_the_verifier_does_not_pass_is_drawn_from_the_policy_and_the_time(
    trained: Workspace,
) -> None:
    done = replay(trained, CANDIDATE, "--windows", "1", "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seed_source"] == "policy+time"
    assert report["policy_commit"] is None or len(report["policy_commit"]) == 40


@pytest.mark.slow
@pytest.mark.heavy
def test_a_runner_chosen_seed_is_refused(trained: Workspace) -> None:
    (trained.root / CANDIDATE / "seed.txt").write_text("a seed that misses my forgery\n")
    done = replay(trained, CANDIDATE, "--seed-file", f"{CANDIDATE}/seed.txt")
    assert done.returncode == 2
    assert "a seed the runner chose is refused" in done.stderr
    assert not (trained.root / CANDIDATE / "replay.json").exists()


@pytest.mark.slow
@pytest.mark.heavy
def test_a_window_past_the_runs_end_is_refused(trained: Workspace) -> None:
    done = replay(trained, CANDIDATE, "--windows", "0", "--window", "95:110")
    assert done.returncode == 2
    assert "window 95:110 ends past the run's last step 100" in done.stderr


@pytest.mark.slow
@pytest.mark.heavy
def test_a_saved_state_edited_after_signing_voids_the_run(trained: Workspace) -> None:
    path = trained.root / CANDIDATE / "states/step-000040.safetensors"
    state = load_state(path, "state")
    name = sorted(state.parts["parameters"])[0]
    weights = state.parts["parameters"][name].copy()
    weights.flat[0] = np.nextafter(weights.flat[0], np.float32(9))  # one ULP
    state.parts["parameters"][name] = weights
    save_state(state, path)
    done = replay(trained, CANDIDATE, "--windows", "0", "--window", "41:41")
    assert done.returncode == 2
    assert f"{CANDIDATE}/run.receipt.json: rejected" in done.stderr
    assert "nothing to replay" in done.stderr


@pytest.mark.slow
def test_a_run_with_no_commitments(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    """A signed run of an entrypoint that records losses but no training state."""
    declare_entrypoints(ws.root)
    set_params(
        ws.root, {"candidate_replay": REPLAY_ARGV, "reference_replay": REPLAY_ARGV, **REPLAY}
    )
    repin(ws.root, "replay policy")
    losses = [2.5 - 0.01 * step for step in range(100)]
    signed_run(ws.root, capsys, "paddle", losses)
    signed_run(ws.root, capsys, "torch", losses)
    done = gates(ws, "replay", CANDIDATE)
    assert done.returncode == 2
    assert f"{CANDIDATE}/commitments.json: the run has no step commitments" in done.stderr
    assert "run.record(step, loss, state=...)" in done.stderr, "says how to fix it"
    found = steps(ws)
    assert found["formal_alignment_steps"] == 0
    assert "not replayed as required: the run has no step commitments" in str(found["why"])


@pytest.mark.slow
@pytest.mark.heavy
def test_a_replay_signed_by_an_untrusted_key_does_not_count(
    trained: Workspace, tmp_path: Path
) -> None:
    stranger = make_trust(tmp_path / "stranger", name="stranger")
    for folder in (CANDIDATE, REFERENCE):
        done = subprocess.run(
            [sys.executable, "-m", "gates", "-C", str(trained.root), "replay", folder],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "GATES_SIGNING_KEY": str(stranger.key)},
        )
        assert done.returncode == 0, done.stderr
    found = steps(trained)
    assert found["formal_alignment_steps"] == 0
    assert "replay.receipt.json: probe" in str(found["why"])
    assert "not a trust anchor" in str(found["why"])


@pytest.mark.slow
@pytest.mark.heavy
def test_a_signer_trusted_for_paddle_but_not_for_replay_does_not_count(
    trained: Workspace, tmp_path: Path, session_trust: TrustSetup
) -> None:
    shutil.copy(session_trust.key.with_suffix(".pub"), tmp_path / "ci.pub")
    trust = tmp_path / "trust.toml"
    trust.write_text(session_trust.trust.read_text().replace('["*"]', '["paddle"]'))
    env = {**os.environ, "GATES_TRUST": str(trust)}
    for folder in (CANDIDATE, REFERENCE):
        assert gates_in(trained.root, env, "replay", folder).returncode == 0
    done = gates_in(trained.root, env, "steps", "--format", "json")
    found = json.loads(done.stdout)
    assert found["formal_alignment_steps"] == 0
    assert "trusted only for paddle, not for replay" in str(found["why"])


@pytest.fixture(scope="module")
def forged(tmp_path_factory: pytest.TempPathFactory, session_trust: TrustSetup) -> Path:
    home = tmp_path_factory.mktemp("home")
    root = tmp_path_factory.mktemp("forged") / "ws"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in environment(session_trust, home).items():
            patch.setenv(key, value)
        trained_workspace(root, dict(os.environ), (FORGE_STEP_43, TAMPER_STATE_40), sides=1)
    return root


@pytest.mark.slow
@pytest.mark.heavy
def test_a_signed_loss_fabricated_in_one_step_is_caught_by_a_window_over_it(
    forged: Path, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(forged, ws, symlinks=True)
    done = gates_in(ws, None, "replay", CANDIDATE, "--windows", "0", "--window", "42:44",
                    "--format", "json")  # fmt: skip
    assert done.returncode == 1, done.stderr
    window = json.loads(done.stdout)["windows"][0]
    assert window["result"] == "mismatch"
    mismatch = window["mismatch"]
    assert mismatch["step"] == 43
    assert mismatch["parts"] == []  # the state is right; the signed loss is not
    committed = int(mismatch["loss_committed"], 16)
    assert committed - int(mismatch["loss_replayed"], 16) in (1, -1)  # one bit (one ULP)
    text = gates_in(ws, None, "replay", CANDIDATE, "--windows", "0", "--window", "43:43")
    assert "MISMATCH at step 43: loss bits" in text.stdout


@pytest.mark.slow
def test_an_entrypoint_that_ignores_the_resume_arguments_is_caught(
    tmp_path: Path, session_trust: TrustSetup
) -> None:
    ws = trained_workspace(tmp_path / "ws", dict(os.environ), (IGNORE_RESUME,), sides=1)
    done = gates_in(ws.root, None, "replay", CANDIDATE, "--windows", "0", "--window", "45:45",
                    "--format", "json")  # fmt: skip
    assert done.returncode == 1, done.stderr
    window = json.loads(done.stdout)["windows"][0]
    assert window["result"] == "mismatch"
    assert "parameters" in window["mismatch"]["parts"]


@pytest.mark.slow
@pytest.mark.heavy
def test_a_signed_state_whose_digest_differs_from_its_commitment_is_not_replayed(
    forged: Path, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(forged, ws, symlinks=True)
    done = gates_in(ws, None, "replay", CANDIDATE, "--windows", "0", "--window", "31:31",
                    "--format", "json")  # fmt: skip
    assert done.returncode == 1, done.stderr
    window = json.loads(done.stdout)["windows"][0]
    assert window["result"] == "error"
    assert "saved state differs from its commitment at step 30 in parameters" in window["error"]


@pytest.mark.slow
@pytest.mark.heavy
def test_a_state_missing_for_the_sampled_window(forged: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(forged, ws, symlinks=True)
    done = gates_in(ws, None, "replay", CANDIDATE, "--windows", "0", "--window", "61:61")
    assert done.returncode == 1, done.stderr
    assert "step-000060.safetensors: the saved state for this window is missing" in done.stdout
    assert "replay=error" in done.stdout


@pytest.mark.slow
def test_the_trainer_callback_commits_the_state_after_each_logged_step(tmp_path: Path) -> None:
    """The PaddleFormers/HF callback protocol driven as a Trainer drives it, on a real
    Paddle model and optimizer: on_train_begin, then on_step_end before on_log."""
    import paddle  # noqa: PLC0415  (slow import: collecting this file stays fast)

    paddle.seed(7)
    model = paddle.nn.Linear(4, 2)
    optimizer = paddle.optimizer.AdamW(learning_rate=0.01, parameters=model.parameters())
    args = type("Args", (), {"gradient_accumulation_steps": 2})()
    state = type("State", (), {"global_step": 0})()
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 4}\n')
    recorder = RunRecorder(tmp_path / "run", framework="paddle", model_config=config, save_every=2)
    callback = GatesCallback(recorder, commit_state=True)
    hooks = {"model": model, "optimizer": optimizer}
    callback.on_train_begin(args, state, None, **hooks)
    for step in (1, 2, 3):
        loss = model(paddle.ones([3, 4])).mean()
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        state.global_step = step
        callback.on_step_end(args, state, None, **hooks)
        callback.on_log(args, state, None, logs={"loss": float(loss)})
    callback.on_train_end(args, state, None)
    found = json.loads((tmp_path / "run" / "commitments.json").read_text())
    assert [c["step"] for c in found["steps"]] == [0, 1, 2, 3]
    assert [c["saved"] is not None for c in found["steps"]] == [True, False, True, True]
    moments = load_state(tmp_path / "run" / "states" / "step-000003.safetensors", "s")
    assert moments.parts["optimizer"], "AdamW's moments are part of the state"
    assert moments.parts["data"]["position"].tolist() == [6]  # 3 steps x 2 accumulated batches
    assert len({c["parts"]["optimizer"] for c in found["steps"]}) == 4


@pytest.mark.slow
@pytest.mark.heavy
def test_the_replayed_code_runs_from_the_commit_without_the_evidence(
    trained: Workspace, tmp_path: Path
) -> None:
    """A cheating entrypoint cannot copy the committed states or losses by relative path:
    the window runs in the commit materialized from git objects, evidence locations left out
    (the sandbox hides the workspace itself)."""
    (trained.root / "model" / "train_paddle.py").write_text("# edited in the worktree\n")
    workspace = open_workspace(trained.root)
    source = tmp_path / "source"  # what the sandbox shows the replayed window
    materialize(workspace.root, "HEAD", workspace.config.evidence.locations, source)
    assert "RunRecorder" in (source / "model" / "train_paddle.py").read_text(), "the commit's"
    assert (source / "gates.toml").is_file()
    assert not (source / "results").exists()


@pytest.mark.slow
@pytest.mark.heavy
def test_torch_windows_replay_bit_for_bit_in_the_sandbox(
    tmp_path: Path, session_trust: TrustSetup
) -> None:
    """The reference side for real: a signed torch run of the example's entrypoint, replayed
    from its saved states by the same entrypoint in the sandbox, bit for bit; the audit then
    counts the steps on both sides."""
    ws = trained_workspace(tmp_path / "ws", dict(os.environ), torch_reference=True)
    commitments = json.loads((ws.root / REFERENCE / "commitments.json").read_text())
    assert commitments["framework"] == "torch"
    state = load_state(ws.root / REFERENCE / "states/step-000050.safetensors", "s")
    assert "torch.cpu" in state.parts["rng"]
    assert state.parts["data"]["position"].tolist() == [50]
    for folder in (REFERENCE, CANDIDATE):
        done = replay(ws, folder, "--seed", "ci-build-4711", "--format", "json")
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)
        assert {w["result"] for w in report["windows"]} == {"match"}
        assert report["differences"] == [], "replayed on the run's own build"
    assert json.loads(done.stdout)["framework"] == "paddle"
    found = steps(ws)
    assert found["formal_alignment_steps"] > 0, found["why"]


@pytest.mark.slow
@pytest.mark.heavy
def test_a_replay_on_another_build_is_judged_by_the_policy(
    tmp_path: Path, session_trust: TrustSetup
) -> None:
    """A mismatch on another framework build is inconclusive, not a forgery; a match there
    counts only where the policy says replay_across_builds = true. (On the run's own build a
    mismatch is a failure: test_a_signed_loss_fabricated_in_one_step_is_caught...)"""
    ws = trained_workspace(tmp_path / "ws", dict(os.environ), (FORGE_STEP_43, OTHER_BUILD))
    done = replay(ws, CANDIDATE, "--windows", "0", "--window", "43:43", "--format", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["result"] == "inconclusive"
    assert report["windows"][0]["mismatch"]["step"] == 43
    assert [(d["field"], d["kind"]) for d in report["differences"]] == [
        ("framework_version", "build")
    ]
    assert report["run_environment"]["framework_version"].endswith(".cluster")
    text = replay(ws, CANDIDATE, "--windows", "0", "--window", "43:43")
    assert "INCONCLUSIVE at step 43: loss bits" in text.stdout
    assert "replayed on another build or hardware than the run: framework_version" in text.stdout
    assert "replay=inconclusive" in text.stdout
    seed = next(
        f"ci-{i}"
        for i in range(100)
        if all(w.first != 43 for w in sample_windows(f"ci-{i}", 100, 2, 1))
    )
    for folder in (CANDIDATE, REFERENCE):
        done = replay(ws, folder, "--seed", seed, "--format", "json")
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["differences"]
    found = steps(ws)
    assert found["formal_alignment_steps"] == 0
    assert "replayed on another build or hardware (framework_version" in str(found["why"])
    assert "params.replay_across_builds = false" in str(found["why"])
    set_params(ws.root, {"replay_across_builds": "true"})  # the policy accepts it
    found = steps(ws)
    assert "replayed on another build" not in str(found["why"])
    # both sides forged step 43 alike, and no sampled window covered it: every step counts
    assert found["formal_alignment_steps"] == 100, found["why"]


RECORDED_TORCH = REPO_ROOT / "examples" / "glm52-minimal" / "results" / "torch"


@pytest.mark.slow
@pytest.mark.heavy
def test_the_recorded_torch_run_is_what_the_installed_torch_computes(tmp_path: Path) -> None:
    """The example's torch entrypoint, run here, writes its recorded run's losses and tensor
    dumps byte for byte (first recorded with torch 2.14.1, a CUDA build on the CPU;
    docs/replay.md), and commits the same states but for Python's and NumPy's global
    generators, which the example never seeds (nor draws from) and a replay restores."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATES_")}
    env.update({"GATES_RUN_DIR": str(tmp_path / "run"), "GATES_RUN_ID": "generate"})
    env.update({"GATES_FRAMEWORK": "torch", "PYTHONPATH": str(REPO_ROOT)})
    done = subprocess.run(
        [sys.executable, str(MODEL / "train_torch.py")],
        capture_output=True, text=True, check=False, env=env, cwd=MODEL.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ours = tmp_path / "run"
    dumps = sorted(p.relative_to(RECORDED_TORCH) for p in (RECORDED_TORCH / "tensors").rglob("*"))
    for relpath in [Path("loss.json"), Path("raw_loss.jsonl"), *dumps]:
        if not (RECORDED_TORCH / relpath).is_file():
            continue
        if kernels_as_recorded():
            assert (ours / relpath).read_bytes() == (RECORDED_TORCH / relpath).read_bytes()
        else:
            assert_close_files(ours / relpath, RECORDED_TORCH / relpath)
    mine, recorded = (
        json.loads((folder / "commitments.json").read_text())["steps"]
        for folder in (ours, RECORDED_TORCH)
    )
    # on other kernels (tests/kernels.py) the parameters, the optimizer state and the loss
    # bits are other bits; the data, the schedule and the random state are not
    computed = ("parameters", "optimizer") if kernels_as_recorded() else ()
    assert len(mine) == len(recorded) == 101
    for step, theirs in zip(mine, recorded, strict=True):
        if kernels_as_recorded():
            assert step["loss_bits"] == theirs["loss_bits"]
        assert step["saved"] == theirs["saved"]
        for part in (*computed, "data", "schedule"):
            assert step["parts"][part] == theirs["parts"][part], (step["step"], part)
    end = load_state(ours / "states/step-000100.safetensors", "ours").parts["rng"]
    assert np.array_equal(
        end["torch.cpu"],
        load_state(RECORDED_TORCH / "states/step-000100.safetensors", "recorded").parts["rng"][
            "torch.cpu"
        ],
    )
