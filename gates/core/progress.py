"""Progress for long work (hashing checkpoints, comparing tensors, reading large loss files,
a cold audit): counts or bytes, rate and time left, drawn by tqdm on stderr.

Shown only on a terminal, and only once the work has lasted `GATES_PROGRESS_DELAY` seconds
(default 2: short work stays quiet); never with `--format json` (the CLI calls `silence()`),
never when stderr is not a terminal (CI logs, pipes), never with `GATES_PROGRESS=0`.
A disabled bar costs a method call per update: hashing pays it once per 16 MiB chunk.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Never, TypeVar

if TYPE_CHECKING:
    from tqdm import tqdm

T = TypeVar("T")

_silenced = False


def asks_for_json(argv: list[str]) -> bool:
    """``--format json`` (or ``--format=json``) on the command line."""
    pairs = itertools.pairwise(argv)
    return "--format=json" in argv or any(a == "--format" and b == "json" for a, b in pairs)


def silence(silent: bool = True) -> None:
    """No progress for this command (machine output); the CLI resets it for each command."""
    global _silenced  # noqa: PLW0603  (one switch per process, set by the CLI)
    _silenced = silent


def enabled() -> bool:
    if _silenced or os.environ.get("GATES_PROGRESS", "1") == "0":
        return False
    return sys.stderr.isatty()


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("GATES_PROGRESS_DELAY", "2")))
    except ValueError:
        return 2.0


def bar(total: int | None, description: str, *, unit: str = "B") -> tqdm[Never]:
    """A progress bar over ``total`` units (bytes by default: shown as KiB, MiB, GiB)."""
    from tqdm import tqdm  # noqa: PLC0415  (imported when long work starts, not at CLI start)

    is_bytes = unit == "B"
    return tqdm(
        total=total,
        desc=description,
        unit=unit,
        unit_scale=is_bytes,
        unit_divisor=1024 if is_bytes else 1000,
        disable=not enabled(),
        file=sys.stderr,
        leave=False,
        mininterval=0.5,
        delay=_delay(),
        dynamic_ncols=True,
    )


def counted(items: Iterable[T], total: int, description: str, unit: str) -> Iterator[T]:
    """``items`` with a counting bar (receipts, steps)."""
    with bar(total, description, unit=unit) as shown:
        for item in items:
            yield item
            shown.update(1)
