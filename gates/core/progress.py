"""Progress for long work (hashing checkpoints, comparing tensors, reading large loss files,
a cold audit): counts or bytes, rate and time left, drawn by tqdm on stderr.

A command's `Progress` comes from its invocation (`gates.core.invocation.progress_from`):
shown only on a terminal, and only once the work has lasted ``delay`` seconds
(`GATES_PROGRESS_DELAY`, default 2: short work stays quiet); never with `--format json`,
never when stderr is not a terminal (CI logs, pipes), never with `GATES_PROGRESS=0`.
A hidden bar costs a method call per update: hashing pays it once per 16 MiB chunk.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Never, TypeVar

if TYPE_CHECKING:
    from tqdm import tqdm

T = TypeVar("T")


def asks_for_json(argv: list[str]) -> bool:
    """``--format json`` (or ``--format=json``) on the command line."""
    pairs = itertools.pairwise(argv)
    return "--format=json" in argv or any(a == "--format" and b == "json" for a, b in pairs)


@dataclass(frozen=True)
class Progress:
    """Whether a command draws progress bars (``shown``), and after how many seconds."""

    shown: bool = False
    delay: float = 2.0

    def bar(self, total: int | None, description: str, *, unit: str = "B") -> tqdm[Never]:
        """A progress bar over ``total`` units (bytes by default: shown as KiB, MiB, GiB)."""
        from tqdm import tqdm  # noqa: PLC0415  (imported when long work starts, not at CLI start)

        is_bytes = unit == "B"
        return tqdm(
            total=total,
            desc=description,
            unit=unit,
            unit_scale=is_bytes,
            unit_divisor=1024 if is_bytes else 1000,
            disable=not self.shown,
            file=sys.stderr,
            leave=False,
            mininterval=0.5,
            delay=self.delay,
            dynamic_ncols=True,
        )

    def counted(self, items: Iterable[T], total: int, description: str, unit: str) -> Iterator[T]:
        """``items`` with a counting bar (receipts, steps)."""
        with self.bar(total, description, unit=unit) as shown:
            for item in items:
                yield item
                shown.update(1)


#: No bars: the Python API's default, and what every stage gets unless its command asks.
QUIET = Progress()
