"""`gates status`: the PR status block, printed or written into a PR body in place."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gates.core import exitcodes
from gates.core.atomic import write_bytes_atomic
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.json_writer import indented_json
from gates.engine.audit import AuditResult, run_audit
from gates.engine.inputs import AuditInputs
from gates.outputs.read import OutputFigures, read_outputs
from gates.reporters import status_md
from gates.reporters.json_report import audit_object


def status_object(result: AuditResult, lang: str) -> dict[str, object]:
    words = status_md.messages(lang)
    return {
        **audit_object(result),
        "unverified": status_md.unverified(result, words),
        "not_claimed": status_md.not_claimed(result, words),
    }


def update_pr_body(path: Path, block: str) -> bool:
    """Replace the block in ``path`` atomically; True when the file changed."""
    try:
        body = path.read_bytes().decode("utf-8")  # bytes: keep the body's line endings
    except FileNotFoundError:
        body = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise GatesError(f"cannot read the PR body: {exc}", file=path) from None
    updated = status_md.replace_block(body, block)
    if updated == body:
        return False
    write_bytes_atomic(path, updated.encode("utf-8"))
    return True


@dataclass(frozen=True)
class StatusReport:
    """What `gates status` shows: the audit, the language of the block, and the figures of
    the receipts its evidence table shows (read only for a format that shows them)."""

    result: AuditResult
    lang: str
    outputs: Mapping[str, OutputFigures]

    @property
    def passed(self) -> bool:
        return self.result.verdict == "pass"


#: The formats that show the evidence table's figures (JSON lists the receipts only).
SHOWS_FIGURES = frozenset({"markdown"})


def status_report(inputs: AuditInputs, lang: str, *, figures: bool) -> StatusReport:
    """The audit, and with ``figures`` the outputs of the receipts the block shows."""
    result = run_audit(inputs)
    outputs = read_outputs(result.root, status_md.shown_evidence(result)) if figures else {}
    return StatusReport(result, lang, outputs)


#: --format -> the renderer of a StatusReport
RENDERERS: dict[str, Callable[[StatusReport], str]] = {
    "markdown": lambda r: status_md.render(r.result, r.lang, outputs=r.outputs),
    "json": lambda r: indented_json(status_object(r.result, r.lang), ensure_ascii=False),
}


def status(inputs: AuditInputs, *, lang: str, pr_body: Path | None, out: Output) -> int:
    """Exit 0 when the verdict is pass, else 1 (``out.format``: markdown or json); with
    ``pr_body`` the markdown block goes into that file and stdout says whether it changed."""
    report = status_report(inputs, lang, figures=out.format in SHOWS_FIGURES)
    if pr_body is None or out.as_json:
        out.render(RENDERERS, report)
    else:
        changed = update_pr_body(pr_body, RENDERERS["markdown"](report))
        out.echo(f"{pr_body}: status block {'updated' if changed else 'unchanged'}")
    return exitcodes.OK if report.passed else exitcodes.BLOCKED
