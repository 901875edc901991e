"""Tensor-level progress in one line, written by the contract and read back by `gates steps`
and the status block: `tensor_aligned_steps = N / M; ...`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gates.criteria import Criterion, DischargeStatus

if TYPE_CHECKING:
    from gates.tensors.compare import Comparison

PREFIX = "tensor_aligned_steps"
_LINE = re.compile(rf"^{PREFIX} = (\d+) / (\d+)(?:; (.*))?$")
CONTRACT_CHECK = "tensor_alignment"
CRITERION = "tensors_equal"


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


def progress_detail(comparison: Comparison, required: range) -> str:
    prefix = aligned_prefix(comparison, required)
    totals = comparison.totals()
    head = f"{PREFIX} = {prefix} / {len(required)}"
    first = comparison.first
    if first is not None:
        names = (
            f"{first.reference_at_index()} -> {first.candidate}"
            if first.reference_at_index() != first.candidate
            else first.candidate
        )
        where = f"element {first.index}" if first.index is not None else first.reason
        return f"{head}; first divergence: step {first.step} {first.phase} {names} ({where})"
    if comparison.problems:
        more = f" (+{len(comparison.problems) - 1} more)" if len(comparison.problems) > 1 else ""
        return f"{head}; {comparison.problems[0]}{more}"
    if comparison.missing:
        return f"{head}; {totals['missing']} missing: {comparison.missing[0]}"
    return f"{head}; {totals['compared']} tensors compared, all bit-identical"


@dataclass(frozen=True)
class Progress:
    aligned: int
    required: int
    detail: str
    discharged: bool


def read_progress(detail: str, discharged: bool) -> Progress | None:
    found = _LINE.match(detail)
    if found is None:
        return None
    return Progress(int(found.group(1)), int(found.group(2)), found.group(3) or "", discharged)


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


def tensor_progress(contracts: Iterable[ContractOutcome]) -> Progress | None:
    """The tensor-alignment contract's progress in an audit, if it has one."""
    for contract in contracts:
        if contract.spec.check != CONTRACT_CHECK:
            continue
        discharged = contract.status is DischargeStatus.DISCHARGED
        for criterion in contract.criteria:
            if criterion.name == CRITERION:
                found = read_progress(criterion.detail, discharged)
                if found is not None:
                    return found
                return Progress(0, 0, criterion.detail, discharged)
        unmet = contract.first_unmet
        return Progress(0, 0, f"{unmet.name}: {unmet.detail}" if unmet else "", discharged)
    return None
