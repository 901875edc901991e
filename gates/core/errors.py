"""The one error family users see: a message, the file it concerns, and a hint."""

from __future__ import annotations

from pathlib import Path


class GatesError(Exception):
    """An expected failure: bad input, bad configuration, a refused operation.

    Rendered as one line (``<file>: <message> (hint: ...)``) and exit code 2.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.hint = hint

    def one_line(self) -> str:
        where = f"{self.file}: " if self.file else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}{self.message}{hint}"


class ConfigError(GatesError):
    """gates.toml or a contract file is missing, malformed or invalid."""


class GitError(GatesError):
    """A git command failed in a way that is not a freeze finding."""


class ReceiptError(GatesError):
    """A receipt cannot be created or read."""


class UnsafePathError(GatesError):
    """A path is absolute, escapes the workspace, or goes through a symlink."""
