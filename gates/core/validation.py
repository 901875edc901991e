"""The first problem of a pydantic ValidationError, as gates' one-line errors name it."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class FirstError:
    """Where (dotted key, or ``whole`` for the document itself) and what is wrong."""

    key: str
    message: str
    unknown_key: bool
    found: object

    @property
    def problem(self) -> str:
        """``unknown key`` for a key the model does not know, else pydantic's message."""
        return "unknown key" if self.unknown_key else self.message


def first_error(exc: ValidationError, *, whole: str = "") -> FirstError:
    """The first error of ``exc``; ``whole`` names the location when the error has none."""
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or whole
    return FirstError(key, first["msg"], first["type"] == "extra_forbidden", first.get("input"))
