"""`gates steps`: formal_alignment_steps = N / required, why, and the per-step ledger."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.json_writer import indented_json
from gates.engine.audit import run_audit
from gates.engine.inputs import AuditInputs
from gates.receipts.alignment import Alignment
from gates.receipts.verify import Status
from gates.tensors.progress import Progress, tensor_progress


def float_bits(value: float) -> str:
    """The float64 bit pattern, big-endian hex: 0x4027a0a3e0000000."""
    return "0x" + struct.pack(">d", value).hex()


def _row(ref: Sequence[float], cand: Sequence[float], index: int) -> dict[str, object]:
    a = ref[index] if index < len(ref) else None
    b = cand[index] if index < len(cand) else None
    return {
        "step": index + 1,
        "reference": a,
        "reference_bits": float_bits(a) if a is not None else None,
        "candidate": b,
        "candidate_bits": float_bits(b) if b is not None else None,
        "equal": a is not None and b is not None and float_bits(a) == float_bits(b),
    }


def ledger(alignment: Alignment, limit: int) -> list[dict[str, object]]:
    """Step by step, the pair that sets the number: values, bit patterns, equal or not."""
    pair = alignment.chosen
    if pair is None:
        return []
    ref, cand = pair.reference_series.values, pair.candidate_series.values
    count = max(len(ref), len(cand))
    return [_row(ref, cand, index) for index in range(count if limit <= 0 else min(count, limit))]


def first_divergence(alignment: Alignment) -> dict[str, object] | None:
    """The first step whose bits differ (or that one side lacks), with both bit patterns."""
    pair = alignment.chosen
    if pair is None:
        return None
    ref, cand = pair.reference_series.values, pair.candidate_series.values
    if pair.prefix >= max(len(ref), len(cand)):
        return None
    return _row(ref, cand, pair.prefix)


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
    alignment: Alignment,
    limit: int,
    progress: Progress | None = None,
    rejected: Sequence[str] = (),
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
        "first_divergence": first_divergence(alignment),
        "rejected": list(rejected),
    }


def render_text(
    alignment: Alignment,
    limit: int,
    progress: Progress | None = None,
    rejected: Sequence[str] = (),
) -> str:
    lines = [
        f"formal_alignment_steps = {alignment.steps} / {alignment.required}",
        f"why: {alignment.why}",
    ]
    if alignment.replay:
        lines.append(alignment.replay.sentence())
    if rejected:
        lines.append(
            f"cannot stand: {len(rejected)} receipt(s) rejected ({', '.join(rejected[:5])}); "
            "`gates audit` says why"
        )
    tensors = tensor_line(progress)
    if tensors:
        lines.append(tensors)
    rows = ledger(alignment, limit)
    if rows:
        lines.append("")
        lines.append(
            f"{'STEP':>6}  {'REFERENCE':<24} {'BITS':<18}  {'CANDIDATE':<24} {'BITS':<18}  EQUAL"
        )
        lines += [_text_row(row) for row in rows]
        diverged = first_divergence(alignment)
        if diverged is not None and diverged not in rows:
            lines.append(f"{'...':>6}")
            lines.append(_text_row(diverged) + "  (first divergence)")
        elif diverged is not None:
            lines.append(f"first divergence: step {diverged['step']}")
    return "\n".join(lines)


def _text_row(row: dict[str, object]) -> str:
    return (
        f"{row['step']:>6}  {_cell(row['reference'])} {row['reference_bits'] or '-':<18}  "
        f"{_cell(row['candidate'])} {row['candidate_bits'] or '-':<18}  "
        f"{'yes' if row['equal'] else 'no'}"
    )


def _cell(value: object) -> str:
    return f"{value!r:<24}" if value is not None else f"{'-':<24}"


@dataclass(frozen=True)
class StepsReport:
    """What `gates steps` found: the alignment, the tensor progress, the rejected receipts,
    and how many ledger rows to show."""

    alignment: Alignment
    rows: int
    progress: Progress | None
    rejected: tuple[str, ...]

    @property
    def met(self) -> bool:
        """formal_alignment_steps reaches the required steps and no receipt is rejected."""
        reached = 0 < self.alignment.required <= self.alignment.steps
        return reached and not self.rejected


def steps_report(inputs: AuditInputs, limit: int | None) -> StepsReport:
    result = run_audit(inputs)
    alignment = result.alignment
    rows = alignment.required if limit is None else limit
    rejected = tuple(j.path for j in result.receipts if j.status is Status.REJECTED)
    return StepsReport(alignment, rows, tensor_progress(result.contracts), rejected)


#: --format -> the renderer of a StepsReport
RENDERERS: dict[str, Callable[[StepsReport], str]] = {
    "text": lambda r: render_text(r.alignment, r.rows, r.progress, r.rejected),
    "json": lambda r: indented_json(steps_object(r.alignment, r.rows, r.progress, r.rejected)),
}


def steps(inputs: AuditInputs, *, limit: int | None, out: Output) -> int:
    """Exit 0 when formal_alignment_steps reaches the required steps and no receipt is
    rejected (a rejected input may be what the count should have used), else 1."""
    report = steps_report(inputs, limit)
    out.render(RENDERERS, report)
    return exitcodes.OK if report.met else exitcodes.BLOCKED
