"""Cross-checks: the run attestation is the authority for a run's id, commit, times and
framework. A capture the run wrote itself (env.json) or a manifest, bound by that run,
whose run id, git head or framework disagrees with the attestation is rejected: the
files came from another run, or the capture was made up. A run declared as one framework
whose own capture shows no version of it never had that framework."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from gates.receipts.kinds import ArtifactKind
from gates.receipts.model import Receipt

CHECKED_KINDS = (ArtifactKind.ENV, ArtifactKind.MANIFEST)


def _read(root: Path, relpath: str, sha256: str) -> dict[str, object] | str:
    try:
        data = (root / relpath).read_bytes()
    except OSError as error:
        return f"{relpath}: cannot be read ({error.strerror})"
    if hashlib.sha256(data).hexdigest() != sha256:
        return f"{relpath}: changed while it was judged; audit again"
    try:
        document = json.loads(data)
    except ValueError:
        return f"{relpath}: not JSON"
    return document if isinstance(document, dict) else f"{relpath}: not a JSON object"


def capture_problem(root: Path, receipt: Receipt, run: Receipt) -> str | None:
    """Why an env capture or manifest disagrees with the run attestation that bound it."""
    if receipt.kind not in CHECKED_KINDS:
        return None
    record = run.provenance.run
    authority = {
        "run_id": getattr(record, "run_id", None),
        "git_head": run.provenance.git_head,
        "framework": run.framework.value if run.framework else None,
    }
    for subject in receipt.subjects:
        document = _read(root, subject.path, subject.sha256)
        if isinstance(document, str):
            return document
        for key, expected in authority.items():
            if expected is None or document.get(key) is None:
                continue  # not recorded on one side (a capture made outside `gates run`)
            if document[key] != expected:
                return (
                    f"{subject.path}: {key} {document[key]!r} disagrees with its run "
                    f"attestation's {expected!r} (the run attestation is the authority)"
                )
        version = document.get("framework_version")
        if receipt.kind is ArtifactKind.ENV and run.framework and not version:
            return (
                f"{subject.path}: a {run.framework.value} run whose capture shows no "
                f"{run.framework.value} (framework_version {version!r})"
            )
    return None
