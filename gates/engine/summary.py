"""An audit's result in a few figures: what the VSA carries and what a history note records.

Read from the audit's typed results (never from its text): the verdict, the formal and
tensor-level step counts, each contract's status, the commit and the policy in force.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, NonNegativeInt

if TYPE_CHECKING:
    from gates.engine.audit import AuditResult


class ContractStatus(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    blocking: bool
    status: Literal["discharged", "discharging", "undischarged", "error"]


class PolicyRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    protected: bool
    ref: str | None
    commit: str | None


class AuditSummary(BaseModel):
    """One audit, as others may rely on it once it is signed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    commit: str | None
    verdict: Literal["pass", "blocked"]
    formal_alignment_steps: NonNegativeInt
    required_steps: NonNegativeInt
    tensor_aligned_steps: NonNegativeInt | None
    tensor_required_steps: NonNegativeInt | None = None
    contracts: tuple[ContractStatus, ...]
    policy: PolicyRef

    def step_aligned(self, step: int) -> bool:
        """Step N (from 1) is bit-exact when the formal prefix reaches it."""
        return self.formal_alignment_steps >= step


def summarize(result: AuditResult) -> AuditSummary:
    from gates.tensors.progress import tensor_progress  # noqa: PLC0415  (history reads only)

    progress = tensor_progress(result.contracts)
    policy = result.policy
    return AuditSummary(
        commit=result.freeze.head,
        verdict=result.verdict,
        formal_alignment_steps=result.formal_alignment_steps,
        required_steps=result.required_steps,
        tensor_aligned_steps=progress.aligned if progress is not None else None,
        tensor_required_steps=progress.required if progress is not None else None,
        contracts=tuple(
            ContractStatus(id=c.spec.id, blocking=c.spec.blocking, status=c.status.value)
            for c in result.contracts
        ),
        policy=PolicyRef(
            protected=bool(policy and policy.protected),
            ref=policy.ref if policy else None,
            commit=policy.commit if policy else None,
        ),
    )
