"""One module per command; each exposes plain functions that return an exit code."""

from collections.abc import Callable

#: Where a command writes its machine output (stdout in the CLI, a list in tests).
Echo = Callable[[str], None]
