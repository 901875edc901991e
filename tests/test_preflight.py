"""`gates run`'s pre-flight (the six causes of a `formal/1` that would count 0), what the audit
counts after a run, and the recorder's safe defaults: real runs, real keys, real git."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    CPU_PROFILE,
    RUN_ENV,
    Workspace,
    commit_all,
    declare_entrypoints,
    make_trust,
    profile_args,
    write,
)
from tests.lossgen import train_losses

LOSSES = json.dumps(train_losses(5))

#: A training entrypoint that records through gates.training.recorder.RunRecorder, as docs/paddle.md
#: shows: `python recorder/train.py KWARGS_JSON LOSSES_JSON`.
RECORDER_SCRIPT = """import json, sys
from gates.training.recorder import RunRecorder

kwargs, losses = json.loads(sys.argv[1]), json.loads(sys.argv[2])
with RunRecorder(**kwargs) as run:
    for step, loss in enumerate(losses, 1):
        run.record(step, loss)
"""


@pytest.fixture
def launch_ws(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Workspace:
    """Both entrypoints declared (trainer/train.py), the contracts' profile what this CPU
    machine runs; a recorder entrypoint and a model config committed and pinned."""
    declare_entrypoints(ws.root)
    write(ws.root, "recorder/train.py", RECORDER_SCRIPT)
    write(ws.root, "model/config.json", json.dumps({"hidden_size": 16}))
    ws.pin = commit_all(ws.repo, "recorder entrypoint")
    assert ws.gates(capsys, "freeze", "pin", "HEAD").code == 0
    return ws


def run(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    result = ws.gates(capsys, "run", *args)
    return result.code, result.out, result.err


def entrypoint(framework: str = "paddle") -> list[str]:
    return [
        "--",
        sys.executable,
        "trainer/train.py",
        framework,
        LOSSES,
        f"env={json.dumps(RUN_ENV)}",
    ]


def test_a_run_that_will_count_passes_the_preflight_and_says_so(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        launch_ws, capsys, "--framework", "paddle", *profile_args(CPU_PROFILE), *entrypoint()
    )
    assert code == 0, err
    assert "pre-flight" not in err
    assert "results/paddle/loss.receipt.json: counts (formal" in out
    assert "results/paddle/run.receipt.json: counts (formal" in out
    assert "formal/1" not in out, "what counts is printed, not the stamp"


def test_no_profile_given_takes_the_contracts(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(launch_ws, capsys, "--framework", "paddle", *entrypoint())
    assert code == 0, err
    assert "no --profile given: the profile acceptance_oracle.results-schema" in err
    manifest = json.loads((launch_ws.root / "results/paddle/manifest.json").read_text())
    assert manifest["profile"]["name"] == "minimum_complete"
    assert manifest["profile"]["tp"] == 2
    assert "results/paddle/loss.receipt.json: counts (formal" in out


def test_default_profile_against_the_required_one_is_refused_before_launch(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        launch_ws, capsys, "--framework", "paddle", "--profile", "name=default", *entrypoint()
    )
    assert code == 1
    assert "profile: acceptance_oracle.results-schema-and-provenance requires another" in err
    assert "name=default (contract requires name=minimum_complete)" in err
    assert "fix: run with --profile name=minimum_complete" in err
    assert "nothing launched" in err
    assert not (launch_ws.root / "results/paddle/loss.json").exists()


def test_a_command_other_than_the_entrypoint_is_refused(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        launch_ws,
        capsys,
        "--framework",
        "paddle",
        "--",
        sys.executable,
        "recorder/train.py",
        "{}",
        LOSSES,
    )
    assert code == 1
    assert "entrypoint: command" in err
    assert "is not the declared paddle entrypoint 'python trainer/train.py'" in err
    assert "fix: gates run --framework paddle -- python trainer/train.py" in err


def test_device_cuda_on_a_cpu_build_is_refused(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(launch_ws.root, {**CPU_PROFILE, "device": "cuda"})
    profile = profile_args({**CPU_PROFILE, "device": "cuda"})
    code, _, err = run(launch_ws, capsys, "--framework", "paddle", *profile, *entrypoint())
    assert code == 1
    assert "device: profile claims device=cuda but the run captured cpu on a CPU build" in err


def test_no_signing_key_is_refused(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATES_SIGNING_KEY")
    code, _, err = run(
        launch_ws, capsys, "--framework", "paddle", *profile_args(CPU_PROFILE), *entrypoint()
    )
    assert code == 1
    assert "key: no signing key (GATES_SIGNING_KEY is not set)" in err
    assert "gates key new" in err


def test_an_untrusted_signer_is_refused(
    launch_ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    rogue = make_trust(tmp_path / "rogue", name="rogue")
    monkeypatch.setenv("GATES_SIGNING_KEY", str(rogue.key))
    code, _, err = run(
        launch_ws, capsys, "--framework", "paddle", *profile_args(CPU_PROFILE), *entrypoint()
    )
    assert code == 1
    assert f"trust: signing key {rogue.keyid[:16]}" in err
    assert "is not among the trust anchors in force" in err


def test_a_signer_trusted_for_the_other_side_only_is_refused(
    launch_ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    torch_only = make_trust(tmp_path / "torch-only", frameworks='["torch"]')
    monkeypatch.setenv("GATES_SIGNING_KEY", str(torch_only.key))
    monkeypatch.setenv("GATES_TRUST", str(torch_only.trust))
    code, _, err = run(
        launch_ws, capsys, "--framework", "paddle", *profile_args(CPU_PROFILE), *entrypoint()
    )
    assert code == 1
    assert "signer ci may attest torch, not paddle" in err


def test_no_framework_is_refused(launch_ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(launch_ws, capsys, *profile_args(CPU_PROFILE), *entrypoint())
    assert code == 1
    assert "framework: no --framework" in err


def test_force_runs_anyway_and_says_what_counts_zero(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        launch_ws,
        capsys,
        "--framework",
        "paddle",
        "--force",
        "--profile",
        "name=default",
        *profile_args({k: v for k, v in CPU_PROFILE.items() if k != "name"}),
        *entrypoint(),
    )
    assert code == 0, err
    assert "running anyway (--force)" in err
    assert (
        "results/paddle/loss.receipt.json: counts 0 (formal: for "
        "acceptance_oracle.results-schema-and-provenance: counts 0: other profile: name=default"
    ) in out


@pytest.mark.slow
def test_env_capture_without_a_model_config_fails_at_once(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorder refuses before the first step: env.json would lack model_config_sha256."""
    code, _, err = run(
        launch_ws,
        capsys,
        "--framework",
        "torch",
        "--force",
        "--",
        sys.executable,
        "recorder/train.py",
        "{}",
        LOSSES,
    )
    assert code == 1
    assert "no model config: env.json needs model_config_sha256" in err
    assert "--model-config" in err
    assert not (launch_ws.root / "results/torch/loss.json").exists()


