"""Reading the official config.json: strict JSON, one object, the pinned sha256."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gates.core.content_ids import strict_loads
from gates.core.errors import GatesError


@dataclass(frozen=True)
class OfficialConfig:
    path: str
    sha256: str
    document: dict[str, Any]
    raw: bytes


def read_official(path: Path, display: str) -> OfficialConfig:
    """Parse the official config; GatesError (one line, naming the file) when unusable.

    Refused: unreadable, not UTF-8 JSON, a key given twice, NaN or Infinity, not an object.
    """
    if path.is_symlink():
        raise GatesError("the official config is a symlink", file=display)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise GatesError(
            "official config not found", file=display, hint="check in the official config.json"
        ) from None
    except OSError as exc:
        raise GatesError(f"cannot read the official config: {exc.strerror}", file=display) from None
    try:
        document = strict_loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GatesError(f"the official config is not valid JSON: {exc}", file=display) from None
    if not isinstance(document, dict):
        raise GatesError("the official config is not a JSON object", file=display)
    return OfficialConfig(display, hashlib.sha256(raw).hexdigest(), document, raw)
