"""Contract files and the results of evaluating them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from gates.core.criteria import Criterion, DischargeStatus
from gates.core.hashing import StatCache
from gates.core.progress import QUIET, Progress
from gates.freeze.check import FreezeReport
from gates.naming.rules import RuleSet
from gates.policy.contract_files import ContractSpec
from gates.policy.in_force import Policy
from gates.policy.waivers import LoadedWaiver
from gates.receipts.binding import DeclaredEntrypoint
from gates.receipts.evidence import Evidence
from gates.receipts.verify import Judgement
from gates.sandbox import SandboxHost
from gates.tensors.progress import TensorFigures
from gates.workspace.repository import Workspace

if TYPE_CHECKING:  # only for the annotation: the alignment module pulls in the loss readers
    from gates.receipts.alignment import Alignment


@dataclass(frozen=True)
class ResultsFigures:
    """What the results contract decided, for the reporters: whether the candidate's formal
    loss is backed by identical repeats and whether a checkpoint matched its reference.

    ``hash_match`` is the recomputed criterion where the contract asks for it
    (`checkpoint_hash_equal`); otherwise the claim of a counting `checkpoint_check` output
    of its evidence, which the contract then does not recompute.
    """

    repeats_identical: bool | None  # None: the contract asks for no repeats
    hash_match: bool


#: The typed figures of one contract's result, by check (None: the check has no figures).
Figures = TensorFigures | ResultsFigures | None


@dataclass(frozen=True)
class Evaluation:
    """An evaluator's answer: its criteria and the figures it decided."""

    criteria: list[Criterion]
    figures: Figures = None


@dataclass(frozen=True)
class ContractResult:
    spec: ContractSpec
    source: Path
    status: DischargeStatus
    criteria: tuple[Criterion, ...]
    evidence: tuple[Evidence, ...] = ()
    waivers: tuple[LoadedWaiver, ...] = ()
    figures: Figures = None

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


@dataclass(frozen=True)
class ParsedParams:
    """A contract's params parsed once for the command (the results contract's, by
    `AuditInputs`), with the table they were parsed from: an evaluator uses ``parsed`` only
    when it is handed that same table, and parses any other itself."""

    raw: Mapping[str, Any]
    parsed: BaseModel


@dataclass(frozen=True)
class EvaluationContext:
    """Everything an evaluator may look at; evaluators never read git themselves, nor
    resolve the policy: the audit hands it in (``policy``), with the command's one stat
    cache, the declared entrypoints it has already judged and the results contract's
    params it has already parsed."""

    workspace: Workspace
    freeze: FreezeReport
    receipts: tuple[Judgement, ...]
    evidence: tuple[Evidence, ...] = field(default=())
    alignment: Alignment | None = None
    policy: Policy | None = None
    cache: StatCache | None = None
    progress: Progress = QUIET
    sandbox: SandboxHost = field(default_factory=SandboxHost)
    entrypoints: tuple[DeclaredEntrypoint, ...] | None = None
    results_params: ParsedParams | None = None

    def ruleset(self) -> RuleSet:
        """The naming rules of the policy in force (none without a policy)."""
        return self.policy.ruleset()[0] if self.policy is not None else RuleSet()

    def stat_cache(self) -> StatCache:
        """The command's stat cache (none, for a context built without it)."""
        return self.cache if self.cache is not None else StatCache(None)


class EvaluationError(Exception):
    """The evaluator could not judge the contract (bad params, unreadable input)."""
