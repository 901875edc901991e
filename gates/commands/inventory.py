"""`gates inventory diff`: the structure-parity survey of two checkpoints (headers only)."""

from __future__ import annotations

import contextlib
import gc
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gates.checkers.outputs import write_checker_output
from gates.checkpoints.check import check_checkpoint
from gates.checkpoints.survey import Survey, as_json, survey
from gates.commands.checkpoint import inventory_declarations, inventory_rules
from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.hashing import StatCache
from gates.core.json_writer import indented_json
from gates.engine.inputs import AuditInputs
from gates.naming.families import by_family, ranked
from gates.receipts.model import ArtifactKind, Receipt
from gates.workspace.external import locate
from gates.workspace.repository import roots_of

PARITY_FORMAT = "gates.structure_parity/v1"


def _side(path: str, count: int, problems: list[str]) -> dict[str, object]:
    return {"path": path, "tensor_count": count, "valid": not problems, "problems": problems}


def survey_document(
    reference: str,
    candidate: str,
    found: Survey,
    problems: tuple[list[str], list[str]],
    rules: str | None,
) -> dict[str, object]:
    return {
        "format": PARITY_FORMAT,
        "reference": _side(reference, found.reference_count, problems[0]),
        "candidate": _side(candidate, found.candidate_count, problems[1]),
        "rules": rules,
        "matched": found.matched_count,
        "counts": found.counts(),
        "differences": as_json(found.differences),
        "rule_problems": list(found.rule_problems),
        "notes": list(found.notes),
    }


FIRST = 3


def _families(count: int) -> str:
    return f"{count} famil{'y' if count == 1 else 'ies'}"


def _more(shown: int, total: int) -> list[str]:
    return [f"  ... and {total - shown} more (the full list is in the JSON output)"] * (
        total > shown
    )


def _explained_by(klass: str, rules: tuple[str, ...]) -> str:
    """The group an explained difference is shown under."""
    return f"{klass:<7} {', '.join(rules)}"


def _explained(found: Survey) -> dict[str, Counter[str]]:
    """How many explained differences are in each family, under their class and rules
    (sorted), from the survey's tally (a few dozen entries for 60,000 differences)."""
    by_group: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for (klass, applied, kin), count in found.explained.items():
        by_group[_explained_by(klass, applied)][kin] += count
    return dict(sorted(by_group.items()))


def render_text(document: dict[str, object], found: Survey) -> str:
    """Counts, then each group (structural by family; explained by rule, then by family),
    the first few of each; readable for 60,000 tensors. The JSON output lists everything."""
    counts = found.counts()
    lines = [
        f"reference {document['reference']['path']}: {found.reference_count} tensors",  # type: ignore[index]
        f"candidate {document['candidate']['path']}: {found.candidate_count} tensors",  # type: ignore[index]
        f"matched {found.matched_count}; differences {len(found.differences)}: "
        + ", ".join(f"{klass} {n}" for klass, n in counts.items()),
    ]
    for side in ("reference", "candidate"):
        problems = document[side]["problems"]  # type: ignore[index]
        lines += [f"invalid {side}: {p}" for p in problems[:5]]
        lines += _more(5, len(problems))
    lines += [f"rule problem: {p}" for p in found.rule_problems[:5]]
    lines += _more(5, len(found.rule_problems))
    lines += [f"note: {n}" for n in found.notes]
    structural = found.structural
    if structural:
        details = {(d.reference or d.candidate)[0]: d.detail for d in structural}
        by_families = by_family(details)
        lines.append(f"structural: {len(structural)} in {_families(len(by_families))}")
        for key, count, first in by_families[:10]:
            lines.append(f"  {count:>6}  {key}")
            lines.append(f"          e.g. {first}: {details[first]}")
        lines += _more(10, len(by_families))
    for klass, title in (
        ("candidate_only", "candidate only"),
        ("expected_absent", "expected absent"),
    ):
        declared = [d for d in found.differences if d.klass == klass]
        if declared:
            lines.append(f"{title} (declared): {len(declared)}")
            lines += [f"  {(d.reference or d.candidate)[0]}: {d.detail}" for d in declared[:10]]
            lines += _more(10, len(declared))
    explained = _explained(found)
    if explained:
        lines.append("explained by rules:")
        for key, tally in explained.items():
            largest = ranked(tally)
            lines.append(f"  {key}: {tally.total()} in {_families(len(largest))}")
            lines += [f"    {count:>6}  {fam}" for fam, count in largest[:FIRST]]
            if len(largest) > FIRST:
                more = len(largest) - FIRST
                lines.append(f"    ... and {more} more famil{'y' if more == 1 else 'ies'}")
    return "\n".join(lines)


