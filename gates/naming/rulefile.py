"""Where naming rules come from: a contract file given with --rules, or the workspace's
tensor-inventory contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gates.contracts.loader import load_contract
from gates.errors import ConfigError
from gates.naming.rules import RuleSet
from gates.validation import first_error
from gates.workspace import Workspace

RULE_KEYS = ("rules", "aoa", "placeholders")
INVENTORY_CHECK = "tensor_inventory"


def ruleset_from_params(params: dict[str, Any], source: str) -> RuleSet:
    try:
        return RuleSet.model_validate({k: params[k] for k in RULE_KEYS if k in params})
    except ValidationError as exc:
        first = first_error(exc)
        raise ConfigError(f"params.{first.key}: {first.message}", file=source) from None


def load_ruleset(path: Path) -> RuleSet:
    """The naming rules of one contract file."""
    try:
        spec = load_contract(path)
    except ValueError as exc:
        raise ConfigError(str(exc), file=path) from None
    return ruleset_from_params(spec.params, str(path))


def workspace_ruleset(workspace: Workspace) -> tuple[RuleSet, str | None]:
    """The rules of the tensor-inventory contract of the policy in force, if it has one
    (from the protected ref when there is one: a PR cannot loosen the naming rules)."""
    from gates.policy.in_force import policy_of  # noqa: PLC0415  (policy loads contracts: no cycle at import)

    _, policy = policy_of(workspace)
    loaded, _ = policy.contracts()
    for path, spec in loaded:
        if spec.check == INVENTORY_CHECK:
            return ruleset_from_params(spec.params, str(path)), str(path)
    return RuleSet(), None
