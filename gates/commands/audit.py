"""`gates audit`: evaluate every contract; the pre-merge hook."""

from __future__ import annotations

from gates import exitcodes
from gates.commands import Echo
from gates.engine import AuditResult, run_audit
from gates.reporters import REPORTERS
from gates.workspace import Workspace


def exit_code(result: AuditResult) -> int:
    if result.configuration_errors:
        return exitcodes.ERROR
    return exitcodes.OK if result.verdict == "pass" else exitcodes.BLOCKED


def audit(workspace: Workspace, *, output_format: str, echo: Echo) -> int:
    result = run_audit(workspace)
    echo(REPORTERS[output_format](result))
    return exit_code(result)
