"""Where a command writes its machine output, and remarks for the reader beside it."""

import sys
from collections.abc import Callable
from dataclasses import dataclass

#: Where a command writes its machine output (stdout in the CLI, a list in tests).
Echo = Callable[[str], None]


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
