"""Renderers of an audit result; `--format` choices are the keys of REPORTERS."""

from __future__ import annotations

from collections.abc import Callable

from gates.engine.audit import AuditResult
from gates.reporters import github_report, json_report, junit_report, text_report

Reporter = Callable[[AuditResult], str]

REPORTERS: dict[str, Reporter] = {
    "text": text_report.render,
    "json": json_report.render,
    "junit": junit_report.render,
    "github": github_report.render,
}
