"""What every benchmark here shares: medians of repeated runs and writing the figures."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def median_cpu_seconds(action: Callable[[], object], repeats: int) -> float:
    """CPU seconds of this process (for work done in-process on both sides of a ratio):
    far steadier than wall time on a machine shared with other work."""
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        action()
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def report(results: dict[str, object], out: Path) -> None:
    """Write the figures to ``out`` (JSON) and print them, one a line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    width = max(len(key) for key in results) + 2
    for key, value in results.items():
        print(f"{key:{width}} {value}")
