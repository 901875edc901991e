"""Typed figures: what a contract decided travels on its result, and the status block and
`gates steps` show that, not a re-reading of the checkers' files or of the detail texts.
And the command line's `--format`, which reaches a command as one output object and is
never recorded as part of a checker's command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.contracts.model import ContractResult, ResultsFigures
from gates.core.criteria import Criterion, DischargeStatus
from gates.policy.contract_files import ContractSpec
from gates.tensors.progress import Progress, TensorFigures, tensor_progress
from tests import test_checkpoint_cli as checkpoint_cli
from tests.helpers import Workspace, inputs_at
from tests.test_checkpoint_cli import CAND, REF

CHECKPOINT_UNVERIFIED = "Checkpoint canonical hash equality"


def _status(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], str]:
    """`gates status --format json`: what is unverified, and what is not claimed."""
    document = json.loads(ws.gates(capsys, "status", "--format", "json").out)
    return document["unverified"], document["not_claimed"]


def _results_figures(ws: Workspace) -> ResultsFigures:
    from gates.engine.audit import run_audit  # noqa: PLC0415

    result = run_audit(inputs_at(ws.root))
    found = [c.figures for c in result.contracts if isinstance(c.figures, ResultsFigures)]
    assert len(found) == 1
    return found[0]


@pytest.mark.slow
def test_a_recomputed_hash_match_is_what_the_status_block_shows(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint_cli.test_results_contract_can_require_equal_checkpoint_hashes(ws, capsys)
    assert _results_figures(ws).hash_match is True
    unverified, not_claimed = _status(ws, capsys)
    assert not any(CHECKPOINT_UNVERIFIED in item for item in unverified)
    assert "checkpoint alignment" not in not_claimed


@pytest.mark.slow
def test_a_formal_claim_the_contract_refutes_stays_unverified(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """A formal checkpoint check says hash_match=true, the contract recomputes false: the
    block says what the contract decided (it used to believe the file)."""
    checkpoint_cli.test_a_hash_match_claim_is_recomputed_not_believed(ws, capsys)
    claim = json.loads((ws.root / "outputs/forged_check.json").read_text())
    assert claim["against"]["hash_match"] is True
    assert _results_figures(ws).hash_match is False
    unverified, not_claimed = _status(ws, capsys)
    assert any(CHECKPOINT_UNVERIFIED in item for item in unverified)
    assert "checkpoint alignment" in not_claimed
    block = ws.gates(capsys, "status").out
    assert f"- {CHECKPOINT_UNVERIFIED}" in block
    # the evidence table still shows what the checker wrote, read through its model
    assert "hash_match=true" in block


def test_a_checkers_format_is_not_part_of_its_recorded_command(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint_cli.test_results_contract_can_require_equal_checkpoint_hashes(ws, capsys)
    made = ws.gates(capsys, "check", "checkpoint", CAND, "--against", REF, "--format", "json")
    assert made.code == 0, made.err
    assert json.loads(made.out)["against"]["hash_match"] is True  # one JSON document
    receipt = json.loads((ws.root / "outputs/checkpoint_check.receipt.json").read_text())
    assert receipt["provenance"]["command"] == [
        "gates", "check", "checkpoint", "--against", REF, CAND,
    ]  # fmt: skip


def _tensor_contract(figures: TensorFigures | None, detail: str) -> ContractResult:
    spec = ContractSpec.model_validate(
        {
            "id": "contract_environment.tensor-alignment",
            "title": "tensors",
            "check": "tensor_alignment",
            "discharge": "bit-identical tensors",
        }
    )
    criterion = Criterion("tensors_equal", False, detail)
    return ContractResult(
        spec, Path("contracts/tensor-alignment.toml"), DischargeStatus.DISCHARGING,
        (Criterion("reference_dump_formal", True, "bound"), criterion), figures=figures,
    )  # fmt: skip


def test_the_tensor_progress_is_the_contracts_figures_not_its_detail() -> None:
    figures = TensorFigures(2, 3, "first divergence: step 3 grad w (element 0)")
    decided = _tensor_contract(figures, "tensor_aligned_steps = 9 / 9; a detail is for people")
    assert tensor_progress([decided]) == Progress(2, 3, figures.detail, False)
    assert figures.line() == (
        "tensor_aligned_steps = 2 / 3; first divergence: step 3 grad w (element 0)"
    )
    # an evaluation that decided no figures (it failed) shows its first unmet criterion
    failed = _tensor_contract(None, "tensor_aligned_steps = 9 / 9; ignored")
    assert tensor_progress([failed]) == Progress(
        0, 0, "tensors_equal: tensor_aligned_steps = 9 / 9; ignored", False
    )
