"""`gates check tensors` and `gates check determinism` on dump folders: compare, write the
output, receipt it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gates.checkers.outputs import receipt_binding, write_checker_output
from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.json_writer import indented_json
from gates.core.paths import resolve_inside, to_workspace_relpath
from gates.engine.audit import judge_workspace
from gates.engine.inputs import AuditInputs
from gates.naming.rulefile import ALIGNMENT_CHECK
from gates.naming.rules import RuleSet
from gates.policy.rulesets import rules_for
from gates.receipts.judge_all import Wanted
from gates.receipts.model import ArtifactKind, Receipt
from gates.receipts.verify import Judgement
from gates.tensors.compare import Comparison, Selection, compare_dumps
from gates.tensors.layout import ORDER_FILE, TENSORS_FOLDER, open_dump, tensors_root
from gates.workspace.repository import Workspace

TENSOR_CHECK_FORMAT = "gates.tensor_check/v1"


def dump_binding(relpath: str, judgements: tuple[Judgement, ...]) -> Judgement | None:
    """The accepted receipt binding a dump: one that names an order.json under it."""
    prefix = relpath.rstrip("/") + "/"
    for judgement in judgements:
        receipt = judgement.receipt
        if receipt is None or receipt.kind is not ArtifactKind.TENSOR_DUMP:
            continue
        if any(s.path.startswith(prefix) and s.path.endswith(ORDER_FILE) for s in receipt.subjects):
            return receipt_binding(receipt.subjects[0].path, judgements)
    return None


def is_dump(path: Path) -> bool:
    """A `tensors/` folder, or a run folder with a dump and no losses (a run folder with
    losses is compared at loss granularity, as before; give its tensors/ for the dump)."""
    if path.name == TENSORS_FOLDER:
        return tensors_root(path) is not None
    has_losses = any((path / name).is_file() for name in ("loss.json", "raw_loss.jsonl"))
    return not has_losses and tensors_root(path) is not None


def _ruleset(audit: AuditInputs, rules: str | None, cwd: Path) -> tuple[RuleSet, str | None]:
    """The tensor-alignment contract's rules (D5: not the inventory's, unless it declares
    none), or the contract file given with --rules, found as every command finds it."""
    found = rules_for(audit.policy, ALIGNMENT_CHECK, rules, cwd, audit.workspace.root)
    return found.ruleset, found.source


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.9g}")


def comparison_document(comparison: Comparison) -> dict[str, object]:
    """The figures every tensor comparison reports (check tensors, determinism, contract)."""
    unequal = [
        {
            "step": r.step,
            "phase": r.phase,
            "reference": list(r.reference),
            "candidate": r.candidate,
            "index": r.index,
            "max_ulp": r.max_ulp,
            "max_abs_diff": _round(r.max_abs_diff),
            "nonfinite_pairs": r.nonfinite_pairs,
            "reason": r.reason,
        }
        for r in comparison.unequal[:50]
    ]
    tallies = [t.figures() for t in comparison.tallies]
    for tally in tallies:
        tally["max_abs_diff"] = _round(tally["max_abs_diff"])  # type: ignore[arg-type]
    return {
        "aligned": comparison.aligned,
        "steps": comparison.steps,
        "totals": comparison.totals(),
        "first_divergence": comparison.first_divergence(),
        "by_step": tallies,
        "unequal": unequal,
        "missing": comparison.missing,
        "problems": comparison.problems,
        "notes": comparison.notes,
        "unmatched_rules": comparison.unmatched_rules,
        "candidate_only": comparison.candidate_only,
        "not_comparable": comparison.not_comparable,
    }


def render_text(document: dict[str, object], receipt: Receipt, artifact: str) -> str:
    lines = []
    for tally in document["by_step"]:  # type: ignore[attr-defined]
        lines.append(
            f"step {tally['step']:>6} {tally['phase']:<10} compared={tally['compared']} "
            f"equal={tally['equal']} unequal={tally['unequal']} missing={tally['missing']}"
            + (f" max_ulp={tally['max_ulp']}" if tally["max_ulp"] is not None else "")
            + (
                f" max_abs_diff={tally['max_abs_diff']}"
                if tally["max_abs_diff"] is not None
                else ""
            )
            + (f" nonfinite={tally['nonfinite']}" if tally["nonfinite"] else "")
        )
    first = document["first_divergence"]
    if isinstance(first, dict):
        lines.append(
            f"first_divergence: step {first['step']} {first['phase']}: {first['reference']} -> "
            f"{first['candidate']} at element {first['index']}"
        )
    else:
        lines.append("first_divergence: none")
    for key, shown in (
        ("problems", "problem"),
        ("missing", "missing"),
        ("unmatched_rules", "unmatched_rule"),
        ("candidate_only", "candidate only"),
        ("not_comparable", "not comparable"),
    ):
        lines += [f"{shown}: {item}" for item in document.get(key, [])]  # type: ignore[attr-defined]
    totals = document["totals"]
    lines.append(f"totals: {json.dumps(totals)} aligned={json.dumps(document['aligned'])}")
    lines.append(
        f"wrote {artifact} ({receipt.evidence_class.value}/{receipt.formal_weight} {receipt.id})"
    )
    lines += [f"  probe because: {reason}" for reason in receipt.stamp_reasons]
    return "\n".join(lines)


@dataclass(frozen=True)
class TensorsChecked:
    """What `gates check tensors` (or `check determinism` on dumps) found and wrote: the
    output document, its receipt and path, and whether the check passed."""

    document: dict[str, object]
    receipt: Receipt
    artifact: str
    passed: bool


def render_json(checked: TensorsChecked) -> str:
    shown = {**checked.document, "output": checked.artifact, "receipt": checked.receipt.id}
    return indented_json(shown)


#: --format -> the renderer of a pair's TensorsChecked
RENDERERS: dict[str, Callable[[TensorsChecked], str]] = {
    "text": lambda c: render_text(c.document, c.receipt, c.artifact),
    "json": render_json,
}


def render_determinism_text(checked: TensorsChecked) -> str:
    document, receipt = checked.document, checked.receipt
    runs: list[dict[str, object]] = document["runs"]  # type: ignore[assignment]
    pairs: list[dict[str, object]] = document["pairs"]  # type: ignore[assignment]
    lines = [f"runs={len(runs)}", f"deterministic={json.dumps(document['deterministic'])}"]
    for pair in pairs:
        lines.append(f"{runs[0]['path']} against {pair['against']}: {json.dumps(pair['totals'])}")
        lines += [f"  problem: {p}" for p in pair["problems"]]  # type: ignore[attr-defined]
    lines.append(f"first_divergence={json.dumps(document['first_divergence'])}")
    lines.append(
        f"wrote {checked.artifact} ({receipt.evidence_class.value}/{receipt.formal_weight} "
        f"{receipt.id})"
    )
    return "\n".join(lines)


#: --format -> the renderer of the repeats' TensorsChecked (the names of check.RENDERERS)
DETERMINISM_RENDERERS: dict[str, Callable[[TensorsChecked], str]] = {
    "text": render_determinism_text,
    "json": render_json,
}


def _open(workspace: Workspace, given: str, cwd: Path) -> tuple[str, Path]:
    relpath = to_workspace_relpath(workspace.root, given, cwd)
    return relpath, resolve_inside(workspace.root, relpath, what="dump folder")


def check_tensors(
    audit: AuditInputs,
    reference: str,
    candidate: str,
    *,
    rules: str | None,
    selection: Selection,
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Exit 0 when every compared tensor is bit-identical and nothing is missing, else 1."""
    checked = tensors_check(
        audit, reference, candidate, rules=rules, selection=selection, output=output, cwd=cwd
    )
    out.render(RENDERERS, checked)
    return exitcodes.OK if checked.passed else exitcodes.BLOCKED


