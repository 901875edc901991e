"""Bad input on the less travelled paths: each gets one clear error line and never `pass`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.glm_fixture import write_checkpoint
from tests.helpers import Workspace, write
from tests.lossgen import write_loss_json


def test_run_without_a_command_is_a_usage_error(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ws.gates(capsys, "run", "--framework", "paddle")
    assert result.code == 2
    assert "Missing argument" in result.err


@pytest.mark.parametrize("declared", ["checkpoint", "weights=results/x", "checkpoint="])
def test_run_with_a_bad_output_declaration(
    ws: Workspace, capsys: pytest.CaptureFixture[str], declared: str
) -> None:
    result = ws.gates(capsys, "run", "--output", declared, "--", "true")
    assert result.code == 2
    assert "expected KIND=PATH" in result.err


def test_run_folder_outside_the_evidence_locations_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ws.gates(capsys, "run", "--out", "paddleformers/run", "--", "true")
    assert result.code == 2
    assert "run folder paddleformers/run is outside the evidence locations" in result.err
    assert not (ws.root / "paddleformers/run").exists()


def test_run_profile_that_is_not_a_number_is_refused(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ws.gates(capsys, "run", "--profile", "tp=two", "--", "true")
    assert result.code == 2
    assert "profile tp=two is not a whole number" in result.err


def test_determinism_needs_two_runs(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    write_loss_json(ws.root / "experiments/r1/loss.json", [1.25, 1.5])
    result = ws.gates(capsys, "check", "determinism", "experiments/r1")
    assert result.code == 2
    assert "at least two runs" in result.err


def test_a_run_folder_without_losses(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    (ws.root / "experiments/empty").mkdir(parents=True)
    write_loss_json(ws.root / "experiments/r1/loss.json", [1.25])
    result = ws.gates(capsys, "check", "loss", "experiments/empty", "experiments/r1")
    assert result.code == 2
    assert "experiments/empty: no loss.json or raw_loss.jsonl in this run folder" in result.err


def contract_detail(
    ws: Workspace, capsys: pytest.CaptureFixture[str], contract_id: str
) -> tuple[str, str]:
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    assert report["verdict"] == "blocked"
    entry = next(c for c in report["contracts"] if c["id"] == contract_id)
    return entry["dischargeStatus"], entry["criteria"][0]["detail"]


@pytest.mark.parametrize(
    "case",
    [
        (
            "manifest-format-key.toml",
            "contract_environment.manifest-format-key",
            'roots = ["../elsewhere"]',
            "params.roots entry '../elsewhere'",
        ),
        (
            "results-schema-and-provenance.toml",
            "acceptance_oracle.results-schema-and-provenance",
            'required_files = ["weights.bin"]',
            "params.required_files: unknown ['weights.bin']",
        ),
        (
            "results-schema-and-provenance.toml",
            "acceptance_oracle.results-schema-and-provenance",
            "required_steps = -1",
            "params.required_steps",
        ),
        (
            "results-schema-and-provenance.toml",
            "acceptance_oracle.results-schema-and-provenance",
            "required_steps = 0",
            "params.required_steps: Input should be greater than or equal to 1",
        ),
        (
            "tensor-inventory.toml",
            "contract_environment.tensor-inventory",
            "require_hash_match = 1",
            "params.require_hash_match",
        ),
    ],
)
def test_bad_contract_params_are_an_error_status(
    ws: Workspace, capsys: pytest.CaptureFixture[str], case: tuple[str, str, str, str]
) -> None:
    file, contract_id, extra, message = case
    path = ws.root / "contracts" / file
    lines = path.read_text().splitlines()
    key = extra.partition(" = ")[0]
    lines = [line for line in lines if not line.startswith(f"{key} =")]
    at = lines.index("[params]") + 1
    path.write_text("\n".join([*lines[:at], extra, *lines[at:]]) + "\n")
    status, detail = contract_detail(ws, capsys, contract_id)
    assert status == "error"
    assert message in detail


def test_a_rule_that_cannot_apply_is_named_and_blocks(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    arrays = {
        "a.gate_proj.weight": ("F32", np.zeros((4, 2), "<u4")),
        "a.up_proj.weight": ("F32", np.zeros((3, 5), "<u4")),
    }
    write_checkpoint(ws.root / "results/torch/checkpoint", arrays, shards=1)
    write_checkpoint(ws.root / "results/paddle/checkpoint", arrays, shards=1)
    write(
        ws.root,
        "contracts/tensor-inventory.toml",
        "\n".join(
            [
                'id = "contract_environment.tensor-inventory"',
                'title = "t"',
                'check = "tensor_inventory"',
                'discharge = "d"',
                "[params]",
                "[[params.rules]]",
                'name = "bad-fusion"',
                'kind = "fuse"',
                'sources = ["{prefix}.gate_proj.weight", "{prefix}.up_proj.weight"]',
                'target = "{prefix}.up_gate_proj.weight"',
                "axis = 1",
                "",
            ]
        ),
    )
    report = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    entry = next(
        c for c in report["contracts"] if c["id"] == "contract_environment.tensor-inventory"
    )
    structural = next(c for c in entry["criteria"] if c["name"] == "no_structural_difference")
    assert structural["met"] is False
    assert (
        "rule bad-fusion: shapes [4, 2], [3, 5] do not add up along axis 1" in structural["detail"]
    )
    diff = ws.gates(
        capsys, "inventory", "diff", "results/torch/checkpoint", "results/paddle/checkpoint"
    )
    assert diff.code == 1
    assert "rule problem: rule bad-fusion" in diff.out


def test_pr_body_that_is_not_text(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    body = ws.root / "outputs/pr.md"
    body.parent.mkdir()
    body.write_bytes(b"\xff\xfe binary")
    result = ws.gates(capsys, "status", "--pr-body", str(body))
    assert result.code == 2
    assert "cannot read the PR body" in result.err
    assert body.read_bytes() == b"\xff\xfe binary"
