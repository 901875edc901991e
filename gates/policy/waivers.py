"""Waivers: a named owner accepts, until a date, that a blocking contract (or one of its
criteria) does not block.

A waiver is a file `contracts/<name>.waiver.toml`:

    contract = "contract_environment.tensor-inventory"
    criterion = "no_structural_difference"   # optional: the whole contract without it
    owner = "zrr1999"
    reason = "MTP indexer not built on the Paddle side yet (#4812)"
    expires = 2026-12-15                     # the last day it holds, UTC

An expired waiver no longer holds and is named as expired; a waiver for a
contract or criterion that does not exist is a configuration error. Waivers
never change a contract's status, the receipts, or formal_alignment_steps:
they only decide whether an unmet contract blocks the verdict.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from gates.core.validation import first_error

WAIVER_SUFFIX = ".waiver.toml"

Text = Annotated[str, StringConstraints(min_length=1)]


class Waiver(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    contract: Text
    criterion: Text | None = None
    owner: Text
    reason: Text
    expires: dt.date


@dataclass(frozen=True)
class LoadedWaiver:
    source: str
    waiver: Waiver

    def active(self, today: dt.date) -> bool:
        return today <= self.waiver.expires

    def describe(self, today: dt.date) -> str:
        target = self.waiver.contract + (
            f" / {self.waiver.criterion}" if self.waiver.criterion else ""
        )
        state = "until" if self.active(today) else "EXPIRED on"
        return (
            f"{target} waived by {self.waiver.owner} {state} {self.waiver.expires.isoformat()}: "
            f"{self.waiver.reason} ({self.source})"
        )

    def to_json(self, today: dt.date) -> dict[str, object]:
        return {
            "source": self.source,
            "contract": self.waiver.contract,
            "criterion": self.waiver.criterion,
            "owner": self.waiver.owner,
            "reason": self.waiver.reason,
            "expires": self.waiver.expires.isoformat(),
            "active": self.active(today),
        }


def today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def parse_waivers(files: list[tuple[str, bytes | None]]) -> tuple[list[LoadedWaiver], list[str]]:
    """Waivers from (source, content) pairs, wherever they were read (worktree or a git ref)."""
    waivers, errors = [], []
    for source, data in files:
        if data is None:
            errors.append(f"{source}: cannot read")
            continue
        try:
            raw = tomllib.loads(data.decode("utf-8"))
            waivers.append(LoadedWaiver(source, Waiver.model_validate(raw)))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            errors.append(f"{source}: cannot read: {exc}")
        except ValidationError as exc:
            first = first_error(exc, whole="(file)")
            errors.append(f"{source}: key '{first.key}': {first.message}")
    return waivers, errors
