"""The model of each checker output kind, and the one place a document is checked against it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from gates.core.errors import GatesError
from gates.core.validation import first_error
from gates.outputs.checkpoint_check import CheckpointCheck
from gates.outputs.loss_check import LOSS_CHECK
from gates.outputs.structure_parity import StructureParity
from gates.receipts.model import ArtifactKind

#: kind -> the model its output file must fit (kinds without one are read as plain JSON)
MODELS: dict[ArtifactKind, TypeAdapter[Any]] = {
    ArtifactKind.LOSS_CHECK: LOSS_CHECK,
    ArtifactKind.CHECKPOINT_CHECK: TypeAdapter(CheckpointCheck),
    ArtifactKind.STRUCTURE_PARITY: TypeAdapter(StructureParity),
}


def parse_output(kind: ArtifactKind, document: object) -> BaseModel | None:
    """``document`` as the model of ``kind``; None when the kind has none or it does not fit."""
    model = MODELS.get(kind)
    if model is None:
        return None
    try:
        parsed: BaseModel = model.validate_python(document)
    except ValidationError:
        return None
    return parsed


def check_output(kind: ArtifactKind, document: object, where: str) -> None:
    """Refuse to write a checker output its model rejects (a bug in the checker, not the
    user's input: the message names the file and the first wrong key)."""
    model = MODELS.get(kind)
    if model is None:
        return
    try:
        model.validate_python(document)
    except ValidationError as exc:
        first = first_error(exc, whole="the document")
        raise GatesError(
            f"the {kind.value} output does not fit its model at {first.key}: {first.problem}",
            file=where,
            hint="this is a bug in gates' checker; report it with the command line",
        ) from None
