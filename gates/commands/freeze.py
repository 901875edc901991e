"""`gates freeze show|pin` and `audit_source_freeze.py`."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gates.core import exitcodes, git
from gates.core.atomic import write_text_atomic
from gates.core.echo import Echo, Output
from gates.core.errors import ConfigError
from gates.core.json_writer import indented_json
from gates.freeze.check import FreezeInputs, FreezeReport, evaluate_freeze

if TYPE_CHECKING:
    from gates.workspace.repository import Workspace

_TABLE_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_PIN_LINE = re.compile(r"""^(\s*pin\s*=\s*)("[^"\\\r\n]*"|'[^'\r\n]*')(.*)$""", re.DOTALL)


def render_freeze(report: FreezeReport, *, as_json: bool) -> str:
    """`verdict=...` then one `reason=...` line each, or the JSON object."""
    if as_json:
        return indented_json(report.to_json(), sort_keys=True)
    lines = [f"verdict={report.verdict}"]
    lines += [f"reason={message}" for message in report.messages()]
    return "\n".join(lines)


#: --format -> the renderer of a FreezeReport
RENDERERS: dict[str, Callable[[FreezeReport], str]] = {
    "text": lambda report: render_freeze(report, as_json=False),
    "json": lambda report: render_freeze(report, as_json=True),
}


def show(workspace: Workspace, freeze: FreezeInputs, *, out: Output) -> int:
    """Exit 0 when the freeze passes, else 1."""
    report = evaluate_freeze(workspace.root, workspace.config, freeze)
    out.render(RENDERERS, report)
    return exitcodes.OK if report.verdict == "pass" else exitcodes.BLOCKED


def resolve_commit(root: Path, rev: str) -> str:
    if not rev or any(ch.isspace() for ch in rev):
        raise ConfigError(f"{rev!r} is not a revision", hint="give a commit sha, tag or branch")
    info = git.describe_objects(root, [f"{rev}^{{commit}}"])[0]
    if info.sha is None:
        raise ConfigError(
            f"{rev} does not name a commit in this clone",
            file=root,
            hint="check the spelling, or fetch the commit first",
        )
    return info.sha


def set_pin_text(text: str, sha: str) -> str:
    """Rewrite only the value of ``[freeze] pin``; every other byte stays as it was."""
    lines = text.splitlines(keepends=True)
    section: str | None = None
    header_at: int | None = None
    for index, line in enumerate(lines):
        header = _TABLE_HEADER.match(line)
        if header:
            section = header.group(1)
            if section == "freeze":
                header_at = index
            continue
        match = _PIN_LINE.match(line) if section == "freeze" else None
        if match:
            lines[index] = f'{match.group(1)}"{sha}"{match.group(3)}'
            return "".join(lines)
    newline = "\r\n" if text.endswith("\r\n") else "\n"
    if header_at is not None:
        lines.insert(header_at + 1, f'pin = "{sha}"{newline}')
        return "".join(lines)
    separator = "" if not text or text.endswith("\n") else newline
    return f'{text}{separator}{newline if text else ""}[freeze]{newline}pin = "{sha}"{newline}'


def pin(workspace: Workspace, rev: str, *, echo: Echo) -> int:
    from gates.workspace.config import parse_config  # noqa: PLC0415  (the freeze script never pins)

    sha = resolve_commit(workspace.root, rev)
    path = workspace.config_path
    old_text = path.read_bytes().decode("utf-8")
    new_text = set_pin_text(old_text, sha)
    if parse_config(new_text, source=path).freeze.pin != sha:
        raise ConfigError(
            "could not rewrite [freeze] pin in place (unusual layout?)",
            file=path,
            hint=f'set pin = "{sha}" under [freeze] by hand',
        )
    if new_text != old_text:
        write_text_atomic(path, new_text)
    echo(f"pin={sha}")
    return exitcodes.OK
