"""`gates claims check FILE`: every figure a PR text claims, backed by evidence or not."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from gates import exitcodes
from gates.echo import Output
from gates.engine.audit import AuditResult, run_audit
from gates.engine.inputs import AuditInputs
from gates.errors import GatesError
from gates.losses.series import LossFileError, read_losses
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Status
from gates.reporters.claims import SubjectData, Subjects, check_claims


def _read_subject(result: AuditResult, kind: ArtifactKind, relpath: str) -> SubjectData:
    path = result.root / relpath
    if kind in (ArtifactKind.LOSS, ArtifactKind.RAW_LOSS):
        try:
            return SubjectData(True, losses=tuple(read_losses(path, relpath).values))
        except LossFileError:
            return SubjectData(False)
    try:
        return SubjectData(True, document=json.loads(path.read_bytes()))
    except (OSError, ValueError, RecursionError):  # unreadable or too deep: backs nothing
        return SubjectData(False)


def read_subjects(result: AuditResult) -> Subjects:
    """The subjects of every accepted receipt, read once: what the claims are checked with."""
    subjects: dict[tuple[ArtifactKind, str], SubjectData] = {}
    for judgement in result.receipts:
        receipt = judgement.receipt
        if receipt is None or judgement.status is Status.REJECTED:
            continue
        for subject in receipt.subjects:
            key = (receipt.kind, subject.path)
            if key not in subjects:
                subjects[key] = _read_subject(result, *key)
    return subjects


def claims_check(inputs: AuditInputs, path: Path, *, out: Output) -> int:
    """Exit 1 when any claim is unbacked."""
    as_json, echo = out.as_json, out.echo
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GatesError(f"cannot read: {exc}", file=path) from None
    result = run_audit(inputs)
    claims = check_claims(text, result, read_subjects(result))
    unbacked = [claim for claim in claims if not claim.backed]
    if as_json:
        echo(json.dumps([asdict(claim) for claim in claims], indent=2, ensure_ascii=False))
    else:
        lines = [f"{path}:{c.line}: unbacked {c.kind} claim: {c.text}" for c in unbacked]
        backed = len(claims) - len(unbacked)
        lines.append(f"{len(claims)} claim(s): {backed} backed, {len(unbacked)} unbacked")
        echo("\n".join(lines))
    return exitcodes.BLOCKED if unbacked else exitcodes.OK
