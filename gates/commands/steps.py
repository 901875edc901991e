"""`gates steps`: formal_alignment_steps = N / required, why, and the per-step ledger."""

from __future__ import annotations

import json
import struct

from gates import exitcodes
from gates.alignment import Alignment
from gates.commands import Echo
from gates.engine import run_audit
from gates.tensors.progress import Progress, tensor_progress
from gates.workspace import Workspace


def float_bits(value: float) -> str:
    """The float64 bit pattern, big-endian hex: 0x4027a0a3e0000000."""
    return "0x" + struct.pack(">d", value).hex()


def ledger(alignment: Alignment, limit: int) -> list[dict[str, object]]:
    """Step by step, the pair that sets the number: values, bit patterns, equal or not."""
    pair = alignment.chosen
    if pair is None:
        return []
    ref, cand = pair.reference_series.values, pair.candidate_series.values
    count = max(len(ref), len(cand))
    rows: list[dict[str, object]] = []
    for index in range(count if limit <= 0 else min(count, limit)):
        a = ref[index] if index < len(ref) else None
        b = cand[index] if index < len(cand) else None
        rows.append(
            {
                "step": index + 1,
                "reference": a,
                "reference_bits": float_bits(a) if a is not None else None,
                "candidate": b,
                "candidate_bits": float_bits(b) if b is not None else None,
                "equal": a is not None and b is not None and float_bits(a) == float_bits(b),
            }
        )
    return rows


def tensor_object(progress: Progress | None) -> dict[str, object] | None:
    if progress is None:
        return None
    return {
        "tensor_aligned_steps": progress.aligned,
        "required_steps": progress.required,
        "discharged": progress.discharged,
        "detail": progress.detail,
    }


def tensor_line(progress: Progress | None) -> str | None:
    if progress is None:
        return None
    detail = f" ({progress.detail})" if progress.detail else ""
    return f"tensor_aligned_steps = {progress.aligned} / {progress.required}{detail}"


def steps_object(
    alignment: Alignment, limit: int, progress: Progress | None = None
) -> dict[str, object]:
    pair = alignment.chosen
    return {
        "formal_alignment_steps": alignment.steps,
        "required_steps": alignment.required,
        "tensor_alignment": tensor_object(progress),
        "why": alignment.why,
        "reference": pair.reference.path if pair else None,
        "candidate": pair.candidate.path if pair else None,
        "ledger": ledger(alignment, limit),
    }


def render_text(alignment: Alignment, limit: int, progress: Progress | None = None) -> str:
    lines = [
        f"formal_alignment_steps = {alignment.steps} / {alignment.required}",
        f"why: {alignment.why}",
    ]
    if alignment.replay:
        lines.append(alignment.replay)
    tensors = tensor_line(progress)
    if tensors:
        lines.append(tensors)
    rows = ledger(alignment, limit)
    if rows:
        lines.append("")
        lines.append(
            f"{'STEP':>6}  {'REFERENCE':<24} {'BITS':<18}  {'CANDIDATE':<24} {'BITS':<18}  EQUAL"
        )
        for row in rows:
            lines.append(
                f"{row['step']:>6}  {_cell(row['reference'])} {row['reference_bits'] or '-':<18}  "
                f"{_cell(row['candidate'])} {row['candidate_bits'] or '-':<18}  "
                f"{'yes' if row['equal'] else 'no'}"
            )
    return "\n".join(lines)


def _cell(value: object) -> str:
    return f"{value!r:<24}" if value is not None else f"{'-':<24}"


def steps(workspace: Workspace, *, limit: int | None, as_json: bool, echo: Echo) -> int:
    """Exit 0 when formal_alignment_steps reaches the required steps, else 1."""
    result = run_audit(workspace)
    alignment = result.alignment
    progress = tensor_progress(result.contracts)
    rows = alignment.required if limit is None else limit
    if as_json:
        echo(json.dumps(steps_object(alignment, rows, progress), indent=2))
    else:
        echo(render_text(alignment, rows, progress))
    met = alignment.required > 0 and alignment.steps >= alignment.required
    return exitcodes.OK if met else exitcodes.BLOCKED
