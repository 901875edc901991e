"""The glm52-minimal example's tensor dumps (real torch and Paddle runs): the first
divergence located to a named tensor, the repeats identical, and the demo's tensor step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gates.commands.demo_tensors import tensor_step
from gates.workspace import open_workspace
from tests.conftest import REPO_ROOT, commit_all, make_repo, run_gates

EXAMPLE = REPO_ROOT / "examples" / "glm52-minimal"
PROFILE = {
    "name": "minimum_complete",
    "mode": "optimizer",
    "device": "cpu",
    "dtype": "float32",
    "tp": "1",
    "pp": "1",
    "ep": "1",
    "etp": "1",
    "sp": "false",
    "world": "1",
}


@pytest.fixture
def example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    root = tmp_path / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    repo = make_repo(root, {".gitignore": ".gates/\n__pycache__/\n"})
    commit_all(repo, "example")
    assert run_gates(capsys, "-C", str(root), "freeze", "pin", "HEAD").code == 0
    commit_all(repo, "pin")
    return root


def test_the_first_divergence_is_a_named_tensor_before_the_loss_diverges(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_gates(
        capsys,
        "-C",
        str(example),
        "check",
        "tensors",
        "results/torch",
        "results/paddle",
        "--format",
        "json",
    )
    assert result.code == 1
    found = json.loads(result.out)
    assert found["first_divergence"] == {
        "step": 1,
        "phase": "activation",
        "reference": "model.layers.0.input_layernorm",
        "candidate": "model.layers.0.input_layernorm",
        "index": 17,
    }
    assert found["totals"]["missing"] == 0 and not found["problems"]
    assert found["totals"]["compared"] == 84
    used = {"ffn-fusion", "ffn-activation-fusion", "linear-transpose", "embedding-module"}
    assert not used & set(found["unmatched_rules"])


def test_demo_tensor_step(example: Path) -> None:
    lines: list[str] = []
    tensor_step(open_workspace(example), lines.append, PROFILE)
    text = "\n".join(lines)
    assert "results/torch/tensors (recorded dump): tensor_dump formal/1" in text
    assert (
        "first divergence: step 1 activation model.layers.0.input_layernorm -> "
        "model.layers.0.input_layernorm, element 17"
    ) in text
    assert "deterministic=true" in text
    check = json.loads((example / "outputs/tensor_check.receipt.json").read_text())
    assert check["kind"] == "tensor_check" and check["evidenceClass"] == "formal"
