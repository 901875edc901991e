"""Check `tensor_alignment`: the reference and candidate tensor dumps, each bound by a
counting receipt, bit-identical through the naming rules at every phase of the required
steps; otherwise the (step, phase, tensor) that first differs.

The comparison is recomputed from the dumps at every audit (derive, don't trust): a
tensor_check output is never taken on its word.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from gates.contracts.model import Evaluation, EvaluationContext, EvaluationError
from gates.core.criteria import Criterion
from gates.core.errors import ConfigError, GatesError, UnsafePathError
from gates.core.paths import check_relpath, resolve_inside
from gates.core.validation import first_error
from gates.naming.rulefile import RULE_KEYS, rules_or
from gates.receipts.model import ArtifactKind
from gates.tensors.compare import Comparison, Selection, compare_dumps, parse_phases
from gates.tensors.layout import ORDER_FILE, PHASES, TENSORS_FOLDER, StepRange, open_dump
from gates.tensors.progress import TensorFigures, tensor_figures

CHECK = "tensor_alignment"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str = "results/torch"
    candidate: str = "results/paddle"
    steps: str = "1:1"
    phases: tuple[str, ...] = PHASES
    slots: dict[str, str] | None = None


def _parse(raw: dict[str, Any]) -> tuple[Params, StepRange, tuple[str, ...]]:
    try:
        params = Params.model_validate({k: v for k, v in raw.items() if k not in RULE_KEYS})
        check_relpath(params.reference, what="params.reference")
        check_relpath(params.candidate, what="params.candidate")
        steps = StepRange.parse(params.steps)
        phases = parse_phases(params.phases)
    except ValidationError as exc:
        first = first_error(exc)
        raise EvaluationError(f"params.{first.key}: {first.message}") from None
    except UnsafePathError as exc:
        raise EvaluationError(exc.message) from None
    except ValueError as exc:
        raise EvaluationError(f"params: {exc}") from None
    if steps.first is None or steps.last is None:
        raise EvaluationError("params.steps: give both ends of the required steps (A:B)")
    return params, steps, phases


def _dump_criterion(side: str, folder: str, context: EvaluationContext) -> Criterion:
    prefix = f"{folder.rstrip('/')}/{TENSORS_FOLDER}/"
    mine = [
        e
        for e in context.evidence
        if e.judgement.receipt is not None
        and e.judgement.receipt.kind is ArtifactKind.TENSOR_DUMP
        and any(
            s.path.startswith(prefix) and s.path.endswith(ORDER_FILE)
            for s in e.judgement.receipt.subjects
        )
    ]
    counting = [e for e in mine if e.counts]
    name = f"{side}_dump_formal"
    if counting:
        path = counting[0].judgement.path
        return Criterion(name, True, f"{path} binds {prefix}", files=(path,), key=side)
    if mine:
        path = mine[0].judgement.path
        return Criterion(name, False, f"{path}: {mine[0].reason}", files=(path,), key=side)
    return Criterion(name, False, f"no tensor_dump receipt binds {prefix}", key=side)


def _equal(comparison: Comparison, steps: StepRange) -> tuple[Criterion, TensorFigures]:
    figures = tensor_figures(comparison, range(steps.first or 0, (steps.last or 0) + 1))
    return Criterion("tensors_equal", comparison.aligned, figures.line(), key="steps"), figures


def evaluate(context: EvaluationContext, raw: dict[str, Any]) -> Evaluation:
    params, steps, phases = _parse(raw)
    try:
        ruleset = rules_or(raw, "tensor-alignment contract", context.ruleset())
    except ConfigError as exc:
        raise EvaluationError(exc.message) from None
    root = context.workspace.root
    criteria = [
        _dump_criterion("reference", params.reference, context),
        _dump_criterion("candidate", params.candidate, context),
    ]
    try:
        reference = open_dump(resolve_inside(root, params.reference, what="dump"), params.reference)
        candidate = open_dump(resolve_inside(root, params.candidate, what="dump"), params.candidate)
        comparison = compare_dumps(
            reference,
            candidate,
            ruleset,
            Selection(steps, phases, phases_required=True),
            slots=params.slots,
            progress=context.progress,
        )
    except GatesError as exc:
        count = (steps.last or 0) - (steps.first or 0) + 1
        figures = TensorFigures(0, count, f"not comparable: {exc.one_line()}")
        criteria.append(Criterion("tensors_equal", False, figures.line(), key="steps"))
        return Evaluation(criteria, figures)
    criterion, figures = _equal(comparison, steps)
    return Evaluation([*criteria, criterion], figures)
