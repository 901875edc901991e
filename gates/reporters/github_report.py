"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

`::error` for each blocking contract that blocks and each rejected receipt,
`::warning` for unmet non-blocking or waived contracts, and one `::notice`
with the verdict. Values are escaped as the workflow-command syntax requires.
"""

from __future__ import annotations

from gates.contracts.model import DischargeStatus
from gates.engine import AuditResult
from gates.receipts.verify import Status


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, title: str, message: str, file: str | None = None) -> str:
    where = f"file={_property(file)}," if file else ""
    return f"::{level} {where}title={_property(title)}::{_escape(message)}"


def render(audit: AuditResult) -> str:
    lines = []
    for result in audit.contracts:
        if result.status is DischargeStatus.DISCHARGED:
            continue
        unmet = "; ".join(f"{c.name}: {c.detail}" for c in result.criteria if not c.met)
        message = f"{result.status.value}: {unmet} (discharge: {result.spec.discharge})"
        level = "error" if result.blocks(audit.today) else "warning"
        lines.append(_command(level, result.spec.id, message, audit.relative(result.source)))
    for judgement in audit.receipts:
        if judgement.status is Status.REJECTED:
            lines.append(_command("error", "rejected receipt", judgement.reason, judgement.path))
    policy = audit.policy
    if policy is not None:
        level = "notice" if policy.protected else "warning"
        lines.append(_command(level, "gates policy", policy.describe()))
        lines += [_command("warning", "proposed policy change", c) for c in audit.proposed_changes]
    lines.append(
        _command(
            "notice",
            f"gates verdict={audit.verdict}",
            f"formal_alignment_steps = {audit.formal_alignment_steps} / {audit.required_steps}",
        )
    )
    return "\n".join(lines)
