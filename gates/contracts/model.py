"""Contract files and the results of evaluating them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints

from gates.freeze.check import FreezeReport
from gates.policy.waivers import LoadedWaiver
from gates.receipts.evidence import Evidence
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Judgement
from gates.workspace import Workspace

if TYPE_CHECKING:  # only for the annotation: the alignment module pulls in the loss readers
    from gates.engine.alignment import Alignment


ContractId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*\.[a-z0-9][a-z0-9.-]*$")]


class ContractSpec(BaseModel):
    """One contract file: what is checked, whether it blocks, and how to discharge it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: ContractId
    title: Annotated[str, StringConstraints(min_length=1)]
    check: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
    blocking: StrictBool = True
    discharge: Annotated[str, StringConstraints(min_length=1)]
    remediation: tuple[str, ...] = Field(
        default=(), description="commands or steps that would discharge the contract"
    )
    evidence_kinds: tuple[ArtifactKind, ...] = ()
    profile: dict[str, str | int | bool] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)


class DischargeStatus(StrEnum):
    DISCHARGED = "discharged"
    DISCHARGING = "discharging"
    UNDISCHARGED = "undischarged"
    ERROR = "error"


@dataclass(frozen=True)
class Criterion:
    """One yes/no finding of a contract, with a one-line detail either way."""

    name: str
    met: bool
    detail: str
    #: The typed figures behind the finding, for reporters (the tensor comparison); never
    #: part of the verdict, never serialized.
    data: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ContractResult:
    spec: ContractSpec
    source: Path
    status: DischargeStatus
    criteria: tuple[Criterion, ...]
    evidence: tuple[Evidence, ...] = ()
    waivers: tuple[LoadedWaiver, ...] = ()

    @property
    def first_unmet(self) -> Criterion | None:
        return next((c for c in self.criteria if not c.met), None)

    def waived(self, today: dt.date) -> bool:
        """An active waiver covers the contract, or every unmet criterion of it."""
        active = [w.waiver for w in self.waivers if w.active(today)]
        if any(w.criterion is None for w in active):
            return True
        covered = {w.criterion for w in active}
        unmet = [c.name for c in self.criteria if not c.met]
        return bool(unmet) and all(name in covered for name in unmet)

    def blocks(self, today: dt.date) -> bool:
        return (
            self.spec.blocking
            and self.status is not DischargeStatus.DISCHARGED
            and not self.waived(today)
        )


def discharge_status(criteria: tuple[Criterion, ...]) -> DischargeStatus:
    """All met: discharged; some: discharging; none: undischarged; no criteria: error."""
    if not criteria:
        return DischargeStatus.ERROR
    met = sum(criterion.met for criterion in criteria)
    if met == len(criteria):
        return DischargeStatus.DISCHARGED
    return DischargeStatus.DISCHARGING if met else DischargeStatus.UNDISCHARGED


@dataclass(frozen=True)
class EvaluationContext:
    """Everything an evaluator may look at; evaluators never read git themselves."""

    workspace: Workspace
    freeze: FreezeReport
    receipts: tuple[Judgement, ...]
    evidence: tuple[Evidence, ...] = field(default=())
    alignment: Alignment | None = None


class EvaluationError(Exception):
    """The evaluator could not judge the contract (bad params, unreadable input)."""
