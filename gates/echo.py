"""Where a command writes its machine output, and remarks for the reader beside it."""

import sys
from collections.abc import Callable

#: Where a command writes its machine output (stdout in the CLI, a list in tests).
Echo = Callable[[str], None]


def note(text: str) -> None:
    """A remark for the reader, never part of the machine output: stderr."""
    print(text, file=sys.stderr)
