"""Evaluator registry: the `check` name of a contract file -> the function that judges it.

Modules load on first use, so an audit pays only for the checks its contracts name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from gates.contracts.model import Evaluation, EvaluationContext
from gates.core.criteria import Criterion

#: An evaluator returns its criteria, or an `Evaluation` when it decides figures too.
Evaluator = Callable[[EvaluationContext, dict[str, Any]], list[Criterion] | Evaluation]

#: check name -> module under gates.contracts holding `evaluate`
MODULES: dict[str, str] = {
    "source_freeze": "source_freeze",
    "manifest_format_key": "manifest_format_key",
    "results_schema_and_provenance": "results_schema_and_provenance",
    "tensor_inventory": "tensor_inventory",
    "config_semantics": "config_semantics",
    "tensor_alignment": "tensor_alignment",
}

#: The check whose contract decides whether any receipt may count (docs/concepts.md).
FREEZE_CHECK = "source_freeze"


def evaluator(check: str) -> Evaluator | None:
    module = MODULES.get(check)
    if module is None:
        return None
    found: Evaluator = importlib.import_module(f"gates.contracts.{module}").evaluate
    return found
