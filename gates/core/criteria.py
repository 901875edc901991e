"""What every contract evaluation is made of: criteria and the discharge status they add up to.

At the bottom of the house, so the kinds of evidence (the config-semantics check, the tensor
progress) can speak of criteria without importing the contracts stage above them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class DischargeStatus(StrEnum):
    DISCHARGED = "discharged"
    DISCHARGING = "discharging"
    UNDISCHARGED = "undischarged"
    ERROR = "error"


@dataclass(frozen=True)
class Criterion:
    """One yes/no finding of a contract, with a one-line detail either way; ``findings``
    lists the items an unmet detail summarises, for reports that show them one by one.

    ``files`` are the workspace files the criterion concerns (workspace-relative POSIX
    paths, as the detail names them) and ``key`` the contract's TOML key it checks, if
    any: reporters point at those (GitHub annotations) instead of reading the detail, which
    is for people and may quote what an attacker wrote."""

    name: str
    met: bool
    detail: str
    findings: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    key: str | None = None


def discharge_status(criteria: tuple[Criterion, ...]) -> DischargeStatus:
    """All met: discharged; some: discharging; none: undischarged; no criteria: error."""
    if not criteria:
        return DischargeStatus.ERROR
    met = sum(criterion.met for criterion in criteria)
    if met == len(criteria):
        return DischargeStatus.DISCHARGED
    return DischargeStatus.DISCHARGING if met else DischargeStatus.UNDISCHARGED
