"""Where naming rules come from: a contract file given with --rules, or the tensor-inventory
contract of the policy in force."""

from __future__ import annotations

from pathlib import Path

from gates.core.errors import ConfigError
from gates.naming.rulefile import ruleset_from_params
from gates.naming.rules import RuleSet
from gates.policy.contract_files import load_contract
from gates.policy.in_force import Policy


def load_ruleset(path: Path) -> RuleSet:
    """The naming rules of one contract file."""
    try:
        spec = load_contract(path)
    except ValueError as exc:
        raise ConfigError(str(exc), file=path) from None
    return ruleset_from_params(spec.params, str(path))


def workspace_ruleset(policy: Policy) -> tuple[RuleSet, str | None]:
    """The rules of the tensor-inventory contract of the policy in force, if it has one
    (from the protected ref when there is one: a PR cannot loosen the naming rules)."""
    return policy.ruleset()
