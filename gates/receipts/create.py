"""Creating receipts: hash the subjects, judge the freeze, stamp, write atomically."""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from gates import __version__
from gates.core.atomic import write_text_atomic
from gates.core.content_ids import content_id
from gates.core.errors import ReceiptError, UnsafePathError
from gates.core.hashing import StatCache
from gates.core.json_writer import pretty_json
from gates.core.paths import is_under, resolve_inside
from gates.freeze.check import FreezeInputs, FreezeReport, Reason, evaluate_freeze
from gates.receipts.model import (
    RECEIPT_SUFFIX,
    RECEIPT_VERSION,
    ArtifactKind,
    EvidenceClass,
    Framework,
    Receipt,
)
from gates.receipts.verify import ReceiptRejectedError, parse_receipt
from gates.trust.envelope import ATTESTATION_FIELD, sign_document
from gates.trust.keys import SigningKey
from gates.workspace.external import subject_file
from gates.workspace.repository import Workspace, roots_of

_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_DIRTY = {Reason.STAGED, Reason.UNSTAGED, Reason.UNTRACKED, Reason.UNMERGED, Reason.SUBMODULE}


@dataclass(frozen=True)
class ReceiptRequest:
    """What to bind: workspace-relative subject paths plus the provenance a caller knows."""

    kind: ArtifactKind
    subjects: tuple[str, ...]
    framework: Framework | None = None
    profile: dict[str, str] = field(default_factory=dict)
    requested_class: EvidenceClass = EvidenceClass.FORMAL
    command: tuple[str, ...] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    output: str | None = None
    overwrite: bool = False
    probe_reasons: tuple[str, ...] = ()
    run: dict[str, object] | None = None  # the run record of a run attestation


def default_output(first_subject: str) -> str:
    """`results/paddle/loss.json` -> `results/paddle/loss.receipt.json`."""
    path = PurePosixPath(first_subject)
    return str(path.with_name(path.name.removesuffix(path.suffix) + RECEIPT_SUFFIX))


def _subject_path(workspace: Workspace, relpath: str) -> tuple[Path, os.stat_result]:
    """A subject's file: in the workspace, or below an external root (``external:...``)."""
    path = workspace.root / relpath
    try:
        path = subject_file(workspace.root, roots_of(workspace), relpath)
        info = os.lstat(path)
    except FileNotFoundError:
        raise ReceiptError(f"subject {relpath} does not exist", file=path) from None
    if not stat.S_ISREG(info.st_mode):
        raise ReceiptError(f"subject {relpath} is not a regular file", file=path)
    return path, info


def _output_path(workspace: Workspace, request: ReceiptRequest) -> Path:
    relpath = request.output or default_output(request.subjects[0])
    locations = workspace.config.evidence.locations
    if not relpath.endswith(RECEIPT_SUFFIX):
        raise ReceiptError(f"receipt path {relpath} must end in {RECEIPT_SUFFIX}")
    if not is_under(relpath, locations):
        raise ReceiptError(
            f"receipt path {relpath} is outside the evidence locations",
            hint=f"write it under one of: {', '.join(locations)} (gates.toml [evidence])",
        )
    path = resolve_inside(workspace.root, relpath, what="receipt path")
    if os.path.lexists(path) and not request.overwrite:
        raise ReceiptError(
            "receipt already exists; refusing to overwrite", file=path, hint="pass --force"
        )
    return path


def _stamp(
    request: ReceiptRequest, before: FreezeReport, after: FreezeReport
) -> tuple[EvidenceClass, list[str]]:
    reasons: list[str] = []
    if request.requested_class is EvidenceClass.PROBE:
        reasons.append("probe requested")
    reasons += request.probe_reasons
    reasons += [f"freeze blocked at creation: {message}" for message in before.messages()]
    if after.verdict != before.verdict or after.head != before.head:
        reasons.append("the source freeze changed while the receipt was being made")
    return (EvidenceClass.PROBE if reasons else EvidenceClass.FORMAL), reasons


def build_document(
    request: ReceiptRequest,
    subjects: list[dict[str, object]],
    before: FreezeReport,
    after: FreezeReport,
) -> dict[str, object]:
    """The receipt document, stamped and with its id, for subjects already hashed."""
    evidence_class, reasons = _stamp(request, before, after)
    dirty = any(reason.code in _DIRTY for reason in before.reasons)
    document: dict[str, object] = {
        "receiptVersion": RECEIPT_VERSION,
        "kind": request.kind.value,
        "framework": request.framework.value if request.framework else None,
        "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "subjects": subjects,
        "provenance": {
            "gitHead": before.head,
            "pin": before.pin if before.pin and _COMMIT.fullmatch(before.pin) else None,
            "dirty": dirty,
            "freezeVerdict": before.verdict,
            "freezeReasons": before.messages(),
            "sourceTree": None if dirty else before.head_source_tree,
            "command": list(request.command) if request.command is not None else None,
            "environment": dict(request.environment),
            "profile": dict(request.profile),
            "inputs": list(request.inputs),
            "tool": f"gates {__version__}",
            **({"run": request.run} if request.run is not None else {}),
        },
        "evidenceClass": evidence_class.value,
        "formalWeight": 1 if evidence_class is EvidenceClass.FORMAL else 0,
        "stampReasons": reasons,
    }
    document["id"] = content_id(document)
    return document


def create_receipt(
    workspace: Workspace,
    request: ReceiptRequest,
    *,
    cache: StatCache | None = None,
    during: Callable[[], None] | None = None,
    freeze: tuple[FreezeReport, FreezeReport] | None = None,
    signing_key: SigningKey | None = None,
    freeze_inputs: FreezeInputs | None = None,
) -> tuple[Receipt, Path]:
    """Hash the subjects, stamp them formal only under a passing freeze, sign, write.

    The freeze is judged before and after hashing (``during`` runs between; with
    ``freeze_inputs``, the command's blob cache and pre-commit store); any change between
    the two gives a probe. `gates run` passes ``freeze``: the judgements taken before and
    after the run itself. The receipt is signed with ``signing_key`` (the command's:
    `gates.trust.keys.configured_key`), else left unsigned.
    """
    key = signing_key
    root = workspace.root
    if not request.subjects:
        raise ReceiptError("a receipt needs at least one subject", hint="pass --subject PATH")
    if len(set(request.subjects)) != len(request.subjects):
        raise ReceiptError("a subject is listed twice")
    try:
        out_path = _output_path(workspace, request)
        located = [(rel, *_subject_path(workspace, rel)) for rel in request.subjects]
    except UnsafePathError as exc:
        raise ReceiptError(exc.message, hint=exc.hint) from None
    cache = cache or StatCache(None)
    before = freeze[0] if freeze else evaluate_freeze(root, workspace.config, freeze_inputs)
    if during is not None:
        during()
    subjects = [
        {"path": rel, "size": info.st_size, "sha256": cache.digest(rel, path, info).sha256}
        for rel, path, info in located
    ]
    after = freeze[1] if freeze else evaluate_freeze(root, workspace.config, freeze_inputs)
    document = build_document(request, subjects, before, after)
    if key is not None:
        document[ATTESTATION_FIELD] = sign_document(document, key)
    try:
        receipt = parse_receipt(document)
    except ReceiptRejectedError as exc:
        raise ReceiptError(f"refusing to write an invalid receipt: {exc}") from None
    write_text_atomic(out_path, pretty_json(document))
    return receipt, out_path
