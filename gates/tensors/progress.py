"""Tensor-level progress: the figures the tensor-alignment contract decides
(`TensorFigures` on its result) and the one line its criterion shows,
`tensor_aligned_steps = N / M; ...`. `gates steps` and the status block read the figures,
never the line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from gates.core.criteria import Criterion, DischargeStatus

if TYPE_CHECKING:
    from gates.tensors.compare import Comparison

PREFIX = "tensor_aligned_steps"
CONTRACT_CHECK = "tensor_alignment"


@dataclass(frozen=True)
class TensorFigures:
    """What the tensor-alignment contract decided: ``aligned`` of the ``required`` steps are
    bit-identical at every compared tensor, from the first; ``detail`` says why not (or what
    was compared)."""

    aligned: int
    required: int
    detail: str
    #: the comparison behind the figures, for the HTML report's tensor pages (None where
    #: the dumps could not be compared); never part of the verdict, never serialized
    comparison: Comparison | None = field(default=None, compare=False, repr=False)

    def line(self) -> str:
        head = f"{PREFIX} = {self.aligned} / {self.required}"
        return f"{head}; {self.detail}" if self.detail else head


def aligned_prefix(comparison: Comparison, required: Iterable[int]) -> int:
    """How many required steps, from the first, are equal at every compared tensor."""
    bad = {t.step for t in comparison.tallies if t.unequal or t.missing}
    counted = {t.step for t in comparison.tallies if t.compared}
    prefix = 0
    for step in required:
        if step in bad or step not in counted:
            break
        prefix += 1
    return prefix


def tensor_figures(comparison: Comparison, required: range) -> TensorFigures:
    prefix = aligned_prefix(comparison, required)
    return TensorFigures(prefix, len(required), _why(comparison), comparison)


def _why(comparison: Comparison) -> str:
    first = comparison.first
    if first is not None:
        names = (
            f"{first.reference_at_index()} -> {first.candidate}"
            if first.reference_at_index() != first.candidate
            else first.candidate
        )
        where = f"element {first.index}" if first.index is not None else first.reason
        return f"first divergence: step {first.step} {first.phase} {names} ({where})"
    if comparison.problems:
        more = f" (+{len(comparison.problems) - 1} more)" if len(comparison.problems) > 1 else ""
        return f"{comparison.problems[0]}{more}"
    totals = comparison.totals()
    if comparison.missing:
        return f"{totals['missing']} missing: {comparison.missing[0]}"
    return f"{totals['compared']} tensors compared, all bit-identical" + _declared(comparison)


def _declared(comparison: Comparison) -> str:
    """What the declarations set aside, with the first reason: never counted equal."""
    shown = ""
    for items, what in (
        (comparison.not_comparable, "not comparable"),
        (comparison.candidate_only, "candidate only"),
    ):
        if items:
            shown += f"; {len(items)} {what} (declared: {items[0]})"
    return shown


@dataclass(frozen=True)
class Progress:
    aligned: int
    required: int
    detail: str
    discharged: bool


class _Spec(Protocol):
    @property
    def check(self) -> str: ...


class ContractOutcome(Protocol):
    """What the progress reads of a contract's result (the contracts stage sits above)."""

    @property
    def spec(self) -> _Spec: ...
    @property
    def status(self) -> DischargeStatus: ...
    @property
    def criteria(self) -> tuple[Criterion, ...]: ...
    @property
    def first_unmet(self) -> Criterion | None: ...
    @property
    def figures(self) -> object: ...


def tensor_progress(contracts: Iterable[ContractOutcome]) -> Progress | None:
    """The tensor-alignment contract's progress in an audit, if it has one."""
    for contract in contracts:
        if contract.spec.check != CONTRACT_CHECK:
            continue
        discharged = contract.status is DischargeStatus.DISCHARGED
        figures = contract.figures
        if isinstance(figures, TensorFigures):
            return Progress(figures.aligned, figures.required, figures.detail, discharged)
        unmet = contract.first_unmet
        return Progress(0, 0, f"{unmet.name}: {unmet.detail}" if unmet else "", discharged)
    return None
