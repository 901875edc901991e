"""The glm5-real example: transformers' GlmMoeDsaForCausalLM against PaddleFormers, real runs.

The demo's real port act end to end (the candidate trained under `gates run` in the sandbox,
its window replayed, the checkers, the probe, the config check on the real GlmMoeDsaConfig
and the audit), the recorded reference run signed at the example's code commit, the
recorder watching every module of both real models, and the real conversion refused by
the read-only view until its weights are a writable copy."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gates.commands.demo import PR_BRANCH, _git, _trust_demo_key, lay_out
from gates.core.invocation import Invocation
from gates.engine.audit import run_audit
from gates.engine.inputs import load_inputs
from gates.workspace.repository import open_workspace
from tests.helpers import CPU_PROFILE, REPO_ROOT, commit_all, profile_args, run_gates

EXAMPLE = REPO_ROOT / "examples" / "glm5-real"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("paddleformers") is None,
        reason="paddleformers is not installed (`make` installs it and the real extra)",
    ),
]


@pytest.mark.heavy
def test_the_real_port_act_states_what_the_audit_finds(tmp_path: Path) -> None:
    from gates.commands.demo.real_act import real_port_step  # noqa: PLC0415

    lines: list[str] = []
    invocation = _trust_demo_key(tmp_path, Invocation())
    real_port_step(
        tmp_path, invocation, lay_out=lay_out, git=_git, branch=PR_BRANCH, echo=lines.append
    )
    said = "\n".join(lines)
    assert "gates run --framework paddle -- python model/train_paddle.py: exit 0" in said
    assert "gates replay results/paddle --seed demo-real-4711: exit 0; step 1" in said
    assert "gates replay results/torch --seed demo-real-4711: exit 0" in said, said
    assert "gates check loss --bit-exact: 0 of 20 steps bit-identical" in said
    assert "float32 ULP apart" in said
    assert "first differing values: step 1 activation model.layers.0.input_layernorm: " in said, (
        said
    )
    assert "the reference forward consumes 10 of its 10 DSA indexer tensors" in said
    assert "(index_topk=32, sequence_length=48)" in said
    assert "indexer_rope_interleave -> rotary_interleaved: no attribute" in said
    assert "(implied) -> use_qk_norm: holds false, official true" in said
    assert "read nowhere in paddleformers/, paddlefleet/ (not installed: not scanned)" in said
    assert "verdict=blocked, formal_alignment_steps = 0 / 20" in said
    # the inventory: every tensor explained by a rule but the DSA indexer's, which the
    # reference consumes at a sequence longer than index_topk
    inventory = next(
        line for line in lines if "UNMET no_structural_difference" in line and "indexer" in line
    )
    assert "self_attn.indexer." in inventory and "missing on the candidate side" in inventory
    assert "(11 differences: 0 naming, 0 layout, 1 dtype, 10 structural)" in inventory
    assert "the reference forward consumes it (formal probe" in inventory


def test_the_recorded_reference_run_is_signed_at_the_example_s_code(tmp_path: Path) -> None:
    root = tmp_path / "glm5-port"
    lay_out(root, example=EXAMPLE)
    invocation = _trust_demo_key(tmp_path, Invocation())
    run_gates_pin = run_audit(load_inputs(open_workspace(root), invocation))
    judged = {j.path: j for j in run_gates_pin.receipts}
    run = judged["results/torch/run.receipt.json"]
    assert run.reason is not None
    assert "another source tree" not in run.reason, (
        "rerun examples/glm5-real/sign_recorded.py after changing the example's source"
    )
    assert "made at commit" not in run.reason, run.reason


def _train(script: str, out: Path, *, end: int = 1) -> dict[str, object]:
    """One step of an entrypoint outside gates (its recorders write into ``out``); the
    order of the step it dumped."""
    env = {
        **os.environ,
        "GATES_RUN_DIR": str(out),
        "GATES_RUN_ID": "test",
        "PYTHONPATH": str(REPO_ROOT),
    }
    copy = out.parent / "model"
    if not copy.exists():
        shutil.copytree(EXAMPLE / "model", copy, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, str(copy / script), "--end", str(end)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    order: dict[str, object] = json.loads((out / "tensors/step-000001/order.json").read_text())
    return order


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("script", "modules"),
    [
        ("train_torch.py", ("model.layers.0.self_attn.indexer", "model.layers.1.mlp.experts")),
        ("train_paddle.py", ("model.layers.1.mlp.experts.3.down_proj", "model.layers.1.mlp.gate")),
    ],
)
def test_a_recorder_watching_every_module_of_a_real_model(
    tmp_path: Path, script: str, modules: tuple[str, ...]
) -> None:
    order = _train(script, tmp_path / "run")
    activations = [name for phase, name in order["order"] if phase == "activation"]  # type: ignore[union-attr]
    for module in ("model.embed_tokens", "model.layers.0.input_layernorm", "lm_head", *modules):
        assert module in activations, activations
    # ModelOutputs of both libraries (the decoder's, the causal LM's) are recorded by their
    # first tensor; nothing a real forward returns stops the run
    assert "model" in activations
    assert "not_dumped" not in order, order.get("not_dumped")


@pytest.mark.heavy
def test_the_real_conversion_needs_its_weights_as_a_writable_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "glm5-port"
    lay_out(root, example=EXAMPLE)
    config = root / "gates.toml"
    config.write_text(config.read_text().replace('writable_copies = ["model/official"]', ""))
    commit_all(__import__("git").Repo(root), "no writable copy")
    demo = _trust_demo_key(tmp_path, Invocation())
    assert demo.signing_key is not None and demo.trust is not None and demo.policy_ref
    monkeypatch.setenv("GATES_SIGNING_KEY", str(demo.signing_key))
    monkeypatch.setenv("GATES_TRUST", str(demo.trust.value))
    monkeypatch.setenv("GATES_POLICY_REF", demo.policy_ref.value)
    result = run_gates(
        capsys,
        "-C",
        str(root),
        "run",
        "--framework",
        "paddle",
        "--probe",
        "--clean",
        *profile_args(CPU_PROFILE),
        "--",
        sys.executable,
        "model/train_paddle.py",
        "--end",
        "1",
    )
    assert result.code == 1
    assert "Read-only file system" in result.err
    assert "flex-ckpt.auto_generated.metadata" in result.err or ".lock" in result.err
