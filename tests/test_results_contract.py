"""The manifest and results contracts and `gates steps`, through `gates audit`."""

from __future__ import annotations

import json

import pytest

from tests.helpers import (
    CPU_PROFILE,
    RUN_ENV,
    Workspace,
    declare_entrypoints,
    profile_args,
    signed_run,
    write,
)
from tests.lossgen import train_losses, write_loss_json

RESULTS_ID = "acceptance_oracle.results-schema-and-provenance"
MANIFEST_ID = "contract_environment.manifest-format-key"
PROFILE = CPU_PROFILE
ENV = RUN_ENV


@pytest.fixture(autouse=True)
def entrypoints(ws: Workspace) -> None:
    declare_entrypoints(ws.root)


def receipt(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    subject: str,
    framework: str | None = None,
    *,
    profile: dict[str, str] | None = None,
) -> None:
    args = [
        "receipt",
        "create",
        "--kind",
        kind,
        "--subject",
        subject,
        "--force",
        *profile_args(PROFILE if profile is None else profile),
    ]
    if framework:
        args += ["--framework", framework]
    result = ws.gates(capsys, *args)
    assert result.code == 0, result.err


def record_side(
    ws: Workspace,
    capsys: pytest.CaptureFixture[str],
    framework: str,
    losses: list[float],
    profile: dict[str, str] | None = None,
    *,
    probe: bool = False,
    out: str | None = None,
) -> None:
    """A signed `gates run` of the side's entrypoint that writes these losses (another profile
    than the contract's is run with --force: the pre-flight would refuse it)."""
    signed_run(
        ws.root,
        capsys,
        framework,
        losses,
        profile=profile or PROFILE,
        probe=probe,
        out=out,
        force=profile is not None,
    )


def record_repeats(ws: Workspace, capsys: pytest.CaptureFixture[str], losses: list[float]) -> None:
    runs = []
    for index in (1, 2):
        folder = f"experiments/e053/paddle_det/repeat-{index}"
        signed_run(ws.root, capsys, "paddle", losses, out=folder, raw=True)
        runs.append(f"{folder}/raw_loss.jsonl")
    assert ws.gates(capsys, "check", "determinism", *runs).code == 0


