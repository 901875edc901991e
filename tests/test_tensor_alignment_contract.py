"""Contract acceptance_oracle.tensor-alignment through `gates audit`, `gates steps` and
`gates status`, on dumps written by the real writer and receipted through the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import Workspace, declare_entrypoints, signed_run, write
from tests.tensorgen import glm_pair, write_dump

CONTRACT = "acceptance_oracle.tensor-alignment"
PREFIX = "model.layers.0.mlp.experts.0"


def _receipt_dump(ws: Workspace, capsys: pytest.CaptureFixture[str], side: str, fw: str) -> None:
    """The dump a signed `gates run` of the side's entrypoint writes (staged by the test)."""
    staged = ws.root.parent / f"staged-{side}"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.move(ws.root / "results" / side / "tensors", staged)
    declare_entrypoints(ws.root)
    signed_run(ws.root, capsys, fw, [1.0], out=f"results/{side}", dump=staged)


def _steps_param(ws: Workspace, steps: str) -> None:
    path = ws.root / "contracts/tensor-alignment.toml"
    path.write_text(path.read_text().replace('steps = "1:100"', f'steps = "{steps}"'))


def _contract(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    audit = json.loads(ws.gates(capsys, "audit", "--format", "json").out)
    found: dict[str, object] = next(c for c in audit["contracts"] if c["id"] == CONTRACT)
    return found


def _commit_contract(ws: Workspace) -> None:
    ws.repo.git.add(A=True)
    ws.repo.git.commit("-q", "-m", "contract")


def _dumps(ws: Workspace, nudge: bool) -> None:
    ref, cand = glm_pair(np.random.default_rng(9), 3)
    if nudge:
        cand[3]["grad"][f"{PREFIX}.up_gate_proj.weight"].view(np.uint32)[0, 0] ^= 1
    write_dump(ws.root / "results/torch", ref, framework="torch")
    write_dump(ws.root / "results/paddle", cand)


def test_no_dumps_is_undischarged_and_names_what_is_missing(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = _contract(ws, capsys)
    assert contract["dischargeStatus"] == "undischarged"
    criteria = {c["name"]: c for c in contract["criteria"]}  # type: ignore[attr-defined]
    assert "no tensor_dump receipt binds results/torch/tensors/" in str(
        criteria["reference_dump_formal"]["detail"]
    )
    assert "results/torch: no dump folder here" in str(criteria["tensors_equal"]["detail"])
    status = ws.gates(capsys, "status")
    assert "Tensor-level alignment" in status.out
    assert "`tensor_aligned_steps = 0 / 100`" in status.out


@pytest.mark.slow
def test_equal_dumps_discharge_and_a_divergence_is_located(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _steps_param(ws, "1:3")
    _commit_contract(ws)
    _dumps(ws, nudge=False)
    _receipt_dump(ws, capsys, "torch", "torch")
    _receipt_dump(ws, capsys, "paddle", "paddle")
    contract = _contract(ws, capsys)
    assert contract["dischargeStatus"] == "discharged", contract
    steps = ws.gates(capsys, "steps", "--format", "json")
    tensors = json.loads(steps.out)["tensor_alignment"]
    assert tensors["tensor_aligned_steps"] == tensors["required_steps"] == 3
    status = ws.gates(capsys, "status")
    assert "Tensor-level alignment" not in status.out  # compared, so no longer unverified
    assert "Backward, gradient" not in status.out

    _dumps(ws, nudge=True)
    _receipt_dump(ws, capsys, "paddle", "paddle")
    contract = _contract(ws, capsys)
    criteria = {c["name"]: c for c in contract["criteria"]}  # type: ignore[attr-defined]
    assert criteria["tensors_equal"]["met"] is False
    assert criteria["tensors_equal"]["detail"] == (
        f"tensor_aligned_steps = 2 / 3; first divergence: step 3 grad {PREFIX}.gate_proj.weight "
        f"-> {PREFIX}.up_gate_proj.weight (element 0)"
    )
    text = ws.gates(capsys, "steps", "--limit", "0")
    assert "tensor_aligned_steps = 2 / 3 (first divergence: step 3 grad" in text.out
    status = ws.gates(capsys, "status")
    assert "`tensor_aligned_steps = 2 / 3`" in status.out
    assert "first divergence: step 3 grad" in status.out


@pytest.mark.slow
def test_changed_dump_after_receipt_does_not_count(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    _steps_param(ws, "1:3")
    _commit_contract(ws)
    _dumps(ws, nudge=False)
    _receipt_dump(ws, capsys, "torch", "torch")
    _receipt_dump(ws, capsys, "paddle", "paddle")
    grad = ws.root / "results/paddle/tensors/step-000001/grad.safetensors"
    data = bytearray(grad.read_bytes())
    data[-1] ^= 1
    grad.write_bytes(bytes(data))
    contract = _contract(ws, capsys)
    criteria = {c["name"]: c for c in contract["criteria"]}  # type: ignore[attr-defined]
    assert criteria["candidate_dump_formal"]["met"] is False
    assert criteria["tensors_equal"]["met"] is False


def test_bad_params_are_an_error_naming_the_key(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ws.root / "contracts/tensor-alignment.toml"
    path.write_text(path.read_text().replace('steps = "1:100"', 'steps = "5:"'))
    contract = _contract(ws, capsys)
    assert contract["dischargeStatus"] == "error"
    assert "params.steps: give both ends" in json.dumps(contract)
    write(
        ws.root,
        "contracts/tensor-alignment.toml",
        path.read_text()
        .replace('"5:"', '"1:2"')
        .replace('phases = ["activation", "grad", "optimizer", "param"]', 'phases = ["weights"]'),
    )
    assert "unknown phase(s) weights" in json.dumps(_contract(ws, capsys))


def test_default_set_holds_the_contract(tmp_path: Path) -> None:
    from gates.core.resources import contracts_dir  # noqa: PLC0415

    text = (contracts_dir() / "tensor-alignment.toml").read_text()
    assert f'id = "{CONTRACT}"' in text and "blocking = true" in text