def tensors_check(
    audit: AuditInputs,
    reference: str,
    candidate: str,
    *,
    rules: str | None,
    selection: Selection,
    output: str,
    cwd: Path,
) -> TensorsChecked:
    """Two dumps compared through the naming rules, the output and its receipt written."""
    workspace = audit.workspace
    ref_rel, ref_path = _open(workspace, reference, cwd)
    cand_rel, cand_path = _open(workspace, candidate, cwd)
    ruleset, rules_source = _ruleset(audit, rules, cwd)
    comparison = compare_dumps(
        open_dump(ref_path, ref_rel),
        open_dump(cand_path, cand_rel),
        ruleset,
        selection,
        progress=audit.invocation.progress,
    )
    judged = judge_workspace(audit, wanted=Wanted(folders=(ref_rel, cand_rel)))
    receipts = judged.receipts
    inputs = [
        (ref_rel, dump_binding(ref_rel, receipts)),
        (cand_rel, dump_binding(cand_rel, receipts)),
    ]
    document: dict[str, object] = {
        "format": TENSOR_CHECK_FORMAT,
        "mode": "pair",
        "reference": {"path": ref_rel, "receipt": _receipt_id(inputs[0][1])},
        "candidate": {"path": cand_rel, "receipt": _receipt_id(inputs[1][1])},
        "rules": rules_source,
        "selection": {"steps": selection.steps.text(), "phases": list(selection.phases)},
        **comparison_document(comparison),
    }
    receipt, artifact = write_checker_output(
        audit, output, ArtifactKind.TENSOR_CHECK, document, inputs, judged_under=judged.freeze
    )
    return TensorsChecked(document, receipt, artifact, comparison.aligned)


