"""Validating artifact files against the JSON Schemas of their kinds."""

from __future__ import annotations

from pathlib import Path

from gates.core.content_ids import strict_loads
from gates.core.resources import validator
from gates.losses.series import LossFileError, read_losses
from gates.receipts.model import ArtifactKind

#: The file names of the PR's layout and the kinds they hold.
KIND_BY_FILE_NAME: dict[str, ArtifactKind] = {
    "manifest.json": ArtifactKind.MANIFEST,
    "env.json": ArtifactKind.ENV,
    "loss.json": ArtifactKind.LOSS,
    "raw_loss.jsonl": ArtifactKind.RAW_LOSS,
}

_LOSS_KINDS = (ArtifactKind.LOSS, ArtifactKind.RAW_LOSS)


def schema_errors(kind: ArtifactKind, document: object) -> list[str]:
    """Every schema error as `<json path>: <message>`, sorted by path."""
    errors = sorted(validator(kind.value).iter_errors(document), key=lambda e: e.json_path)
    return [f"{error.json_path}: {error.message}" for error in errors]


def artifact_problem(kind: ArtifactKind, path: Path, display: str) -> str | None:
    """None when the file is a valid artifact of ``kind``; else the first problem, one line.

    Loss files go through the streaming loss reader, which enforces the loss
    schemas plus what JSON Schema cannot say (finite values, consecutive steps).
    """
    if kind in _LOSS_KINDS:
        try:
            read_losses(path, display)
        except LossFileError as exc:
            return exc.one_line()
        return None
    try:
        document = strict_loads(path.read_bytes())
    except OSError as exc:
        return f"{display}: cannot read: {exc.strerror}"
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{display}: not valid JSON: {exc}"
    errors = schema_errors(kind, document)
    if not errors:
        return None
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{display}: {errors[0]}{more}"
