"""Naming rules from a contract's params (the policy stage finds the contract).

Every contract that compares through the rules (the tensor inventory, the tensor alignment)
holds its own: `rules`, `aoa` and `placeholders`, and the declarations beside them,
`candidate_only` and `not_comparable`. A tensor-alignment contract that declares none uses
the tensor-inventory contract's rules (`ContractRules`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gates.core.errors import ConfigError
from gates.core.validation import first_error
from gates.naming.rules import RuleSet

RULE_KEYS = ("rules", "aoa", "placeholders", "candidate_only", "not_comparable")
#: the keys that make a contract's rules its own (the declarations are always its own)
OWN_RULE_KEYS = ("rules", "aoa", "placeholders")
INVENTORY_CHECK = "tensor_inventory"
ALIGNMENT_CHECK = "tensor_alignment"


def ruleset_from_params(params: dict[str, Any], source: str) -> RuleSet:
    try:
        return RuleSet.model_validate({k: params[k] for k in RULE_KEYS if k in params})
    except ValidationError as exc:
        first = first_error(exc)
        raise ConfigError(f"params.{first.key}: {first.message}", file=source) from None


def has_rules(params: dict[str, Any]) -> bool:
    """The params declare naming rules of their own."""
    return any(key in params for key in OWN_RULE_KEYS)


def rules_or(params: dict[str, Any], source: str, fallback: RuleSet) -> RuleSet:
    """A contract's naming rules: its own, or (it declares none) ``fallback``'s rules with
    its own declarations."""
    own = ruleset_from_params(params, source)
    if has_rules(params):
        return own
    return fallback.model_copy(
        update={"candidate_only": own.candidate_only, "not_comparable": own.not_comparable}
    )


@dataclass(frozen=True)
class ContractRules:
    """The naming rules one contract compares through, the file they come from (None: no
    contract), and that contract's params (what it declares beside the rules)."""

    ruleset: RuleSet = field(default_factory=RuleSet)
    source: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    check: str | None = None
