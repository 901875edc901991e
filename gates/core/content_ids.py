"""Canonical JSON, content ids and strict reading: what a receipt's identity rests on.

Canonical form: keys sorted, no insignificant whitespace, UTF-8, no NaN or
Infinity. A receipt's ``id`` is ``sha256:`` + the hex digest of the canonical
form of the receipt without its ``id`` and ``attestation`` fields (the
attestation signs the receipt, id included). Nothing here writes a file: the
output writer is gates/core/json_writer.py.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice: its meaning is ambiguous."""


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def content_id(document: dict[str, Any]) -> str:
    body = {key: value for key, value in document.items() if key not in ("id", "attestation")}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object hook that refuses a key given twice (raises DuplicateKeyError)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"duplicate key {key!r}")
            seen.add(key)
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def strict_loads(text: str | bytes) -> Any:
    """Parse JSON refusing duplicate keys, the NaN/Infinity extensions and nesting deeper
    than the interpreter's recursion limit (a ValueError, never a RecursionError)."""
    try:
        return json.loads(text, object_pairs_hook=unique_pairs, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
