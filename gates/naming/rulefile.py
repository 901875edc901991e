"""Naming rules from a contract's params (the policy stage finds the contract)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from gates.core.errors import ConfigError
from gates.core.validation import first_error
from gates.naming.rules import RuleSet

RULE_KEYS = ("rules", "aoa", "placeholders")
INVENTORY_CHECK = "tensor_inventory"


def ruleset_from_params(params: dict[str, Any], source: str) -> RuleSet:
    try:
        return RuleSet.model_validate({k: params[k] for k in RULE_KEYS if k in params})
    except ValidationError as exc:
        first = first_error(exc)
        raise ConfigError(f"params.{first.key}: {first.message}", file=source) from None
