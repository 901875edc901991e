"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

`::error` for each blocking contract that blocks and each rejected receipt,
`::warning` for unmet non-blocking or waived contracts, and one `::notice`
with the verdict. Each annotation names a file and a line, so GitHub shows it
in the PR's diff: a contract's annotation points at the line of its TOML that
holds the first unmet criterion's key (else the `id` line); an unmet criterion
whose detail names a file of the workspace gets one more annotation on that
file; a rejected receipt is annotated on the receipt. Values are escaped as the
workflow-command syntax requires.

`write_step_summary` appends the PR status block to `$GITHUB_STEP_SUMMARY`
(the job summary page), which `gates audit --format github` does when the
variable is set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gates.contracts.model import ContractResult
from gates.criteria import Criterion, DischargeStatus
from gates.engine.audit import AuditResult
from gates.outputs.read import OutputFigures
from gates.receipts.verify import Status
from gates.reporters.status_md import render as render_status_block

SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"
# a workspace path at the start of a detail or after "name:" (results/torch/loss.json: ...)
_PATH = re.compile(r"(?:^|[\s:])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z0-9]+)(?=[:\s,;]|$)")


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def _command(
    level: str, title: str, message: str, file: str | None = None, line: int | None = None
) -> str:
    where = f"file={_property(file)}," if file else ""
    if file and line is not None:
        where += f"line={line},"
    return f"::{level} {where}title={_property(title)}::{_escape(message)}"


def _contract_text(audit: AuditResult, result: ContractResult) -> str | None:
    """The TOML the contract was read from: the policy's bytes (a git ref) or the file."""
    if audit.policy is not None:
        for path, data in audit.policy.contract_files:
            if path == result.source and data is not None:
                return data.decode("utf-8", errors="replace")
    try:
        return result.source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def key_line(text: str, names: list[str]) -> int | None:
    """The 1-based line of the first `name = ...` key among ``names``, else of `id = ...`."""
    lines = text.splitlines()
    for name in [*names, "id"]:
        pattern = re.compile(rf"^\s*{re.escape(name)}\s*=")
        for number, line in enumerate(lines, start=1):
            if pattern.match(line):
                return number
    return None


def _criterion_keys(criterion: Criterion) -> list[str]:
    """Keys a criterion may be declared under: its name, then its words (min_steps: steps)."""
    parts = [p for p in re.split(r"[_:]", criterion.name) if len(p) > 3]
    return [criterion.name, *parts]


def files_named(audit: AuditResult, criterion: Criterion) -> list[str]:
    """Workspace files (regular, inside the root) that an unmet criterion's text names."""
    found: list[str] = []
    for match in _PATH.finditer(f"{criterion.name}: {criterion.detail}"):
        relpath = match.group(1).removeprefix("./")
        candidate = audit.root / relpath
        if relpath in found or relpath.startswith("/") or ".." in Path(relpath).parts:
            continue
        if candidate.is_file() and not candidate.is_symlink():
            found.append(relpath)
    return found


def _contract_lines(audit: AuditResult, result: ContractResult) -> list[str]:
    unmet = [c for c in result.criteria if not c.met]
    message = "; ".join(f"{c.name}: {c.detail}" for c in unmet)
    message = f"{result.status.value}: {message} (discharge: {result.spec.discharge})"
    level = "error" if result.blocks(audit.today) else "warning"
    text = _contract_text(audit, result)
    keys = _criterion_keys(unmet[0]) if unmet else []
    line = key_line(text, keys) if text is not None else None
    source = audit.relative(result.source)
    lines = [_command(level, result.spec.id, message, source, line)]
    for criterion in unmet:
        for relpath in files_named(audit, criterion):
            if relpath != source:
                title = f"{result.spec.id}: {criterion.name}"
                lines.append(_command(level, title, criterion.detail, relpath, 1))
    return lines


def render(audit: AuditResult) -> str:
    lines = []
    for result in audit.contracts:
        if result.status is not DischargeStatus.DISCHARGED:
            lines += _contract_lines(audit, result)
    for judgement in audit.receipts:
        if judgement.status is Status.REJECTED:
            lines.append(_command("error", "rejected receipt", judgement.reason, judgement.path, 1))
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


def write_step_summary(
    audit: AuditResult,
    summary: Path,
    lang: str = "en",
    *,
    outputs: Mapping[str, OutputFigures],
) -> None:
    """Append the status block to GitHub's job summary file (GitHub collects it per step);
    ``outputs``: the figures of the receipts the block shows (`status_md.shown_evidence`)."""
    with summary.open("a", encoding="utf-8") as handle:
        handle.write(render_status_block(audit, lang, outputs=outputs) + "\n")
