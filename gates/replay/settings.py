"""The replay settings of the policy in force: the results contract's replay params."""

from __future__ import annotations

from gates.contracts.model import EvaluationError
from gates.contracts.results_schema_and_provenance import CHECK, Params, parse_params
from gates.core.errors import GatesError
from gates.policy.in_force import Policy


def results_params(policy: Policy) -> Params | None:
    """The results contract's params under the policy in force (None without one)."""
    found = policy.contract(CHECK)
    if found is None:
        return None
    spec = found[1]
    try:
        return parse_params(spec.params)
    except EvaluationError as exc:
        raise GatesError(f"{spec.id}: {exc}") from None


def policy_save_every(policy: Policy) -> int | None:
    """K, how often a run saves its full state; None when the policy says nothing."""
    try:
        params = results_params(policy)
    except GatesError:
        return None  # the audit reports a broken contract; the run keeps the recorder default
    return params.state_save_every if params else None
