"""Benchmark what the progress display costs: hashing a checkpoint of --size-mib MiB (default
2 GiB, 8 shards) with the bar drawn on a real pseudo-terminal, as a ratio to the same hashing
with progress off. Runs alternate (off, on, off, on, ...) so that the shared machine's noise
falls on both sides; medians and minima of --repeats. Target: under 1.02. Because a shared
machine's noise is larger than the effect, the bar's own cost is also measured directly:
the updates one hashing makes (one per 16 MiB read), drawn on the same terminal, timed
alone, as a fraction of the hashing time.

Usage: python bench/bench_progress.py [--size-mib 2048] [--repeats 5]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import struct
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

from bench_checkpoint import SHARDS, write_sharded
from common import OUT, report

from gates.checkpoints.check import check_checkpoint
from gates.core.hashing import StatCache
from gates.core.progress import QUIET, Progress


def _terminal() -> tuple[int, threading.Thread]:
    """A pseudo-terminal of 120 columns whose screen is read (and dropped) by a thread."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

    def drain() -> None:
        while True:
            try:
                if not os.read(leader, 65536):
                    return
            except OSError:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    return follower, reader


#: Bars drawn at once (a terminal, no delay), as `gates` draws them on one.
DRAWN = Progress(shown=True, delay=0.0)


def _hash(root: Path, shown: Progress = QUIET) -> float:
    start = time.perf_counter()
    report_ = check_checkpoint(root, "checkpoint", cache=StatCache(None), progress=shown)
    elapsed = time.perf_counter() - start
    assert report_.valid and report_.digest
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    follower, _ = _terminal()
    terminal = os.fdopen(follower, "w", buffering=1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_sharded(root / "checkpoint", args.size_mib, SHARDS, 16)
        _hash(root)  # page cache warm for both sides
        off: list[float] = []
        on: list[float] = []
        real_stderr = sys.stderr
        for _ in range(args.repeats):
            off.append(_hash(root))
            sys.stderr = terminal  # progress draws here: a terminal
            try:
                on.append(_hash(root, DRAWN))
            finally:
                sys.stderr = real_stderr
        updates = _update_cost(terminal, args.size_mib)
    off.sort()
    on.sort()
    median_off, median_on = off[len(off) // 2], on[len(on) // 2]
    report(
        {
            "size_mib": args.size_mib,
            "repeats": args.repeats,
            "hash_progress_off_s": round(median_off, 3),
            "hash_progress_on_s": round(median_on, 3),
            "progress_overhead_ratio_median": round(median_on / median_off, 4),
            "progress_overhead_ratio_min": round(on[0] / off[0], 4),
            "bar_updates_alone_s": round(updates, 5),
            "bar_cost_fraction_of_hashing": round(updates / off[0], 6),
            "target_ratio": 1.02,
        },
        OUT / "progress.json",
    )


def _update_cost(terminal: object, size_mib: int) -> float:
    """The bar's updates for one hashing of ``size_mib`` MiB (one per 16 MiB read, under the
    threads' lock), drawn on the terminal, timed alone."""
    from gates.checkpoints.digest import READ_CHUNK, _locked  # noqa: PLC0415

    reads = size_mib * 1024 * 1024 // READ_CHUNK
    real_stderr = sys.stderr
    sys.stderr = terminal  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        with DRAWN.bar(reads * READ_CHUNK, "hashing") as shown:
            advance = _locked(shown.update)
            for _ in range(reads):
                advance(READ_CHUNK)
        return time.perf_counter() - start
    finally:
        sys.stderr = real_stderr


if __name__ == "__main__":
    main()
