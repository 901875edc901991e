"""Check `source_freeze`: the contract form of `audit_source_freeze.py`."""

from __future__ import annotations

from typing import Any

from gates.contracts.model import EvaluationContext, EvaluationError
from gates.core.criteria import Criterion
from gates.freeze.check import CRITERIA

CHECK = "source_freeze"

_MET = {
    "pin_resolves": "the pin and HEAD are commits in this clone",
    "source_tree_equals_pin": "HEAD's source tree is the pin's",
    "worktree_clean": "no staged, unstaged or untracked change inside the source tree",
    "worktree_stable": "two reads of the worktree state agree",
}


def evaluate(context: EvaluationContext, params: dict[str, Any]) -> list[Criterion]:
    """One criterion per freeze concern; an unmet one carries the freeze reasons."""
    if params:
        raise EvaluationError(f"takes no params, got {sorted(params)}")
    criteria = []
    for name, codes in CRITERIA.items():
        reasons = [r for r in context.freeze.reasons if r.code in codes]
        messages = [r.message for r in reasons]
        files = tuple(dict.fromkeys(path for r in reasons for path in r.paths))
        detail = "; ".join(messages) or _MET[name]
        criteria.append(Criterion(name, not messages, detail, files=files))
    return criteria
