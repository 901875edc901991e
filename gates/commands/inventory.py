"""`gates inventory diff`: the structure-parity survey of two checkpoints (headers only)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from gates import exitcodes
from gates.checkpoints.check import check_checkpoint
from gates.checkpoints.survey import Survey, survey
from gates.commands import Echo
from gates.commands.checkpoint import resolve_rules
from gates.commands.outputs import write_checker_output
from gates.hashing import StatCache
from gates.paths import to_workspace_relpath
from gates.receipts.model import ArtifactKind
from gates.workspace import Workspace

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
        "matched": len(found.matched),
        "counts": found.counts(),
        "differences": [d.to_json() for d in found.differences],
        "rule_problems": list(found.rule_problems),
        "notes": list(found.notes),
    }


def render_text(document: dict[str, object], found: Survey) -> str:
    counts = found.counts()
    lines = [
        f"reference {document['reference']['path']}: {found.reference_count} tensors",  # type: ignore[index]
        f"candidate {document['candidate']['path']}: {found.candidate_count} tensors",  # type: ignore[index]
        f"matched {len(found.matched)}; differences {len(found.differences)}: "
        + ", ".join(f"{klass} {n}" for klass, n in counts.items()),
    ]
    for side in ("reference", "candidate"):
        lines += [f"invalid {side}: {p}" for p in document[side]["problems"]]  # type: ignore[index]
    lines += [f"rule problem: {p}" for p in found.rule_problems]
    lines += [f"note: {n}" for n in found.notes]
    if found.structural:
        lines.append("structural:")
        lines += [
            f"  {d.detail}" if not d.reference else f"  {d.reference[0]}: {d.detail}"
            for d in found.structural
        ]
    explained = Counter(
        (d.klass, ", ".join(d.rules)) for d in found.differences if d.klass != "structural"
    )
    if explained:
        lines.append("explained by rules:")
        lines += [
            f"  {klass:<7} {n:>4}  {rules}" for (klass, rules), n in sorted(explained.items())
        ]
    return "\n".join(lines)


def diff(
    workspace: Workspace,
    reference: str,
    candidate: str,
    *,
    rules: str | None,
    output: str,
    cwd: Path,
    as_json: bool,
    echo: Echo,
) -> int:
    """Exit 1 when a structural difference remains or either side is invalid."""
    root = workspace.root
    ruleset, rules_source = resolve_rules(workspace, rules, cwd)
    cache = StatCache(None)
    ref = check_checkpoint(
        root, to_workspace_relpath(root, reference, cwd), cache=cache, hash_contents=False
    )
    cand = check_checkpoint(
        root, to_workspace_relpath(root, candidate, cwd), cache=cache, hash_contents=False
    )
    found = survey(ref.checkpoint, cand.checkpoint, ruleset, (ref.path, cand.path))
    problems = (list(ref.checkpoint.problems), list(cand.checkpoint.problems))
    document = survey_document(ref.path, cand.path, found, problems, rules_source)
    receipt, artifact = write_checker_output(
        workspace, output, ArtifactKind.STRUCTURE_PARITY, document, []
    )
    if as_json:
        echo(json.dumps({**document, "output": artifact, "receipt": receipt.id}, indent=2))
    else:
        echo(render_text(document, found))
        stamp = f"{receipt.evidence_class.value}/{receipt.formal_weight}"
        echo(f"wrote {artifact} ({stamp} {receipt.id})")
    failed = bool(found.structural or found.rule_problems or problems[0] or problems[1])
    return exitcodes.BLOCKED if failed else exitcodes.OK
