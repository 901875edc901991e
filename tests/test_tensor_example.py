"""The glm52-minimal example's tensor dumps (real torch and Paddle runs): the first
divergence located to a named tensor, the repeats identical, and the demo's tensor step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import pytest

from gates.commands.demo import PROFILE
from gates.commands.demo.tensors_act import probe_step, tensor_step
from tests.helpers import REPO_ROOT, commit_all, inputs_at, make_repo, run_gates, write

EXAMPLE = REPO_ROOT / "examples" / "glm52-minimal"


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


@pytest.mark.slow
def test_demo_tensor_step(example: Path) -> None:
    lines: list[str] = []
    tensor_step(inputs_at(example), lines.append, PROFILE)
    text = "\n".join(lines)
    # the torch dump ships receipted, signed with its recorded run (sign_recorded.py)
    assert "results/torch/tensors (recorded dump)" not in text
    assert (
        "first divergence: step 1 activation model.layers.0.input_layernorm -> "
        "model.layers.0.input_layernorm, element 17"
    ) in text
    assert "deterministic=true" in text
    check = json.loads((example / "outputs/tensor_check.receipt.json").read_text())
    # the dumps here are receipted by hand (not by signed runs of this tree's entrypoints),
    # so the check of them is probe and says which input made it so
    assert check["kind"] == "tensor_check" and check["evidenceClass"] == "probe"
    assert any(reason.startswith("input ") for reason in check["stampReasons"])


@pytest.mark.slow
def test_probe_explains_the_indexer_tensors_only_when_receipted(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def inventory() -> dict[str, object]:
        audit = json.loads(run_gates(capsys, "-C", str(example), "audit", "--format", "json").out)
        contract = next(c for c in audit["contracts"] if c["id"].endswith("tensor-inventory"))
        return {c["name"]: c for c in contract["criteria"]}

    before = inventory()["no_structural_difference"]
    assert before["met"] is False  # type: ignore[index]
    assert "expected_absent, unexplained: no formal consumption probe" in before["detail"]  # type: ignore[index]
    lines: list[str] = []
    probe_step(inputs_at(example), lines.append)
    assert "5 of 10 MTP tensors not consumed" in lines[0]
    found = json.loads((example / "outputs/consumption_probe.json").read_text())
    consumed = {t["name"].rsplit(".", 2)[-2]: t["consumed"] for t in found["tensors"]}
    assert consumed["eh_proj"] is True and consumed["wq_b"] is False
    after = inventory()["no_structural_difference"]
    assert after["met"] is True, after  # type: ignore[index]
    assert "5 expected_absent, not consumed" in after["detail"]  # type: ignore[index]


@pytest.mark.slow
def test_probe_of_only_some_tensors_leaves_the_rest_structural(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_gates(
        capsys,
        "-C",
        str(example),
        "probe",
        "consumed",
        "model/probe_mtp.py:build",
        "--tensor",
        "model.layers.1.self_attn.indexer.wk.weight",
        "--format",
        "json",
    )
    assert result.code == 0, result.err
    audit = json.loads(run_gates(capsys, "-C", str(example), "audit", "--format", "json").out)
    contract = next(c for c in audit["contracts"] if c["id"].endswith("tensor-inventory"))
    detail = next(c for c in contract["criteria"] if c["name"] == "no_structural_difference")
    assert detail["met"] is False
    assert "wq_b.weight missing on the candidate" in detail["detail"]
    assert "1 expected_absent, not consumed" in detail["detail"]


def test_probe_bad_entries_are_one_line_errors(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for entry, message in (
        ("model/probe_mtp.py", "give the entry point as path/to/file.py:function"),
        ("model/none.py:build", "model/none.py: no such file"),
        ("model/probe_mtp.py:nothing", "no function 'nothing' in it"),
    ):
        result = run_gates(capsys, "-C", str(example), "probe", "consumed", entry)
        assert result.code == 2 and message in result.err, result.err
        assert result.err.count("\n") == 1
    result = run_gates(
        capsys,
        "-C",
        str(example),
        "probe",
        "consumed",
        "model/probe_mtp.py:build",
        "--tensor",
        "model.nothing",
    )
    assert result.code == 2 and "no tensor named 'model.nothing'" in result.err


def test_a_forward_that_is_not_repeatable_says_nothing(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        example,
        "model/noisy.py",
        (
            "import numpy as np\n"
            "state = {'n': 0.0}\n"
            "def build():\n"
            "    w = np.ones(3, np.float32)\n"
            "    def forward():\n"
            "        state['n'] += 1.0\n"
            "        return w * state['n']\n"
            "    return forward, {'w': w}\n"
        ),
    )
    commit_all(git.Repo(example), "a noisy entry")  # the probe runs the committed entry
    result = run_gates(
        capsys, "-C", str(example), "probe", "consumed", "model/noisy.py:build", "--format", "json"
    )
    assert result.code == 1
    found = json.loads(result.out)
    assert found["repeatable"] is False and found["tensors"] == []
