"""A receipt as one contract sees it: the bottom layer shared by contracts and the alignment."""

from __future__ import annotations

from dataclasses import dataclass

from gates.receipts.verify import Judgement


@dataclass(frozen=True)
class Evidence:
    """A receipt as one contract sees it: it counts only if formal and of the right profile."""

    judgement: Judgement
    counts: bool
    reason: str
