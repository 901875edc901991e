"""`gates claims check FILE`: every figure a PR text claims, backed by evidence or not."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.json_writer import indented_json
from gates.engine.audit import AuditResult, run_audit
from gates.engine.inputs import AuditInputs
from gates.losses.series import LossFileError, read_losses
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Status
from gates.reporters.claims import Claim, SubjectData, Subjects, check_claims


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


@dataclass(frozen=True)
class ClaimsReport:
    """What `gates claims check FILE` found: every figure the file claims, backed or not."""

    path: Path
    claims: tuple[Claim, ...]

    @property
    def unbacked(self) -> list[Claim]:
        return [claim for claim in self.claims if not claim.backed]


def claims_report(inputs: AuditInputs, path: Path) -> ClaimsReport:
    """The claims of the text at ``path``, checked against the audit's accepted evidence."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GatesError(f"cannot read: {exc}", file=path) from None
    result = run_audit(inputs)
    return ClaimsReport(path, tuple(check_claims(text, result, read_subjects(result))))


def render_text(report: ClaimsReport) -> str:
    unbacked = report.unbacked
    lines = [f"{report.path}:{c.line}: unbacked {c.kind} claim: {c.text}" for c in unbacked]
    backed = len(report.claims) - len(unbacked)
    lines.append(f"{len(report.claims)} claim(s): {backed} backed, {len(unbacked)} unbacked")
    return "\n".join(lines)


def render_json(report: ClaimsReport) -> str:
    return indented_json([asdict(claim) for claim in report.claims], ensure_ascii=False)


#: --format -> the renderer of a ClaimsReport
RENDERERS: dict[str, Callable[[ClaimsReport], str]] = {"text": render_text, "json": render_json}


def claims_check(inputs: AuditInputs, path: Path, *, out: Output) -> int:
    """Exit 1 when any claim is unbacked."""
    report = claims_report(inputs, path)
    out.render(RENDERERS, report)
    return exitcodes.BLOCKED if report.unbacked else exitcodes.OK
