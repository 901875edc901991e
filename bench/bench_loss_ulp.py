"""Benchmark what measuring ULPs in the losses' source dtype costs `gates check loss`.

Two --steps float32 loss series (written as float64, as `float(loss)` records them), the
second half one float32 ULP apart. The added work, finding the source dtype and the float32
bit patterns, is timed against the whole comparison (`compare_losses`) in the same process:
the ratio is what the float32 ULPs add. Medians of --repeats.

Usage: python bench/bench_loss_ulp.py [--steps 10000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
from array import array

import numpy as np
from common import OUT, median_seconds, report

from gates.losses.compare import _as_float32, _int32_bits, compare_losses
from gates.losses.series import LossSeries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    reference = rng.random(args.steps, dtype=np.float32) + 1
    candidate = reference.copy()
    half = args.steps // 2
    candidate[half:] = np.nextafter(candidate[half:], np.float32(9))

    def series(values: np.ndarray) -> LossSeries:
        return LossSeries("bench", array("d", values.astype(np.float64).tobytes()), False)

    ref, cand = series(reference), series(candidate)
    comparison = compare_losses(ref, cand, 100)
    assert (comparison.ulp_dtype, comparison.max_ulp) == ("float32", 1)

    def added() -> None:
        for values in (ref.values, cand.values):
            singles = _as_float32(values)
            assert singles is not None
            _int32_bits(singles)

    whole = median_seconds(lambda: compare_losses(ref, cand, 100), args.repeats)
    extra = median_seconds(added, args.repeats)
    report(
        {
            "steps": args.steps,
            "compare_losses_s": round(whole, 3),
            "float32_ulp_work_s": round(extra, 3),
            "float32_ulp_share": round(extra / whole, 4),
        },
        OUT / "loss_ulp.json",
    )


if __name__ == "__main__":
    main()
