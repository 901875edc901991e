"""Check `tensor_inventory`: both checkpoints valid and clean, no structural difference after
the naming rules, and content equal through them where the contract asks for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError

from gates.checkpoints.check import CheckpointReport, check_checkpoint, compare_pair
from gates.checkpoints.rulefile import RULE_KEYS, ruleset_from_params
from gates.contracts.model import Criterion, EvaluationContext, EvaluationError
from gates.errors import ConfigError, UnsafePathError
from gates.hashing import StatCache, cache_file
from gates.paths import check_relpath

if TYPE_CHECKING:
    from gates.checkpoints.content import ContentComparison
    from gates.checkpoints.survey import Survey

CHECK = "tensor_inventory"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str = "results/torch/checkpoint"
    candidate: str = "results/paddle/checkpoint"
    require_hash_match: StrictBool = False


def _parse(raw: dict[str, Any]) -> Params:
    try:
        params = Params.model_validate({k: v for k, v in raw.items() if k not in RULE_KEYS})
        check_relpath(params.reference, what="params.reference")
        check_relpath(params.candidate, what="params.candidate")
    except ValidationError as exc:
        first = exc.errors()[0]
        raise EvaluationError(
            f"params.{'.'.join(map(str, first['loc']))}: {first['msg']}"
        ) from None
    except UnsafePathError as exc:
        raise EvaluationError(exc.message) from None
    return params


def _side_criteria(side: str, report: CheckpointReport) -> list[Criterion]:
    problems = report.checkpoint.problems
    findings = [f"{report.path}/{f.line()}" for f in report.hygiene]
    if not report.checkpoint.folder.is_dir():
        findings = [f"{report.path}: no checkpoint folder to inspect"]
    return [
        Criterion(
            f"{side}_valid",
            not problems,
            "; ".join(f"{report.path}: {p}" for p in problems[:5])
            or f"{report.path}: {len(report.checkpoint.tensors)} tensors, valid",
        ),
        Criterion(
            f"{side}_hygiene",
            not findings,
            "; ".join(findings[:5]) or "regular files only",
        ),
    ]


def _structure(found: Survey) -> Criterion:
    counts = ", ".join(f"{n} {klass}" for klass, n in found.counts().items())
    summary = f"{len(found.differences)} differences: {counts}"
    problems = [*found.rule_problems]
    problems += [
        f"{d.reference[0]} {d.detail}" if d.reference else d.detail for d in found.structural
    ]
    notes = "".join(f"; note: {note}" for note in found.notes)
    if not problems:
        detail = f"{found.reference_count} vs {found.candidate_count} tensors; {summary}{notes}"
        return Criterion("no_structural_difference", True, detail)
    detail = "; ".join(problems[:5]) + f" ({summary}){notes}"
    return Criterion("no_structural_difference", False, detail)


def _hash_match(content: ContentComparison | None) -> Criterion:
    if content is not None and content.hash_match:
        return Criterion("hash_match", True, "content equal through the naming rules")
    if content is None:
        return Criterion("hash_match", False, "not comparable: the checkpoints were not hashed")
    problems = [*content.problems, *(f"{name} differs" for name in content.unequal)]
    detail = "; ".join(problems[:5]) or "structural differences remain"
    return Criterion("hash_match", False, detail)


def evaluate(context: EvaluationContext, raw: dict[str, Any]) -> list[Criterion]:
    params = _parse(raw)
    try:
        ruleset = ruleset_from_params(raw, "tensor-inventory contract")
    except ConfigError as exc:
        raise EvaluationError(exc.message) from None
    root = context.workspace.root
    cache = StatCache(cache_file(root))
    hashing = params.require_hash_match
    reference = check_checkpoint(root, params.reference, cache=cache, hash_contents=hashing)
    candidate = check_checkpoint(root, params.candidate, cache=cache, hash_contents=hashing)
    cache.save()
    criteria = _side_criteria("reference", reference) + _side_criteria("candidate", candidate)
    if not (reference.valid and candidate.valid):
        not_comparable = "not comparable until both checkpoints are valid"
        criteria.append(Criterion("no_structural_difference", False, not_comparable))
        if hashing:
            criteria.append(Criterion("hash_match", False, not_comparable))
        return criteria
    pair = compare_pair(reference, candidate, ruleset)
    criteria.append(_structure(pair.survey))
    if hashing:
        criteria.append(_hash_match(pair.content))
    return criteria
