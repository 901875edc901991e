"""Comparing two loss series bit by bit (float64), and repeats of one run.

Figures (docs/losses.md): length_match, enough_steps, consistent_steps (steps whose
float64 bits are identical), first_divergence_step, max_diff, max_ulp,
bit_exact_required_steps. -0.0 and 0.0 differ (1 ULP apart here). max_ulp counts units of
the losses' source dtype (ulp_dtype): float32 when every loss is exactly a float32.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from gates.losses import LossSeries

_SIGN = 1 << 63


def _ordered(bits: int) -> int:
    """Map float64 bit patterns (as signed int64) to integers in numeric order.

    Positive floats keep their bits; negative ones go below zero, -0.0 to -1,
    so the ULP distance of -0.0 and 0.0 is 1: they are different values here.
    """
    return bits if bits >= 0 else -(bits & (_SIGN - 1)) - 1


def _as_int64(values: array[float]) -> array[int]:
    ints = array("q")
    ints.frombytes(values.tobytes())
    return ints


_SIGN32 = 1 << 31


def _ordered32(bits: int) -> int:
    """`_ordered` for float32 bit patterns (as signed int32)."""
    return bits if bits >= 0 else -(bits & (_SIGN32 - 1)) - 1


def _as_float32(values: array[float]) -> np.ndarray | None:
    """The losses as float32 when every one is exactly a float32 (a float32 loss written
    as float64, as `float(loss)` of a float32 tensor gives), else None."""
    doubles = np.frombuffer(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        singles = doubles.astype(np.float32)
    return singles if np.array_equal(singles, doubles) else None


def source_dtype(*series: array[float]) -> str:
    """`float32` when every loss of every series is exactly a float32, else `float64`."""
    return "float32" if all(_as_float32(values) is not None for values in series) else "float64"


def _int32_bits(singles: np.ndarray) -> array[int]:
    ints = array("i")
    ints.frombytes(singles.tobytes())
    return ints


def bit_identical_prefix(a: array[float], b: array[float]) -> int:
    """Length of the longest common prefix whose float64 bits are identical."""
    length = min(len(a), len(b))
    left, right = a.tobytes()[: length * 8], b.tobytes()[: length * 8]
    if left == right:
        return length
    low, high = 0, length  # binary search on byte-slice equality, done in C
    while low < high:
        middle = (low + high + 1) // 2
        if left[: middle * 8] == right[: middle * 8]:
            low = middle
        else:
            high = middle - 1
    return low


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


def compare_losses(
    reference: LossSeries, candidate: LossSeries, required_steps: int
) -> LossComparison:
    ref, cand = reference.values, candidate.values
    common = min(len(ref), len(cand))
    prefix = bit_identical_prefix(ref, cand)
    ref_bits, cand_bits = _as_int64(ref), _as_int64(cand)
    ref32, cand32 = _as_float32(ref), _as_float32(cand)
    dtype = "float64"
    ulp_bits, order = (ref_bits, cand_bits), _ordered
    if ref32 is not None and cand32 is not None:
        dtype = "float32"
        ulp_bits, order = (_int32_bits(ref32), _int32_bits(cand32)), _ordered32
    consistent = 0
    max_diff = 0.0
    max_ulp = 0
    for index in range(common):
        if ref_bits[index] == cand_bits[index]:
            consistent += 1
            continue
        max_diff = max(max_diff, abs(ref[index] - cand[index]))
        max_ulp = max(max_ulp, abs(order(ulp_bits[0][index]) - order(ulp_bits[1][index])))
    comparable = not (reference.rounded or candidate.rounded)
    enough = min(len(ref), len(cand)) >= required_steps
    return LossComparison(
        reference_steps=len(ref),
        candidate_steps=len(cand),
        required_steps=required_steps,
        length_match=len(ref) == len(cand),
        enough_steps=enough,
        consistent_steps=consistent,
        first_divergence_step=prefix + 1 if prefix < common else None,
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