@dataclass(frozen=True)
class InventoryDiff:
    """What `gates inventory diff` found and wrote: the survey, its output document, the
    receipt and the output's path."""

    document: dict[str, object]
    found: Survey
    receipt: Receipt
    artifact: str

    @property
    def failed(self) -> bool:
        """A structural difference or a rule problem remains, or either side is invalid."""
        found, document = self.found, self.document
        invalid = any(not document[side]["valid"] for side in ("reference", "candidate"))  # type: ignore[index]
        return bool(found.structural or found.rule_problems or invalid)


def render_diff_text(diff: InventoryDiff) -> str:
    stamp = f"{diff.receipt.evidence_class.value}/{diff.receipt.formal_weight}"
    written = f"wrote {diff.artifact} ({stamp} {diff.receipt.id})"
    return render_text(diff.document, diff.found) + "\n" + written


def render_diff_json(diff: InventoryDiff) -> str:
    shown = {**diff.document, "output": diff.artifact, "receipt": diff.receipt.id}
    return indented_json(shown, sort_keys=False, ensure_ascii=True)


#: --format -> the renderer of an InventoryDiff
RENDERERS: dict[str, Callable[[InventoryDiff], str]] = {
    "text": render_diff_text,
    "json": render_diff_json,
}


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: a full-size survey allocates millions of small,
    acyclic objects (entries, nodes, differences) and the collector's repeated passes over
    them cost about a quarter of the CPU time (docs/performance.md). Everything is freed by
    reference counting; the collector runs again afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@collector_paused()
def diff(
    audit: AuditInputs,
    reference: str,
    candidate: str,
    *,
    rules: str | None,
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Exit 1 when a structural difference remains or either side is invalid."""
    found = inventory_diff(audit, reference, candidate, rules=rules, output=output, cwd=cwd)
    out.render(RENDERERS, found)
    return exitcodes.BLOCKED if found.failed else exitcodes.OK


@collector_paused()
def inventory_diff(
    audit: AuditInputs,
    reference: str,
    candidate: str,
    *,
    rules: str | None,
    output: str,
    cwd: Path,
) -> InventoryDiff:
    """Both inventories surveyed through the naming rules, the output and its receipt written."""
    workspace = audit.workspace
    roots = roots_of(workspace)
    found_rules = inventory_rules(audit, rules, cwd)
    declared = inventory_declarations(audit, found_rules)
    cache = StatCache(None)
    ref_at, cand_at = locate(roots, reference, cwd), locate(roots, candidate, cwd)
    ref = check_checkpoint(
        ref_at.base, ref_at.relpath, cache=cache, hash_contents=False, label=ref_at.label
    )
    cand = check_checkpoint(
        cand_at.base, cand_at.relpath, cache=cache, hash_contents=False, label=cand_at.label
    )
    found = survey(
        ref.checkpoint,
        cand.checkpoint,
        found_rules.ruleset,
        (ref.path, cand.path),
        absent=declared.absence.explained,
        saved_layout=declared.saved_layout,
    )
    problems = (list(ref.checkpoint.problems), list(cand.checkpoint.problems))
    document = survey_document(ref.path, cand.path, found, problems, found_rules.source)
    receipt, artifact = write_checker_output(
        audit, output, ArtifactKind.STRUCTURE_PARITY, document, []
    )
    return InventoryDiff(document, found, receipt, artifact)
