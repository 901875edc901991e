"""`gates check loss` and `gates check determinism` on losses from a real small training run."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

import gates.losses.series
from tests.helpers import Workspace, declare_entrypoints, signed_run, write
from tests.lossgen import train_losses, write_loss_json, write_raw_loss

REF = "results/torch/loss.json"
CAND = "results/paddle/loss.json"


def check(
    ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, object], str]:
    result = ws.gates(capsys, "check", "loss", *args, "--format", "json")
    return (
        result.code,
        (json.loads(result.out[: result.out.rindex("}") + 1]) if result.out else {}),
        result.err,
    )


def pair(ws: Workspace, ref: list[float], cand: list[float]) -> None:
    write_loss_json(ws.root / REF, ref)
    write_loss_json(ws.root / CAND, cand)


def receipt(
    ws: Workspace, capsys: pytest.CaptureFixture[str], subject: str, framework: str
) -> None:
    result = ws.gates(
        capsys,
        "receipt",
        "create",
        "--kind",
        "loss",
        "--subject",
        subject,
        "--framework",
        framework,
        "--force",
    )
    assert result.code == 0, result.err


def test_identical_runs_are_bit_exact(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    losses = train_losses(100)
    pair(ws, losses, train_losses(100))
    code, figures, _ = check(ws, capsys, REF, CAND, "--bit-exact")
    assert code == 0
    assert figures["consistent_steps"] == 100
    assert figures["first_divergence_step"] is None
    assert figures["bit_exact_required_steps"] is True
    assert (figures["max_diff"], figures["max_ulp"]) == (0.0, 0)


def test_a_kernel_change_is_found_at_its_first_step(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = train_losses(100)
    candidate = train_losses(100, diverge_at=40)
    pair(ws, reference, candidate)
    code, figures, _ = check(ws, capsys, REF, CAND, "--bit-exact")
    assert code == 1
    assert figures["first_divergence_step"] == 40
    assert figures["length_match"] is True
    differing = sum(
        struct.pack("<d", a) != struct.pack("<d", b)
        for a, b in zip(reference, candidate, strict=True)
    )
    assert figures["consistent_steps"] == 100 - differing
    assert figures["max_diff"] == max(abs(a - b) for a, b in zip(reference, candidate, strict=True))
    assert figures["bit_exact_required_steps"] is False
    code, _, _ = check(ws, capsys, REF, CAND)
    assert code == 0  # lengths match; without --bit-exact divergence is reported, not failed


def test_signed_zero_is_not_equal(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    pair(ws, [0.0, 1.2345678912345], [-0.0, 1.2345678912345])
    code, figures, _ = check(ws, capsys, REF, CAND, "--required-steps", "2", "--bit-exact")
    assert code == 1
    assert figures["consistent_steps"] == 1
    assert figures["first_divergence_step"] == 1
    assert figures["max_diff"] == 0.0
    assert figures["max_ulp"] == 1


def test_one_ulp_apart(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    value = 11.811029434204102
    pair(ws, [value, value], [value, math.nextafter(value, math.inf)])
    _, figures, _ = check(ws, capsys, REF, CAND, "--required-steps", "2")
    assert figures["max_ulp"] == 1
    assert figures["first_divergence_step"] == 2
    assert figures["consistent_steps"] == 1


def test_99_against_100_steps(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    losses = train_losses(100)
    pair(ws, losses, losses[:99])
    code, figures, _ = check(ws, capsys, REF, CAND)
    assert code == 1
    assert figures["length_match"] is False
    assert figures["enough_steps"] is False
    assert figures["consistent_steps"] == 99
    assert figures["first_divergence_step"] == 100  # where the shorter series ends


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"losses": [1.5, NaN]}', "$.losses[1]: NaN is not finite"),
        ('{"losses": [1.5, Infinity]}', "$.losses[1]: Infinity is not finite"),
        ('{"losses": [1.5, -Infinity]}', "$.losses[1]: -Infinity is not finite"),
        ('{"losses": ["11.811029434204102"]}', "$.losses[0]: '11.811029434204102' is not a number"),
        ('{"losses": [true]}', "$.losses[0]: True is not a number"),
        ('{"losses": []}', "non-empty array"),
        ('{"loss": [1.0]}', "'losses' array"),
        ('{"losses": [1e999]}', "is not finite"),
    ],
)
def test_invalid_loss_files_are_errors_naming_the_file(
    ws: Workspace, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    write_loss_json(ws.root / REF, train_losses(3))
    write(ws.root, CAND, text)
    result = ws.gates(capsys, "check", "loss", REF, CAND)
    assert result.code == 2
    assert f"gates: error: {CAND}: " in result.err
    assert problem in result.err
    assert not (ws.root / "outputs/loss_check.json").exists()


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (
            ['{"step": 1, "loss": 1.25}', '{"step": 1, "loss": 1.5}'],
            "line 2: step 1 where step 2 was expected (a repeated step)",
        ),
        (
            ['{"step": 1, "loss": 1.25}', '{"step": 3, "loss": 1.5}'],
            "line 2: step 3 where step 2 was expected (a step is missing)",
        ),
        (['{"step": 2, "loss": 1.25}'], "line 1: step 2 where step 1 was expected"),
        (['{"step": 1, "loss": "1.25"}'], "line 1: loss: '1.25' is not a number"),
        (['{"step": "1", "loss": 1.25}'], "not an integer"),
        (['{"step": 1}'], 'line 1: expected {"step", "loss"}'),
        (['{"step": 1, "loss": NaN}'], "NaN is not valid JSON"),
    ],
)
def test_invalid_raw_loss_lines(
    ws: Workspace, capsys: pytest.CaptureFixture[str], lines: list[str], problem: str
) -> None:
    write_raw_loss(ws.root / "results/torch/raw_loss.jsonl", [1.25, 1.5])
    write(ws.root, "results/paddle/raw_loss.jsonl", "\n".join(lines) + "\n")
    result = ws.gates(
        capsys, "check", "loss", "results/torch/raw_loss.jsonl", "results/paddle/raw_loss.jsonl"
    )
    assert result.code == 2
    assert problem in result.err


def test_raw_loss_against_loss_json_and_run_folders(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    losses = train_losses(50)
    write_raw_loss(ws.root / "experiments/e053/repeat-1/raw_loss.jsonl", losses)
    write_loss_json(ws.root / CAND, losses)
    code, figures, _ = check(
        ws, capsys, "experiments/e053/repeat-1", CAND, "--required-steps", "50", "--bit-exact"
    )
    assert code == 0
    assert figures["consistent_steps"] == 50


def test_rounded_losses_are_flagged_and_not_bit_comparable(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    exact = train_losses(20)
    pair(ws, [round(v, 4) for v in exact], [round(v, 4) for v in exact])
    result = ws.gates(capsys, "check", "loss", REF, CAND, "--required-steps", "20", "--bit-exact")
    assert result.code == 1
    assert "reference_rounded=true" in result.out
    assert "bit_comparable=false" in result.out
    assert f"rounded=true: every value of {REF} has 7 or fewer significant digits" in result.out


@pytest.mark.slow
def test_output_and_receipt_name_the_input_receipts(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, "torch", train_losses(10))
    signed_run(ws.root, capsys, "paddle", train_losses(10))
    code, _, _ = check(
        ws,
        capsys,
        REF,
        CAND,
        "--required-steps",
        "10",
        "-o",
        "experiments/e055/checker_run.receipt.json",
    )
    assert code == 0
    output = json.loads((ws.root / "experiments/e055/checker_run.json").read_text())
    ids = {
        json.loads((ws.root / p).read_text())["id"]
        for p in ("results/torch/loss.receipt.json", "results/paddle/loss.receipt.json")
    }
    assert {output["reference"]["receipt"], output["candidate"]["receipt"]} == ids
    check_receipt = json.loads((ws.root / "experiments/e055/checker_run.receipt.json").read_text())
    assert set(check_receipt["provenance"]["inputs"]) == ids
    assert check_receipt["kind"] == "loss_check"
    assert check_receipt["evidenceClass"] == "formal"


def test_check_of_unreceipted_inputs_is_probe(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    pair(ws, train_losses(5), train_losses(5))
    result = ws.gates(capsys, "check", "loss", REF, CAND, "--required-steps", "5")
    assert result.code == 0
    assert f"probe because: input {REF} is not bound by an accepted receipt" in result.out


def test_tampered_input_receipt_rejects_the_check_receipt(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    pair(ws, train_losses(10), train_losses(10))
    receipt(ws, capsys, REF, "torch")
    receipt(ws, capsys, CAND, "paddle")
    check(ws, capsys, REF, CAND, "--required-steps", "10")
    tampered = ws.root / "results/paddle/loss.receipt.json"
    document = json.loads(tampered.read_text())
    document["evidenceClass"], document["formalWeight"] = "probe", 0
    document["stampReasons"] = ["edited"]
    tampered.write_text(json.dumps(document))
    result = ws.gates(capsys, "audit", "--format", "json")
    receipts = {r["path"]: r for r in json.loads(result.out)["receipts"]}
    assert receipts["results/paddle/loss.receipt.json"]["status"] == "rejected"
    check_entry = receipts["outputs/loss_check.receipt.json"]
    assert check_entry["status"] == "rejected"
    assert "is not an accepted receipt in this workspace" in check_entry["reason"]


def test_determinism_of_three_repeats(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [f"experiments/e053/paddle_det/repeat-{i}" for i in (1, 2, 3)]
    for run in runs:
        write_raw_loss(ws.root / run / "raw_loss.jsonl", train_losses(30, seed=7))
    result = ws.gates(capsys, "check", "determinism", *runs, "--format", "json")
    assert result.code == 0
    figures = json.loads(result.out)
    assert figures["deterministic"] is True
    assert figures["deterministic_steps"] == 30
    write_raw_loss(ws.root / runs[2] / "raw_loss.jsonl", train_losses(30, seed=7, diverge_at=12))
    result = ws.gates(capsys, "check", "determinism", *runs, "--format", "json")
    assert result.code == 1
    figures = json.loads(result.out)
    assert figures["first_differing_step"] == 12
    assert figures["deterministic_steps"] == 11


@pytest.mark.slow
@pytest.mark.heavy
def test_a_million_steps_parsed_once_per_file(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spy around the real parser (no mock): each file is parsed exactly once."""
    base = train_losses(1000)
    losses = [value + step for step in range(1000) for value in base]
    pair(ws, losses, losses)
    calls: list[str] = []
    real = gates.losses.series.parse_losses

    def counting(data: bytes, source: str) -> gates.losses.series.LossSeries:
        calls.append(source)
        return real(data, source)

    monkeypatch.setattr(gates.losses.series, "parse_losses", counting)
    code, figures, _ = check(ws, capsys, REF, CAND, "--required-steps", "1000000", "--bit-exact")
    assert code == 0
    assert figures["consistent_steps"] == 1_000_000
    assert sorted(calls) == sorted([REF, CAND])


def test_loss_path_outside_the_workspace_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    outside = write_loss_json(tmp_path / "elsewhere.json", [1.0])
    write_loss_json(ws.root / CAND, [1.0])
    result = ws.gates(capsys, "check", "loss", str(outside), CAND)
    assert result.code == 2
    assert "outside the workspace" in result.err


def test_float32_losses_are_measured_in_float32_ulps(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """A float32 loss recorded through float(): one float32 ULP apart is 1, not 2**29."""
    value = 11.811029434204102  # a float32 value, as float(loss) of a float32 tensor gives
    above = struct.unpack(
        "<f", struct.pack("<i", struct.unpack("<i", struct.pack("<f", value))[0] + 1)
    )[0]
    pair(ws, [value, value], [value, above])
    _, figures, _ = check(ws, capsys, REF, CAND, "--required-steps", "2")
    assert (figures["max_ulp"], figures["ulp_dtype"]) == (1, "float32")
    pair(ws, [value, value], [value, math.nextafter(value, math.inf)])  # not a float32
    _, figures, _ = check(ws, capsys, REF, CAND, "--required-steps", "2")
    assert (figures["max_ulp"], figures["ulp_dtype"]) == (1, "float64")