def audit(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    result = ws.gates(capsys, "audit", "--format", "json")
    return result.code, json.loads(result.out)


def contract(report: dict[str, object], contract_id: str) -> dict[str, object]:
    return next(c for c in report["contracts"] if c["id"] == contract_id)  # type: ignore[union-attr]


def criteria(report: dict[str, object], contract_id: str) -> dict[str, dict[str, object]]:
    return {c["name"]: c for c in contract(report, contract_id)["criteria"]}  # type: ignore[union-attr]


def test_manifest_without_format_is_an_unmet_criterion_and_the_audit_completes(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {
        "format": "gates.run-manifest/v1",
        "run_id": "r1",
        "entrypoint": "train.py",
        "framework": "paddle",
        "profile": {**PROFILE, "tp": 2, "pp": 2, "ep": 1, "etp": 1, "sp": True, "world": 4},
    }
    write(ws.root, "results/paddle/manifest.json", json.dumps(good))
    bad = {key: value for key, value in good.items() if key != "format"}
    write(ws.root, "experiments/e055/manifest.json", json.dumps(bad))
    write(ws.root, "experiments/e056/manifest.json", json.dumps({**good, "format": "bench/v0"}))
    code, report = audit(ws, capsys)
    assert code == 1
    found = criteria(report, MANIFEST_ID)
    assert found["format:results/paddle/manifest.json"]["met"] is True
    missing = found["format:experiments/e055/manifest.json"]
    assert missing["met"] is False
    assert missing["detail"].startswith(  # type: ignore[union-attr]
        "UnsupportedRunSchemaError: experiments/e055/manifest.json: manifest has no 'format' key"
    )
    assert "gates run" in missing["detail"]  # type: ignore[operator]
    assert (
        "unsupported manifest format 'bench/v0'"
        in found["format:experiments/e056/manifest.json"]["detail"]
    )  # type: ignore[operator]
    assert contract(report, MANIFEST_ID)["dischargeStatus"] == "discharging"
    assert contract(report, RESULTS_ID)["dischargeStatus"] != "error"


def test_no_manifest_at_all_is_undischarged(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _, report = audit(ws, capsys)
    assert contract(report, MANIFEST_ID)["dischargeStatus"] == "undischarged"


def test_schema_half_alone_is_discharging(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    record_side(ws, capsys, "torch", train_losses(100))
    record_side(ws, capsys, "paddle", train_losses(100, diverge_at=1))
    code, report = audit(ws, capsys)
    assert code == 1
    found = criteria(report, RESULTS_ID)
    assert found["reference_results_valid"]["met"] is True
    assert found["candidate_results_valid"]["met"] is True
    assert found["formal_alignment_steps"]["met"] is False
    assert contract(report, RESULTS_ID)["dischargeStatus"] == "discharging"
    assert report["formal_alignment_steps"] == 0


def test_missing_invalid_and_unreceipted_result_files_are_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write_loss_json(ws.root / "results/torch/loss.json", train_losses(5))
    write(
        ws.root,
        "results/paddle/env.json",
        json.dumps({"framework": "paddle", **ENV, "revision": "b4734de4"}),
    )
    write(ws.root, "results/paddle/loss.json", '{"losses": [1.0, "2.0"]}')
    _, report = audit(ws, capsys)
    found = criteria(report, RESULTS_ID)
    reference = found["reference_results_valid"]["detail"]
    assert "results/torch/loss.json is not bound by an accepted receipt" in reference  # type: ignore[operator]
    assert "results/torch/env.json is missing" in reference  # type: ignore[operator]
    candidate = found["candidate_results_valid"]["detail"]
    assert "results/paddle/loss.json: $.losses[1]: '2.0' is not a number" in candidate  # type: ignore[operator]
    assert "results/paddle/env.json: $.revision: 'b4734de4' is not valid under any" in candidate  # type: ignore[operator]
    assert [name for name, c in found.items() if c["met"]] == ["entrypoints_declared"]


@pytest.mark.slow
def test_full_alignment_discharges_the_oracle(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = train_losses(100)
    record_side(ws, capsys, "torch", losses)
    record_side(ws, capsys, "paddle", train_losses(100))
    record_repeats(ws, capsys, losses)
    code, report = audit(ws, capsys)
    assert report["formal_alignment_steps"] == 100
    assert report["required_steps"] == 100
    found = criteria(report, RESULTS_ID)
    assert all(c["met"] for c in found.values()), found
    assert contract(report, RESULTS_ID)["dischargeStatus"] == "discharged"
    assert code == 1  # the tensor-inventory contract still has no evaluator


@pytest.mark.slow
def test_repeats_that_differ_from_the_candidate_do_not_back_it(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = train_losses(100)
    record_side(ws, capsys, "torch", losses)
    record_side(ws, capsys, "paddle", losses)
    record_repeats(ws, capsys, train_losses(100, seed=3))
    _, report = audit(ws, capsys)
    repeats = criteria(report, RESULTS_ID)["candidate_repeats_identical"]
    assert repeats["met"] is False, repeats
    assert (
        "no formal determinism check shows 2 identical repeats of results/paddle/loss.json"
        in repeats["detail"]
    )  # type: ignore[operator]


def test_first_divergence_sets_formal_alignment_steps(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    record_side(ws, capsys, "torch", train_losses(100))
    record_side(ws, capsys, "paddle", train_losses(100, diverge_at=40))
    result = ws.gates(capsys, "steps", "--format", "json")
    assert result.code == 1
    steps = json.loads(result.out)
    assert steps["formal_alignment_steps"] == 39
    assert "first divergence at step 40" in steps["why"]
    ledger = steps["ledger"]
    assert len(ledger) == 100
    assert all(row["equal"] for row in ledger[:39])
    assert ledger[39]["equal"] is False
    assert ledger[39]["reference_bits"] != ledger[39]["candidate_bits"]


def test_probe_receipts_never_raise_formal_alignment_steps(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = train_losses(100)
    write(ws.root, "paddleformers/glm/wip.py", "x = 1\n")
    record_side(ws, capsys, "torch", losses, probe=True)
    record_side(ws, capsys, "paddle", losses, probe=True)
    result = ws.gates(capsys, "steps")
    assert result.code == 1
    assert result.out.startswith("formal_alignment_steps = 0 / 100\n")
    assert "no formal reference loss" in result.out
    (ws.root / "paddleformers/glm/wip.py").unlink()
    result = ws.gates(capsys, "steps")
    assert result.out.startswith("formal_alignment_steps = 0 / 100\n")
    assert "stamped probe at creation" in result.out


def test_other_profile_counts_zero(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    losses = train_losses(100)
    record_side(ws, capsys, "torch", losses)
    record_side(ws, capsys, "paddle", losses, {**PROFILE, "tp": "1"})
    result = ws.gates(capsys, "steps", "--format", "json")
    steps = json.loads(result.out)
    assert steps["formal_alignment_steps"] == 0
    assert "other profile: tp=1 (contract requires tp=2)" in steps["why"]


def test_rounded_losses_give_zero(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    losses = [round(value, 3) for value in train_losses(100)]
    record_side(ws, capsys, "torch", losses)
    record_side(ws, capsys, "paddle", losses)
    steps = json.loads(ws.gates(capsys, "steps", "--format", "json").out)
    assert steps["formal_alignment_steps"] == 0
    assert "rounded losses are not bit-comparable" in steps["why"]


@pytest.mark.slow
def test_the_worst_of_several_formal_pairs_counts(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    record_side(ws, capsys, "torch", train_losses(100))
    record_side(ws, capsys, "paddle", train_losses(100))
    record_side(ws, capsys, "paddle", train_losses(100, diverge_at=60), out="results/paddle/rerun")
    steps = json.loads(ws.gates(capsys, "steps", "--format", "json").out)
    assert steps["formal_alignment_steps"] == 59
    assert "smallest of 2 formal pairs" in steps["why"]
    assert steps["candidate"] == "results/paddle/rerun/loss.receipt.json"


def test_steps_text_ledger_shows_bits(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    losses = train_losses(100)
    record_side(ws, capsys, "torch", losses)
    record_side(ws, capsys, "paddle", losses)
    result = ws.gates(capsys, "steps", "--limit", "3")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "formal_alignment_steps = 100 / 100"
    assert len([line for line in lines if line.strip().startswith(("1 ", "2 ", "3 "))]) == 3
    step_one = next(line for line in lines if line.strip().startswith("1 "))
    assert repr(losses[0]) in step_one
    assert step_one.rstrip().endswith("yes")


@pytest.mark.slow
def test_the_ledger_shows_the_first_divergence_past_its_limit(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    record_side(ws, capsys, "torch", train_losses(100))
    record_side(ws, capsys, "paddle", train_losses(100, diverge_at=40))
    result = ws.gates(capsys, "steps", "--limit", "3")
    lines = result.out.splitlines()
    last = lines[-1]
    assert last.endswith("(first divergence)") and last.split()[0] == "40", result.out
    assert lines[-2].strip() == "..."
    steps = json.loads(ws.gates(capsys, "steps", "--limit", "3", "--format", "json").out)
    assert steps["first_divergence"]["step"] == 40
    assert steps["first_divergence"]["reference_bits"] in last
    assert steps["first_divergence"]["candidate_bits"] in last


def test_more_identical_steps_than_required_are_capped_and_explained(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ws.root / "contracts/results-schema-and-provenance.toml"
    path.write_text(path.read_text().replace("required_steps = 100", "required_steps = 5"))
    losses = train_losses(6)
    record_side(ws, capsys, "torch", losses)
    record_side(ws, capsys, "paddle", losses)
    steps = json.loads(ws.gates(capsys, "steps", "--format", "json").out)
    assert (steps["formal_alignment_steps"], steps["required_steps"]) == (5, 5)
    assert "bit-identical for all 6 common steps" in steps["why"]
    assert "the contract asks 5, so 5 / 5 are counted" in steps["why"]


@pytest.mark.slow
def test_steps_fail_while_a_receipt_is_rejected(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = train_losses(100)
    record_side(ws, capsys, "torch", losses)
    record_side(ws, capsys, "paddle", losses)
    assert ws.gates(capsys, "steps").code == 0
    write(ws.root, "results/paddle/stray.receipt.json", "{}")
    result = ws.gates(capsys, "steps")
    assert result.code == 1
    assert "formal_alignment_steps = 100 / 100" in result.out
    assert "cannot stand: 1 receipt(s) rejected (results/paddle/stray.receipt.json)" in result.out
    steps = json.loads(ws.gates(capsys, "steps", "--format", "json").out)
    assert steps["rejected"] == ["results/paddle/stray.receipt.json"]
