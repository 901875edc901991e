"""The real port act of `gates demo`: transformers' GlmMoeDsaForCausalLM (the reference, a run
recorded and signed where torch and transformers were installed) against PaddleFormers
(the candidate, run here under `gates run` in the sandbox), on the glm5-real example.

Every sentence it prints is read from what the commands wrote: the run's receipts, the
replayed windows, the loss check, the tensor check, the consumption probe, the checkpoint
check, the config check on the real GlmMoeDsaConfig and the audit. It states what they
find, flattering or not.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gates.commands.check import check_loss
from gates.commands.checkpoint import check as check_checkpoint
from gates.commands.config_check import check_config
from gates.commands.demo.profiles import PROFILE
from gates.commands.freeze import pin as pin_command
from gates.commands.probe import consumed
from gates.commands.replay import ReplayRequest
from gates.commands.replay import replay as replay_command
from gates.commands.run import RunRequest
from gates.commands.run import run as run_command
from gates.commands.tensors import check_tensors
from gates.core.echo import Echo, Output
from gates.core.errors import GatesError
from gates.core.invocation import Invocation
from gates.core.resources import real_example_dir
from gates.engine.audit import run_audit
from gates.engine.inputs import load_inputs
from gates.receipts.model import ArtifactKind, Framework
from gates.reporters.report_data import ulp_differences
from gates.tensors.compare import Selection
from gates.tensors.layout import StepRange
from gates.workspace.repository import Workspace, open_workspace

REQUIRED_STEPS = 20
DUMPED = "1:2"
PROBE_ENTRY = "model/probe_indexer.py:build"
CONFIG_CLASS = "paddleformers.transformers.glm_moe_dsa.configuration:GlmMoeDsaConfig"
SEED = "demo-real-4711"
ALIGNMENT = "contracts/tensor-alignment.toml"


def _document(root: Path, relpath: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((root / relpath).read_text(encoding="utf-8"))
    return loaded


def _quiet() -> Output:
    return Output("json", lambda _: None)


def _can_run(*modules: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in modules)


#: How the demo lays an example out as a git repository (`gates.commands.demo.lay_out`).
LayOut = Callable[..., None]
#: How the demo runs git in a repository it laid out (its fixed identity and dates).
Git = Callable[..., None]


def _lay_out(
    folder: Path, invocation: Invocation, lay_out: LayOut, git: Git, branch: str
) -> Workspace:
    root = folder / "glm5-port"
    lay_out(root, example=real_example_dir())
    git(root, "checkout", "-q", "-b", branch)
    pin_command(open_workspace(root, invocation.environment), "HEAD", echo=lambda _: None)
    return open_workspace(root, invocation.environment)


def _run_candidate(workspace: Workspace, invocation: Invocation, echo: Echo) -> int:
    request = RunRequest(
        command=[sys.executable, "model/train_paddle.py"],
        framework=Framework.PADDLE,
        probe=False,
        out=None,
        outputs=[(ArtifactKind.CHECKPOINT, "results/paddle/checkpoint")],
        profile=PROFILE,
        clean=True,
    )
    lines: list[str] = []
    code = run_command(
        load_inputs(workspace, invocation), request, cwd=workspace.root, echo=lines.append
    )
    counted = [line for line in lines if ": counts" in line]
    counting = sum(1 for line in counted if ": counts (" in line)
    echo(
        f"  gates run --framework paddle -- python model/train_paddle.py: exit {code}, "
        f"{counting} of {len(counted)} receipts count"
    )
    if code != 0:
        echo("".join(f"    {line}\n" for line in lines[-5:]).rstrip())
    return code


def _replay(workspace: Workspace, invocation: Invocation, side: str, echo: Echo) -> None:
    lines: list[str] = []
    request = ReplayRequest(f"results/{side}", seed=SEED, windows=1, window_steps=1)
    try:
        code = replay_command(
            load_inputs(workspace, invocation),
            request,
            cwd=workspace.root,
            out=Output("json", lines.append),
        )
    except GatesError as exc:
        echo(f"  gates replay results/{side}: {exc.one_line()}")
        return
    report = json.loads(lines[-1])
    windows = ", ".join(
        f"step {w['first']} (from the state after {w['resumed_from']}): {w['result']}"
        for w in report["windows"]
    )
    echo(f"  gates replay results/{side} --seed {SEED}: exit {code}; {windows}")


def _losses(workspace: Workspace, invocation: Invocation, echo: Echo) -> None:
    root = workspace.root
    output = "outputs/loss_check.receipt.json"
    check_loss(
        load_inputs(workspace, invocation),
        "results/torch/loss.json",
        "results/paddle/loss.json",
        required_steps=REQUIRED_STEPS,
        bit_exact=True,
        output=output,
        cwd=root,
        out=_quiet(),
    )
    found = _document(root, "outputs/loss_check.json")
    reference = tuple(_document(root, "results/torch/loss.json")["losses"])
    candidate = tuple(_document(root, "results/paddle/loss.json")["losses"])
    first_ulp = ulp_differences(reference, candidate, str(found["ulp_dtype"]))[0]
    echo(
        f"  gates check loss --bit-exact: {found['consistent_steps']} of "
        f"{found['required_steps']} steps bit-identical, first divergence at step "
        f"{found['first_divergence_step']}; step 1: {reference[0]!r} (transformers) against "
        f"{candidate[0]!r} (PaddleFormers), {first_ulp:.0f} {found['ulp_dtype']} ULP apart; "
        f"max |diff| over {len(reference)} steps {found['max_diff']:.4g}"
    )


def _tensors(workspace: Workspace, invocation: Invocation, echo: Echo) -> None:
    root = workspace.root
    check_tensors(
        load_inputs(workspace, invocation),
        "results/torch",
        "results/paddle",
        rules=ALIGNMENT,
        selection=Selection(StepRange.parse(DUMPED)),
        output="outputs/tensor_check.receipt.json",
        cwd=root,
        out=_quiet(),
    )
    found = _document(root, "outputs/tensor_check.json")
    totals = ", ".join(f"{n} {what}" for what, n in found["totals"].items())
    echo(f"  gates check tensors --steps {DUMPED} --rules {ALIGNMENT}: {totals}")
    first = found["first_divergence"]
    rows = {(u["step"], u["phase"], u["candidate"]): u for u in found["unequal"]}
    if isinstance(first, dict):
        row = rows.get((first["step"], first["phase"], first["candidate"]), {})
        echo(
            f"    first divergence: step {first['step']} {first['phase']} {first['candidate']}: "
            f"{row.get('reason', 'differs')}"
        )
    valued = _first_values(root, rows)
    if valued is not None:
        echo(
            f"    first differing values: step {valued['step']} {valued['phase']} "
            f"{valued['candidate']}: {valued['reason']}, at most {valued['max_ulp']} ULP"
        )
    missing = found.get("missing") or []
    if missing:
        echo(f"    {len(missing)} not paired by a rule yet, e.g. {missing[0]}")


def _first_values(root: Path, rows: dict[tuple[int, str, str], Any]) -> Any:
    """The first tensor, in the candidate's execution order, whose values differ (its
    comparison names an element)."""
    for step in sorted({key[0] for key in rows}):
        order = _document(root, f"results/paddle/tensors/step-{step:06d}/order.json")["order"]
        for phase, name in order:
            row = rows.get((step, phase, name))
            if row is not None and row.get("index") is not None:
                return row
    return None


def _probe(workspace: Workspace, invocation: Invocation, echo: Echo) -> None:
    root = workspace.root
    consumed(
        load_inputs(workspace, invocation),
        PROBE_ENTRY,
        (),
        output="outputs/consumption_probe.receipt.json",
        cwd=root,
        out=_quiet(),
    )
    found = _document(root, "outputs/consumption_probe.json")
    tensors = found["tensors"]
    used = sum(1 for t in tensors if t["consumed"])
    ran = ", ".join(f"{k}={v}" for k, v in found["configuration"].items())
    echo(
        f"  gates probe consumed {PROBE_ENTRY} ({ran}): the reference forward consumes "
        f"{used} of its {len(tensors)} DSA indexer tensors"
    )


def _checkpoints(workspace: Workspace, invocation: Invocation, echo: Echo) -> None:
    root = workspace.root
    check_checkpoint(
        load_inputs(workspace, invocation),
        "results/paddle/checkpoint",
        against="results/torch/checkpoint",
        rules=None,
        shard_range=None,
        threads=None,
        output="outputs/checkpoint_check.receipt.json",
        cwd=root,
        out=_quiet(),
    )
    against = _document(root, "outputs/checkpoint_check.json")["against"]
    echo(
        f"  gates check checkpoint --against results/torch/checkpoint: "
        f"hash_match={json.dumps(against['hash_match'])}, "
        f"{against['structural_differences']} structural differences, "
        f"{len(against['unequal_tensors'])} tensors unequal through the rules"
    )


def _config(workspace: Workspace, invocation: Invocation, echo: Echo) -> None:
    lines: list[str] = []
    code = check_config(
        load_inputs(workspace, invocation),
        "model/config.json",
        class_path=CONFIG_CLASS,
        table=None,
        path=None,
        env=(),
        output="outputs/config_check.receipt.json",
        cwd=workspace.root,
        out=Output("json", lines.append),
    )
    report = json.loads("\n".join(lines))
    echo(f"  gates check config model/config.json --class {CONFIG_CLASS}: exit {code}")
    for criterion in report["criteria"]:
        if not criterion["met"]:
            echo(f"    UNMET {criterion['name']}: {criterion['detail']}")


def _audit(workspace: Workspace, invocation: Invocation, echo: Echo) -> None:
    result = run_audit(load_inputs(workspace, invocation))
    echo(
        f"  gates audit: verdict={result.verdict}, formal_alignment_steps = "
        f"{result.formal_alignment_steps} / {result.required_steps}"
    )
    for contract in result.contracts:
        echo(f"    {contract.spec.id}: {contract.status.value}")
        for criterion in contract.criteria:
            if not criterion.met:
                echo(f"      UNMET {criterion.name}: {_shortened(criterion.detail)}")


def _shortened(detail: str, limit: int = 420) -> str:
    """A long criterion detail as its head and its tail (where the counts are)."""
    if len(detail) <= limit:
        return detail
    return f"{detail[: limit - 160]} ... {detail[-150:]}"


def real_port_step(
    folder: Path, invocation: Invocation, *, lay_out: LayOut, git: Git, branch: str, echo: Echo
) -> None:
    """The real port, laid out in ``folder`` by the demo's ``lay_out`` and ``git`` on the PR
    ``branch``, under the demo's ``invocation`` (its key trusted)."""
    echo("\n== (e) the real port: transformers' GlmMoeDsaForCausalLM against PaddleFormers")
    if not _can_run("paddle", "paddleformers"):
        echo("  paddleformers is not installed here (`make` installs the `real` extra): skipped")
        return
    workspace = _lay_out(folder, invocation, lay_out, git, branch)
    echo(
        "  candidate: PaddleFormers' DeepseekV3ForCausalLM with the GLM config mapped (its"
        " GlmMoeDsaForCausalLM imports paddlefleet, which the package index does not have)"
    )
    if _run_candidate(workspace, invocation, echo) != 0:
        return
    _replay(workspace, invocation, "paddle", echo)
    if _can_run("torch", "transformers"):
        _replay(workspace, invocation, "torch", echo)
    _losses(workspace, invocation, echo)
    _tensors(workspace, invocation, echo)
    _probe(workspace, invocation, echo)
    _checkpoints(workspace, invocation, echo)
    _config(workspace, invocation, echo)
    _audit(workspace, invocation, echo)
    shutil.rmtree(workspace.root / ".gates", ignore_errors=True)
