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
    return median_of(interleaved_cpu_seconds({"action": action}, repeats), "action")


def interleaved_cpu_seconds(
    actions: dict[str, Callable[[], object]], repeats: int
) -> list[dict[str, float]]:
    """CPU seconds of each action in each of ``repeats`` rounds, every action once a round:
    a ratio taken within one round sees the machine as both its sides saw it (blocks of
    one action after another swung by 40% within an hour on a shared machine)."""
    rounds = []
    for _ in range(repeats):
        timed = {}
        for name, action in actions.items():
            start = time.process_time()
            action()
            timed[name] = time.process_time() - start
        rounds.append(timed)
    return rounds


def median_of(rounds: list[dict[str, float]], name: str) -> float:
    return statistics.median(timed[name] for timed in rounds)


def lowest_of(rounds: list[dict[str, float]], name: str) -> float:
    """The least CPU time an action took: what it costs when nothing else on the machine
    slows it (contention only ever adds), the estimate `timeit` recommends."""
    return min(timed[name] for timed in rounds)


def ratios(rounds: list[dict[str, float]], numerator: str, denominator: str) -> list[float]:
    """The ratio of two actions taken within each round, lowest first."""
    return sorted(timed[numerator] / timed[denominator] for timed in rounds)


def median_ratio(rounds: list[dict[str, float]], numerator: str, denominator: str) -> float:
    return statistics.median(ratios(rounds, numerator, denominator))


def rounded_median_ratio(rounds: list[dict[str, float]], numerator: str, denominator: str) -> float:
    """`median_ratio` to two places, as the benches report it."""
    return round(median_ratio(rounds, numerator, denominator), 2)


def lowest_ratio(rounds: list[dict[str, float]], numerator: str, denominator: str) -> float:
    """The ratio of two actions' least times, to two places."""
    return round(lowest_of(rounds, numerator) / lowest_of(rounds, denominator), 2)


def rounded_ratios(rounds: list[dict[str, float]], numerator: str, denominator: str) -> list[float]:
    """Each round's ratio (`ratios`), to two places."""
    return [round(ratio, 2) for ratio in ratios(rounds, numerator, denominator)]


def report(results: dict[str, object], out: Path) -> None:
    """Write the figures to ``out`` (JSON) and print them, one a line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    width = max(len(key) for key in results) + 2
    for key, value in results.items():
        print(f"{key:{width}} {value}")
