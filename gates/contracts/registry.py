"""Evaluator registry: the `check` name of a contract file -> the function that judges it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gates.contracts import (
    manifest_format_key,
    results_schema_and_provenance,
    source_freeze,
    tensor_inventory,
)
from gates.contracts.model import Criterion, EvaluationContext

Evaluator = Callable[[EvaluationContext, dict[str, Any]], list[Criterion]]

EVALUATORS: dict[str, Evaluator] = {
    source_freeze.CHECK: source_freeze.evaluate,
    manifest_format_key.CHECK: manifest_format_key.evaluate,
    results_schema_and_provenance.CHECK: results_schema_and_provenance.evaluate,
    tensor_inventory.CHECK: tensor_inventory.evaluate,
}

#: The check whose contract decides whether any receipt may count (DESIGN.md).
FREEZE_CHECK = source_freeze.CHECK