def _receipt_id(judgement: Judgement | None) -> str | None:
    return judgement.receipt.id if judgement and judgement.receipt else None


def check_dump_determinism(
    audit: AuditInputs,
    runs: tuple[str, ...],
    *,
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Repeats of one side: exit 0 when every dumped tensor of every repeat is identical to
    the first's, else 1."""
    checked = dump_determinism_check(audit, runs, output=output, cwd=cwd)
    out.render(DETERMINISM_RENDERERS, checked)
    return exitcodes.OK if checked.passed else exitcodes.BLOCKED


def dump_determinism_check(
    audit: AuditInputs, runs: tuple[str, ...], *, output: str, cwd: Path
) -> TensorsChecked:
    """Every repeat's dump compared with the first's, the output and its receipt written."""
    workspace = audit.workspace
    opened = [_open(workspace, run, cwd) for run in runs]
    dumps = [open_dump(path, rel) for rel, path in opened]
    judged = judge_workspace(audit, wanted=Wanted(folders=tuple(rel for rel, _ in opened)))
    receipts = judged.receipts
    inputs = [(rel, dump_binding(rel, receipts)) for rel, _ in opened]
    pairs = []
    first_divergence = None
    deterministic = True
    for (rel, _), dump in zip(opened[1:], dumps[1:], strict=True):
        comparison = compare_dumps(
            dumps[0], dump, RuleSet(), Selection(), slots={}, progress=audit.invocation.progress
        )
        found = comparison.first_divergence()
        if found is not None and first_divergence is None:
            first_divergence = {**found, "run": rel}
        deterministic = deterministic and comparison.aligned
        pairs.append({"against": rel, **comparison_document(comparison)})
    document: dict[str, object] = {
        "format": TENSOR_CHECK_FORMAT,
        "mode": "determinism",
        "runs": [{"path": rel, "receipt": _receipt_id(j)} for rel, j in inputs],
        "deterministic": deterministic,
        "first_divergence": first_divergence,
        "pairs": pairs,
    }
    receipt, artifact = write_checker_output(
        audit, output, ArtifactKind.TENSOR_CHECK, document, inputs, judged_under=judged.freeze
    )
    return TensorsChecked(document, receipt, artifact, deterministic)
