"""Where a command writes its machine output, and remarks for the reader beside it."""

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

#: Where a command writes its machine output (stdout in the CLI, a list in tests).
Echo = Callable[[str], None]

R = TypeVar("R")

#: --format name -> the function that renders a command's typed result as that format.
Renderers = Mapping[str, Callable[[R], str]]


def note(text: str) -> None:
    """A remark for the reader, never part of the machine output: stderr."""
    print(text, file=sys.stderr)


@dataclass(frozen=True)
class Output:
    """How a command shows what it found: the ``format`` asked for (`--format`), ``echo``
    for the machine output (stdout: text, or exactly one JSON document) and ``note`` for
    remarks (stderr). The command returns its exit code; the command line exits with it."""

    format: str
    echo: Echo
    note: Echo = note

    @property
    def as_json(self) -> bool:
        return self.format == "json"

    def render(self, renderers: Renderers[R], result: R) -> None:
        """Echo ``result`` as the renderer of this format makes it (the `--format` choices
        are the renderers' keys, so every format asked for has one)."""
        self.echo(renderers[self.format](result))
