"""Derive, don't trust: the audit recomputes what a loss checker's output claims from the
loss files its input receipts bind, and rejects an output that disagrees.

Recomputing a loss comparison costs a read of two small files; believing one
would let a single edited or mis-signed output raise formal_alignment_steps or
back the candidate with repeats that never ran.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gates.core.content_ids import strict_loads
from gates.losses.compare import compare_losses, compare_repeats
from gates.losses.series import LossFileError, LossSeries, read_losses
from gates.receipts.model import ArtifactKind, Receipt

_SIDE_FIGURES = ("reference_steps", "candidate_steps", "reference_rounded", "candidate_rounded")


def _same(claimed: object, derived: object) -> bool:
    if isinstance(claimed, float) and isinstance(derived, float):
        return claimed == derived or (math.isnan(claimed) and math.isnan(derived))
    return claimed == derived


def _series(root: Path, described: object, bound: set[str]) -> LossSeries:
    if not isinstance(described, dict) or not isinstance(described.get("path"), str):
        raise ValueError("a compared series has no path")
    relpath = described["path"]
    if relpath not in bound:
        raise ValueError(f"{relpath} is not a subject of any input receipt")
    series = read_losses(root / relpath, relpath)
    if described.get("series_sha256") != series.digest():
        raise ValueError(f"series_sha256 of {relpath} is not the file's")
    return series


def _disagreements(claimed: dict[str, Any], derived: dict[str, object]) -> list[str]:
    return [
        f"{key}={claimed.get(key)!r}, recomputed {value!r}"
        for key, value in derived.items()
        if not _same(claimed.get(key), value)
    ]


def loss_check_problem(root: Path, receipt: Receipt, inputs: list[Receipt]) -> str:
    """Empty when the loss checker's output agrees with a recomputation, else why not."""
    if receipt.kind is not ArtifactKind.LOSS_CHECK:
        return ""
    bound = {subject.path for source in inputs for subject in source.subjects}
    try:
        output = strict_loads((root / receipt.subjects[0].path).read_bytes())
        if not isinstance(output, dict):
            raise ValueError("output is not a JSON object")
        if output.get("mode") == "pair":
            ref = _series(root, output.get("reference"), bound)
            cand = _series(root, output.get("candidate"), bound)
            required = output.get("required_steps")
            if not isinstance(required, int) or isinstance(required, bool):
                raise ValueError("required_steps is not an integer")
            figures = compare_losses(ref, cand, required).figures()
            derived = {k: v for k, v in figures.items() if k not in _SIDE_FIGURES}
        elif output.get("mode") == "determinism":
            runs = output.get("runs")
            if not isinstance(runs, list) or len(runs) < 2:
                raise ValueError("a determinism output needs two runs or more")
            figures = compare_repeats([_series(root, run, bound) for run in runs]).figures()
            derived = {k: v for k, v in figures.items() if k != "runs"}
        else:
            raise ValueError(f"unknown mode {output.get('mode')!r}")
    except (OSError, ValueError, LossFileError) as exc:
        message = exc.one_line() if isinstance(exc, LossFileError) else str(exc)
        return f"checker output cannot be recomputed: {message}"
    wrong = _disagreements(output, derived)
    if wrong:
        return "checker output disagrees with the recomputation: " + "; ".join(wrong[:3])
    return ""
