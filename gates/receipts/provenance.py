"""The provenance checker: reads every run manifest and refuses unsupported run schemas.

Inside the checker an unsupported manifest raises `UnsupportedRunSchemaError`;
`check_manifests` turns each into a finding, so one bad manifest never stops
the reading of the others (or the audit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gates.core.content_ids import strict_loads
from gates.core.errors import GatesError
from gates.core.resources import schema
from gates.receipts.artifacts import schema_errors
from gates.receipts.model import ArtifactKind

MANIFEST_NAME = "manifest.json"


def supported_formats() -> list[str]:
    formats: list[str] = schema("manifest")["properties"]["format"]["enum"]
    return formats


class UnsupportedRunSchemaError(GatesError):
    """A run manifest without a `format` key, with an unsupported one, or unreadable."""


@dataclass(frozen=True)
class ManifestFinding:
    path: str
    error: str | None


def find_manifests(root: Path, roots: list[str]) -> list[str]:
    """Workspace paths of every manifest.json under ``roots``, sorted; symlinks not followed."""
    found = []
    for top in roots:
        for folder, _, filenames in os.walk(root / top):
            if MANIFEST_NAME in filenames:
                found.append((Path(folder) / MANIFEST_NAME).relative_to(root).as_posix())
    return sorted(found)


def read_manifest(root: Path, relpath: str) -> dict[str, object]:
    """Load one manifest; raise UnsupportedRunSchemaError when it cannot be trusted."""
    hint = (
        f'add "format": "{supported_formats()[0]}" (rerun the entrypoint under `gates run`, '
        "which writes it)"
    )
    path = root / relpath
    if path.is_symlink():
        raise UnsupportedRunSchemaError("manifest is a symlink", file=relpath)
    try:
        document = strict_loads(path.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise UnsupportedRunSchemaError(f"unreadable manifest: {exc}", file=relpath) from None
    if not isinstance(document, dict):
        raise UnsupportedRunSchemaError("manifest is not a JSON object", file=relpath, hint=hint)
    if "format" not in document:
        raise UnsupportedRunSchemaError("manifest has no 'format' key", file=relpath, hint=hint)
    if document["format"] not in supported_formats():
        raise UnsupportedRunSchemaError(
            f"unsupported manifest format {document['format']!r} "
            f"(supported: {', '.join(supported_formats())})",
            file=relpath,
            hint=hint,
        )
    errors = schema_errors(ArtifactKind.MANIFEST, document)
    if errors:
        raise UnsupportedRunSchemaError(
            f"manifest does not match its format: {errors[0]}", file=relpath
        )
    return document


def check_manifests(root: Path, roots: list[str]) -> list[ManifestFinding]:
    findings = []
    for relpath in find_manifests(root, roots):
        try:
            read_manifest(root, relpath)
        except UnsupportedRunSchemaError as exc:
            findings.append(
                ManifestFinding(relpath, f"UnsupportedRunSchemaError: {exc.one_line()}")
            )
        else:
            findings.append(ManifestFinding(relpath, None))
    return findings