@pytest.mark.slow
def test_the_recorder_takes_framework_and_config_from_gates_run(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/paddle.md's example passes no framework: a torch run's env.json says torch."""
    code, _, err = run(
        launch_ws,
        capsys,
        "--framework",
        "torch",
        "--force",
        "--model-config",
        "model/config.json",
        "--",
        sys.executable,
        "recorder/train.py",
        "{}",
        LOSSES,
    )
    assert code == 0, err
    env = json.loads((launch_ws.root / "results/torch/env.json").read_text())
    assert env["framework"] == "torch"
    assert env["model_config_sha256"] and len(env["model_config_sha256"]) == 64


def test_a_recorder_framework_that_contradicts_the_launch_fails(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    kwargs = json.dumps({"framework": "paddle", "model_config": "model/config.json"})
    code, _, err = run(
        launch_ws,
        capsys,
        "--framework",
        "torch",
        "--force",
        "--",
        sys.executable,
        "recorder/train.py",
        kwargs,
        LOSSES,
    )
    assert code == 1
    assert "RunRecorder(framework='paddle') but `gates run --framework torch` launched it" in err


@pytest.mark.slow
def test_a_nan_loss_is_recorded_as_such_and_is_the_first_divergence(
    launch_ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = train_losses(6)
    nan_losses = [*losses[:3], math.nan, *losses[4:]]
    kwargs = json.dumps({"model_config": "model/config.json"})
    for framework, series in (("torch", losses), ("paddle", nan_losses)):
        code, _, err = run(
            launch_ws,
            capsys,
            "--framework",
            framework,
            "--force",
            "--",
            sys.executable,
            "recorder/train.py",
            kwargs,
            json.dumps(series),
        )
        assert code == 0, err
    assert "step 4 loss is nan: recorded as non-finite; loss.json stops at step 3" in err
    candidate = launch_ws.root / "results/paddle"
    series = json.loads((candidate / "loss.json").read_text())
    assert series == {"losses": losses[:3], "non_finite": {"step": 4, "loss": "nan"}}
    raw = [json.loads(line) for line in (candidate / "raw_loss.jsonl").read_text().splitlines()]
    assert raw[3] == {"step": 4, "loss": None, "non_finite": "nan"}
    assert "NaN" not in (candidate / "raw_loss.jsonl").read_text()
    check = launch_ws.gates(
        capsys,
        "check",
        "loss",
        "results/torch/loss.json",
        "results/paddle/loss.json",
        "--required-steps",
        "6",
        "--format",
        "json",
    )
    figures = json.loads(check.out)
    assert figures["first_divergence_step"] == 4
    assert figures["length_match"] is False
