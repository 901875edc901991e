"""The tensor-level step of `gates demo`, kept apart so the demo can call it after its
re-run: the dumps both runs left compared through the naming rules (the first divergence
located to a named tensor), and the Paddle repeats compared at every dumped tensor.
`gates/commands/demo/__init__.py` calls both at the end of `_rerun`, before its audit."""

from __future__ import annotations

import json

from gates.commands.probe import consumed
from gates.commands.tensors import check_dump_determinism, check_tensors
from gates.core.echo import Echo, Output
from gates.engine.inputs import AuditInputs, reopened
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, EvidenceClass, Framework
from gates.tensors.compare import Selection
from gates.tensors.layout import TENSORS_FOLDER, StepRange, dump_files
from gates.trust.keys import configured_key
from gates.workspace.repository import Workspace

REPEATS = "experiments/e053-moe-determinism/runs/paddle_det"
STEPS = "1:3"


def _receipted(workspace: Workspace, side: str) -> bool:
    return (workspace.root / f"results/{side}/{TENSORS_FOLDER}.receipt.json").is_file()


def receipt_recorded_dump(inputs: AuditInputs, side: str, profile: dict[str, str]) -> str:
    """A side that could not run here: its recorded dump receipted as it is."""
    workspace = inputs.workspace
    folder = workspace.root / "results" / side
    subjects = tuple(p.relative_to(workspace.root).as_posix() for p in dump_files(folder))
    request = ReceiptRequest(
        kind=ArtifactKind.TENSOR_DUMP,
        subjects=subjects,
        framework=Framework(side),
        profile=profile,
        requested_class=EvidenceClass.FORMAL,
        output=f"results/{side}/{TENSORS_FOLDER}.receipt.json",
        overwrite=True,
    )
    receipt, _ = create_receipt(
        workspace,
        request,
        signing_key=configured_key(inputs.invocation.signing_key),
        freeze_inputs=inputs.freeze_inputs,
    )
    return f"{receipt.evidence_class.value}/{receipt.formal_weight}"


def _document(workspace: Workspace, relpath: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((workspace.root / relpath).read_text())
    return loaded


def tensor_step(inputs: AuditInputs, echo: Echo, profile: dict[str, str]) -> None:
    """Receipt any dump not yet receipted, compare both sides and the repeats, say what
    was found."""
    workspace = inputs.workspace
    for side in ("torch", "paddle"):
        if not _receipted(workspace, side) and dump_files(workspace.root / "results" / side):
            stamp = receipt_recorded_dump(inputs, side, profile)
            echo(f"  results/{side}/tensors (recorded dump): tensor_dump {stamp}")
    quiet: list[str] = []
    output = "outputs/tensor_check.receipt.json"
    check_tensors(
        reopened(inputs),
        "results/torch",
        "results/paddle",
        rules=None,
        selection=Selection(StepRange.parse(STEPS)),
        output=output,
        cwd=workspace.root,
        out=Output("json", quiet.append),
    )
    found = _document(workspace, "outputs/tensor_check.json")
    totals = found["totals"]
    first = found["first_divergence"]
    echo(f"  gates check tensors results/torch results/paddle --steps {STEPS}: {totals}")
    if isinstance(first, dict):
        echo(
            f"    first divergence: step {first['step']} {first['phase']} "
            f"{first['reference']} -> {first['candidate']}, element {first['index']}"
        )
    runs = tuple(f"{REPEATS}/repeat-{i}/{TENSORS_FOLDER}" for i in (1, 2, 3))
    if all((workspace.root / run).is_dir() for run in runs):
        check_dump_determinism(
            reopened(inputs),
            runs,
            output="outputs/tensor_determinism_check.receipt.json",
            cwd=workspace.root,
            out=Output("json", quiet.append),
        )
        repeats = _document(workspace, "outputs/tensor_determinism_check.json")
        echo(
            f"  gates check determinism {REPEATS}/repeat-{{1,2,3}}/tensors: "
            f"deterministic={json.dumps(repeats['deterministic'])}"
        )


PROBE_ENTRY = "model/probe_mtp.py:build"


def probe_step(inputs: AuditInputs, echo: Echo) -> None:
    """Does the official MTP forward consume the indexer tensors the candidate leaves out?"""
    workspace = inputs.workspace
    quiet: list[str] = []
    consumed(
        reopened(inputs),
        PROBE_ENTRY,
        (),
        output="outputs/consumption_probe.receipt.json",
        cwd=workspace.root,
        out=Output("json", quiet.append),
    )
    found = _document(workspace, "outputs/consumption_probe.json")
    tensors = found["tensors"] if isinstance(found["tensors"], list) else []
    unused = [str(t["name"]) for t in tensors if not t["consumed"]]
    short = ", ".join(".".join(name.split(".")[-3:-1]) for name in unused)
    echo(
        f"  gates probe consumed {PROBE_ENTRY}: {len(unused)} of {len(tensors)} MTP tensors "
        f"not consumed ({short})"
    )
