"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

`::error` for each blocking contract that blocks and each rejected receipt,
`::warning` for unmet non-blocking or waived contracts, and one `::notice`
with the verdict. Each annotation names a file and a line, so GitHub shows it
in the PR's diff: a contract's annotation points at the line of its TOML that
holds the first unmet criterion's key (`Criterion.key`, else the `id` line);
an unmet criterion gets one more annotation on each workspace file it names in
`Criterion.files` (never on a path its detail merely mentions: a detail may
quote evidence an attacker wrote); a rejected receipt is annotated on the
receipt. Values are escaped as the workflow-command syntax requires.

`write_step_summary` appends the PR status block to `$GITHUB_STEP_SUMMARY`
(the job summary page), which `gates audit --format github` does when the
variable is set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from gates.contracts.model import ContractResult
from gates.core.criteria import Criterion, DischargeStatus
from gates.engine.audit import AuditResult
from gates.outputs.read import OutputFigures
from gates.receipts.verify import Status
from gates.reporters.status_md import render as render_status_block

SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"


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


def _workspace_file(root: Path, given: str) -> str | None:
    """``given`` as a workspace-relative path of a regular file inside ``root``, else None.

    A criterion's files come from evidence (a receipt's subjects, a manifest's path), which
    an attacker can write: no absolute path, no `..`, no symlink anywhere on the way."""
    relpath = PurePosixPath(given.removeprefix("./"))
    if relpath.is_absolute() or ".." in relpath.parts or not relpath.parts:
        return None
    path = root
    for part in relpath.parts:
        path /= part
        if path.is_symlink():
            return None
    return relpath.as_posix() if path.is_file() else None


def files_named(audit: AuditResult, criterion: Criterion) -> list[str]:
    """The workspace files (regular, inside the root) a criterion names in ``files``."""
    found = (_workspace_file(audit.root, given) for given in criterion.files)
    return list(dict.fromkeys(relpath for relpath in found if relpath is not None))


def _contract_lines(audit: AuditResult, result: ContractResult) -> list[str]:
    unmet = [c for c in result.criteria if not c.met]
    message = "; ".join(f"{c.name}: {c.detail}" for c in unmet)
    message = f"{result.status.value}: {message} (discharge: {result.spec.discharge})"
    level = "error" if result.blocks(audit.today) else "warning"
    text = _contract_text(audit, result)
    key = unmet[0].key if unmet else None
    line = key_line(text, [key] if key else []) if text is not None else None
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
