"""The replay settings of the policy in force: the results contract's replay params."""

from __future__ import annotations

from gates.contracts.model import EvaluationError
from gates.contracts.results_schema_and_provenance import CHECK, Params, parse_params
from gates.errors import GatesError
from gates.policy.in_force import policy_of
from gates.workspace import Workspace


def results_params(workspace: Workspace) -> Params | None:
    """The results contract's params under the policy in force (None without one)."""
    _, policy = policy_of(workspace)
    loaded, _ = policy.contracts()
    spec = next((spec for _, spec in loaded if spec.check == CHECK), None)
    if spec is None:
        return None
    try:
        return parse_params(spec.params)
    except EvaluationError as exc:
        raise GatesError(f"{spec.id}: {exc}") from None


def policy_save_every(workspace: Workspace) -> int | None:
    """K, how often a run saves its full state; None when the policy says nothing."""
    try:
        params = results_params(workspace)
    except GatesError:
        return None  # the audit reports a broken contract; the run keeps the recorder default
    return params.state_save_every if params else None
