"""The model of each checker output kind, and the one place a document is checked against it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from gates.core.errors import GatesError
from gates.core.validation import first_error
from gates.outputs.checkpoint_check import CheckpointCheck
from gates.outputs.loss_check import LOSS_CHECK
from gates.outputs.structure_parity import StructureParity, differences_fit
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


def check_output(kind: ArtifactKind, document: object, where: str) -> frozenset[str]:
    """Refuse to write a checker output its model rejects (a bug in the checker, not the
    user's input: the message names the file and the first wrong key). Returns the keys of
    the document whose values the check found to hold only exact dicts, lists, tuples and strings
    (a survey's differences, by `differences_fit`), which the writer need not look at again
    (`gates.core.canonical.pretty_json_bytes`)."""
    model = MODELS.get(kind)
    if model is None:
        return frozenset()
    if _fits_quickly(kind, model, document):
        return _PLAIN_WHEN_QUICK
    try:
        model.validate_python(document)
    except ValidationError as exc:
        first = first_error(exc, whole="the document")
        raise GatesError(
            f"the {kind.value} output does not fit its model at {first.key}: {first.problem}",
            file=where,
            hint="this is a bug in gates' checker; report it with the command line",
        ) from None
    return frozenset()


_PLAIN_WHEN_QUICK = frozenset({"differences"})


def _fits_quickly(kind: ArtifactKind, model: TypeAdapter[Any], document: object) -> bool:
    """A structure-parity document fits its model: the model checks all but the
    differences, `differences_fit` those. False (the model then checks the whole document
    and words the error) whenever either is not sure."""
    if kind is not ArtifactKind.STRUCTURE_PARITY or type(document) is not dict:
        return False
    if "differences" not in document or not differences_fit(document["differences"]):
        return False
    try:
        model.validate_python({**document, "differences": []})
    except ValidationError:
        return False
    return True
