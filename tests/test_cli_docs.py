"""docs/cli.md names every command's --format choices as the CLI has them."""

from __future__ import annotations

import re
from pathlib import Path

import click

from gates.cli.app import cli

DOC = Path(__file__).resolve().parent.parent / "docs/cli.md"


def _commands(group: click.Group, path: list[str]) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, [*path, name])
        else:
            found.append((" ".join([*path, name]), command))
    return found


def test_every_format_option_is_documented_with_its_choices() -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `")]
    missing = []
    for name, command in _commands(cli, ["gates"]):
        option = next((p for p in command.params if "--format" in getattr(p, "opts", [])), None)
        if option is None:
            continue
        assert isinstance(option.type, click.Choice)
        row = next((r for r in rows if re.match(rf"\| `{re.escape(name)}\b", r)), None)
        choices = {str(c) for c in option.type.choices}
        match = re.search(r"--format ([a-z|\\]+)\]", row or "")
        documented = set(match.group(1).split("\\|")) if match else set()
        if documented != choices:
            missing.append(f"{name}: docs {sorted(documented)}, cli {sorted(choices)}")
    assert missing == []
