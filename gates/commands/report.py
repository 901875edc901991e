"""`gates report --html DIR`: the audit as one self-contained page (docs/report.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from gates import exitcodes
from gates.atomic import write_text_atomic
from gates.echo import Echo
from gates.engine.audit import run_audit
from gates.engine.inputs import AuditInputs
from gates.errors import GatesError
from gates.reporters import html_report
from gates.reporters.history import history
from gates.reporters.report_data import HistoryPoint, report_data

REPORT_FILE = "report.html"


def _require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise GatesError(
            "the HTML report needs matplotlib, which is not installed",
            hint="pip install 'gates[report]' (or pip install matplotlib)",
        )


def report(
    inputs: AuditInputs,
    out: Path,
    *,
    as_json: bool,
    echo: Echo,
    history_range: str | None = None,
) -> int:
    """Write OUT/report.html; exit 0 once written, whatever the verdict (the page says it)."""
    workspace = inputs.workspace
    _require_matplotlib()
    result = run_audit(inputs)
    points: tuple[HistoryPoint, ...] = ()
    if history_range is not None:
        points = tuple(
            HistoryPoint(e.commit, e.summary.formal_alignment_steps, e.fact is not None)
            for e in history(workspace.root, history_range or None, inputs.policy.anchors)
            if e.summary is not None
        )
    data = report_data(workspace, result, points)
    page = html_report.render(data)
    target = out / REPORT_FILE
    try:
        write_text_atomic(target, page)
    except OSError as error:
        raise GatesError(
            f"cannot write the report: {error.strerror}",
            file=target,
            hint="pass --html a folder you can write (outside the repository)",
        ) from None
    if as_json:
        echo(
            json.dumps(
                {
                    "report": str(target),
                    "bytes": len(page.encode("utf-8")),
                    "verdict": result.verdict,
                    "formal_alignment_steps": result.formal_alignment_steps,
                }
            )
        )
    else:
        echo(f"wrote {target} (verdict={result.verdict})")
    return exitcodes.OK
