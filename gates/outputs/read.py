"""Reading a receipted checker output or loss file into its typed model, for the figures the
status block shows beside each receipt. The command reads; the reporter only formats."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gates.losses.series import LossFileError, read_losses
from gates.outputs.models import parse_output
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Judgement, Status


@dataclass(frozen=True)
class LossFigures:
    """A loss series in one line: how many steps, the first value, rounded or not."""

    steps: int
    first: float
    rounded: bool


@dataclass(frozen=True)
class Unreadable:
    """A loss file that does not read as a loss series."""


@dataclass(frozen=True)
class Opaque:
    """An output that is not one JSON object (or cannot be read): only its files are counted."""

    files: int


#: What one receipt's output holds: its model where the kind has one and the file fits it,
#: else the plain JSON object.
OutputFigures = LossFigures | Unreadable | Opaque | BaseModel | dict[str, Any]


def read_output(root: Path, judgement: Judgement) -> OutputFigures | None:
    """The figures of one accepted receipt's first file; None for a rejected receipt."""
    receipt = judgement.receipt
    if receipt is None or judgement.status is Status.REJECTED:
        return None
    relpath = receipt.subjects[0].path
    if receipt.kind in (ArtifactKind.LOSS, ArtifactKind.RAW_LOSS):
        try:
            series = read_losses(root / relpath, relpath)
        except LossFileError:
            return Unreadable()
        return LossFigures(len(series), series.values[0], series.rounded)
    try:
        data = json.loads((root / relpath).read_bytes())
    except (OSError, ValueError, RecursionError):  # unreadable or too deep: no figures
        return Opaque(len(receipt.subjects))
    if not isinstance(data, dict):
        return Opaque(len(receipt.subjects))
    return parse_output(receipt.kind, data) or data


def read_outputs(root: Path, judgements: Iterable[Judgement]) -> Mapping[str, OutputFigures]:
    """The figures of each receipt, by receipt path (rejected receipts have none)."""
    found = {}
    for judgement in judgements:
        figures = read_output(root, judgement)
        if figures is not None:
            found[judgement.path] = figures
    return found
