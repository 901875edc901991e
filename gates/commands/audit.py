"""`gates audit`: evaluate every contract; the pre-merge hook."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gates.core import exitcodes
from gates.core.echo import Output, note
from gates.core.errors import GatesError
from gates.engine.audit import AuditResult, run_audit
from gates.engine.inputs import AuditInputs
from gates.outputs.read import read_outputs
from gates.reporters import REPORTERS, Reporter, github_report, status_md

#: --format -> the renderer of an AuditResult (the reporters' own map)
RENDERERS: dict[str, Reporter] = REPORTERS


def exit_code(result: AuditResult) -> int:
    if result.configuration_errors:
        return exitcodes.ERROR
    return exitcodes.OK if result.verdict == "pass" else exitcodes.BLOCKED


def audit(inputs: AuditInputs, *, out: Output) -> int:
    result = run_audit(inputs)
    out.render(RENDERERS, result)
    summary = os.environ.get(github_report.SUMMARY_VARIABLE)
    if out.format == "github" and summary:
        try:
            outputs = read_outputs(result.root, status_md.shown_evidence(result))
            github_report.write_step_summary(result, Path(summary), outputs=outputs)
        except OSError as exc:  # the annotations are out; the summary is a convenience
            note(f"{summary}: cannot append the job summary ({exc.strerror}); check the runner")
    return exit_code(result)


def error_document(error: Exception) -> str:
    """`--format json` when nothing could be judged (exit 2): the same one document, with
    verdict `error` and the one-line reason that stderr also gets."""
    if isinstance(error, GatesError):
        reason = error.one_line()
    else:
        reason = f"internal error: {type(error).__name__}: {error}"
    return json.dumps(
        {
            "verdict": "error",
            "error": reason,
            "blockers": [reason],
            "contracts": [],
            "receipts": [],
        },
        ensure_ascii=False,
    )
