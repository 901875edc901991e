"""Benchmark what the progress display costs: hashing a checkpoint of --size-mib MiB (default
2 GiB, 8 shards) with the bar drawn on a real pseudo-terminal, as a ratio to the same hashing
with progress off. Runs alternate (off, on, off, on, ...) so that the shared machine's noise
falls on both sides; medians of --repeats. Target: under 1.02.

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

from gates import progress
from gates.checkpoints.check import check_checkpoint
from gates.hashing import StatCache


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


def _hash(root: Path) -> float:
    start = time.perf_counter()
    report_ = check_checkpoint(root, "checkpoint", cache=StatCache(None))
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
        os.environ["GATES_PROGRESS_DELAY"] = "0"
        off: list[float] = []
        on: list[float] = []
        real_stderr = sys.stderr
        for _ in range(args.repeats):
            progress.silence(True)
            off.append(_hash(root))
            progress.silence(False)
            sys.stderr = terminal  # progress draws here: a terminal, so enabled
            try:
                assert progress.enabled()
                on.append(_hash(root))
            finally:
                sys.stderr = real_stderr
    off.sort()
    on.sort()
    median_off, median_on = off[len(off) // 2], on[len(on) // 2]
    report(
        {
            "size_mib": args.size_mib,
            "repeats": args.repeats,
            "hash_progress_off_s": round(median_off, 3),
            "hash_progress_on_s": round(median_on, 3),
            "progress_overhead_ratio": round(median_on / median_off, 4),
            "target_ratio": 1.02,
        },
        OUT / "progress.json",
    )


if __name__ == "__main__":
    main()
