"""Comparing two loss series bit by bit (float64), and repeats of one run.

Figures (docs/losses.md): length_match, enough_steps, consistent_steps (steps whose
float64 bits are identical), first_divergence_step, max_diff, max_ulp,
bit_exact_required_steps. -0.0 and 0.0 differ (1 ULP apart here). max_ulp counts units of
the losses' source dtype (ulp_dtype): float32 when every loss is exactly a float32.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from gates.losses.series import LossSeries

_SIGN = 1 << 63
_SIGN32 = 1 << 31
_PREFIX_BLOCK = 1 << 16


def _exactly_float32(values: array[float]) -> bool:
    """Every loss is exactly a float32 (a float32 loss written as float64, as
    `float(loss)` of a float32 tensor gives). Checked a block at a time through float32
    arrays of the standard library: no copy of a whole series, and no numpy import for
    a pair that agrees."""
    for start in range(0, len(values), _PREFIX_BLOCK):
        block = values[start : start + _PREFIX_BLOCK]
        try:
            if array("d", array("f", block)) != block:
                return False
        except OverflowError:  # beyond float32's range
            return False
    return True


def source_dtype(*series: array[float]) -> str:
    """`float32` when every loss of every series is exactly a float32, else `float64`."""
    return "float32" if all(_exactly_float32(values) for values in series) else "float64"


def bit_identical_prefix(a: array[float], b: array[float]) -> int:
    """Length of the longest common prefix whose float64 bits are identical.

    Compared as bytes (memcmp) a block of 65,536 steps at a time, so no copy of
    a whole series is made; the first differing block is binary-searched."""
    length = min(len(a), len(b))
    start = 0
    while start < length:
        end = min(start + _PREFIX_BLOCK, length)
        left, right = a[start:end].tobytes(), b[start:end].tobytes()
        if left != right:
            low, high = 0, end - start  # binary search on byte-slice equality, done in C
            while low < high:
                middle = (low + high + 1) // 2
                if left[: middle * 8] == right[: middle * 8]:
                    low = middle
                else:
                    high = middle - 1
            return start + low
        start = end
    return length


@dataclass(frozen=True)
class LossComparison:
    reference_steps: int
    candidate_steps: int
    required_steps: int
    length_match: bool
    enough_steps: bool
    consistent_steps: int
    first_divergence_step: int | None
    max_diff: float
    max_ulp: int
    bit_exact_required_steps: bool
    ulp_dtype: str
    reference_rounded: bool
    candidate_rounded: bool

    @property
    def bit_comparable(self) -> bool:
        return not (self.reference_rounded or self.candidate_rounded)

    def figures(self) -> dict[str, object]:
        return {
            "reference_steps": self.reference_steps,
            "candidate_steps": self.candidate_steps,
            "required_steps": self.required_steps,
            "length_match": self.length_match,
            "enough_steps": self.enough_steps,
            "consistent_steps": self.consistent_steps,
            "first_divergence_step": self.first_divergence_step,
            "max_diff": self.max_diff,
            "max_ulp": self.max_ulp,
            "ulp_dtype": self.ulp_dtype,
            "bit_exact_required_steps": self.bit_exact_required_steps,
            "reference_rounded": self.reference_rounded,
            "candidate_rounded": self.candidate_rounded,
            "bit_comparable": self.bit_comparable,
        }


def _differing_figures(
    ref: array[float], cand: array[float], start: int, end: int, *, single: bool
) -> tuple[int, float, int]:
    """Over steps start..end-1: how many are bit-identical, max |a-b| and max ULP distance
    of the others. Vectorised (numpy loads only when the series differ)."""
    import numpy as np  # noqa: PLC0415 - only a divergent pair pays for the import

    a = np.frombuffer(ref, dtype=np.float64)[start:end]
    b = np.frombuffer(cand, dtype=np.float64)[start:end]
    a_bits, b_bits = a.view(np.int64), b.view(np.int64)
    differ = a_bits != b_bits
    identical = int(end - start - np.count_nonzero(differ))
    if identical == end - start:
        return identical, 0.0, 0
    a, b, a_bits, b_bits = a[differ], b[differ], a_bits[differ], b_bits[differ]
    with np.errstate(over="ignore", invalid="ignore"):
        max_diff = float(np.max(np.abs(a - b)))
    if single:  # ULPs of the losses' source dtype: float32 losses one ULP apart read 1
        a_bits = a.astype(np.float32).view(np.int32).astype(np.int64)
        b_bits = b.astype(np.float32).view(np.int32).astype(np.int64)
    # Bit patterns mapped to integers in numeric order: positive floats keep their bits,
    # negative ones go below zero, -0.0 to -1, so -0.0 and 0.0 are 1 ULP apart here.
    magnitude = np.int64((_SIGN32 if single else _SIGN) - 1)
    a_ord = np.where(a_bits >= 0, a_bits, -(a_bits & magnitude) - 1)
    b_ord = np.where(b_bits >= 0, b_bits, -(b_bits & magnitude) - 1)
    # |a - b| can exceed int64 (opposite signs); in uint64 it wraps back to the exact value
    high, low = np.maximum(a_ord, b_ord).view(np.uint64), np.minimum(a_ord, b_ord).view(np.uint64)
    max_ulp = int(np.max(high - low))
    return identical, max_diff, max_ulp


def compare_losses(
    reference: LossSeries, candidate: LossSeries, required_steps: int
) -> LossComparison:
    ref, cand = reference.values, candidate.values
    common = min(len(ref), len(cand))
    prefix = bit_identical_prefix(ref, cand)
    dtype = source_dtype(ref, cand)
    consistent, max_diff, max_ulp = prefix, 0.0, 0
    if prefix < common:
        figures = _differing_figures(ref, cand, prefix, common, single=dtype == "float32")
        identical, max_diff, max_ulp = figures
        consistent += identical
    comparable = not (reference.rounded or candidate.rounded)
    enough = min(len(ref), len(cand)) >= required_steps
    return LossComparison(
        reference_steps=len(ref),
        candidate_steps=len(cand),
        required_steps=required_steps,
        length_match=len(ref) == len(cand),
        enough_steps=enough,
        consistent_steps=consistent,
        # a series that ends early (a non-finite loss stops loss.json) diverges where it ends
        first_divergence_step=prefix + 1 if prefix < max(len(ref), len(cand)) else None,
        max_diff=max_diff,
        max_ulp=max_ulp,
        ulp_dtype=dtype,
        bit_exact_required_steps=comparable and enough and prefix >= required_steps,
        reference_rounded=reference.rounded,
        candidate_rounded=candidate.rounded,
    )


@dataclass(frozen=True)
class DeterminismResult:
    runs: int
    steps: int
    deterministic_steps: int
    first_differing_step: int | None
    lengths_match: bool
    rounded: bool
    series_sha256: str | None

    @property
    def deterministic(self) -> bool:
        return self.lengths_match and self.first_differing_step is None and not self.rounded

    def figures(self) -> dict[str, object]:
        return {
            "runs": self.runs,
            "steps": self.steps,
            "deterministic_steps": self.deterministic_steps,
            "first_differing_step": self.first_differing_step,
            "lengths_match": self.lengths_match,
            "rounded": self.rounded,
            "deterministic": self.deterministic,
            "series_sha256": self.series_sha256,
        }


def compare_repeats(series: list[LossSeries]) -> DeterminismResult:
    """Repeats of one side and profile: the bit-identical prefix shared by all of them."""
    first = series[0]
    prefix = min(bit_identical_prefix(first.values, other.values) for other in series[1:])
    shortest = min(len(s) for s in series)
    lengths_match = all(len(s) == len(first) for s in series)
    identical = lengths_match and prefix == len(first)
    return DeterminismResult(
        runs=len(series),
        steps=len(first),
        deterministic_steps=prefix,
        first_differing_step=prefix + 1 if prefix < shortest else None,
        lengths_match=lengths_match,
        rounded=any(s.rounded for s in series),
        series_sha256=first.digest() if identical else None,
    )
