"""Reading and re-judging receipts: rejected, probe or formal, always with a reason."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import ValidationError

from gates.core.content_ids import content_id, strict_loads
from gates.core.errors import UnsafePathError
from gates.core.hashing import StatCache
from gates.core.paths import resolve_inside
from gates.core.resources import validator
from gates.core.validation import first_error
from gates.receipts.kinds import REPLAY_ROLE
from gates.receipts.model import ArtifactKind, EvidenceClass, Receipt
from gates.trust.anchors import NO_ANCHORS, Anchors
from gates.trust.envelope import Attestation, Attested, verify_document
from gates.workspace.external import ExternalRootError, ExternalRoots, subject_file

MAX_RECEIPT_BYTES = 16 * 1024 * 1024


class Status(StrEnum):
    FORMAL = "formal"
    PROBE = "probe"
    REJECTED = "rejected"


class ReceiptRejectedError(Exception):
    """A receipt that cannot count at all; the message is the one-line reason."""


@dataclass(frozen=True)
class Judgement:
    """One receipt as re-judged now. ``receipt`` is None when it could not be read."""

    path: str
    receipt: Receipt | None
    status: Status
    reason: str
    signer: str | None = None

    @property
    def weight(self) -> int:
        return 1 if self.status is Status.FORMAL else 0


def read_receipt(
    root: Path,
    relpath: str,
    cache: StatCache | None = None,
    checked_dirs: set[str] | None = None,
) -> Receipt:
    """Parse, schema-check and id-check one receipt file; raise ReceiptRejectedError.

    With a cache, a receipt file whose stat key is unchanged since it last
    passed skips the schema and id checks (the model still parses it).
    """
    try:
        path = resolve_inside(root, relpath, what="receipt", checked_dirs=checked_dirs)
        info = os.lstat(path)
    except UnsafePathError as exc:
        raise ReceiptRejectedError(exc.message) from None
    except FileNotFoundError:
        raise ReceiptRejectedError("receipt file not found") from None
    if not stat.S_ISREG(info.st_mode):
        raise ReceiptRejectedError("receipt is not a regular file")
    if info.st_size > MAX_RECEIPT_BYTES:
        raise ReceiptRejectedError(
            f"receipt is {info.st_size} bytes, over the {MAX_RECEIPT_BYTES} limit"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReceiptRejectedError(f"receipt cannot be read: {exc.strerror}") from None
    known_id = cache.lookup("receipts", relpath, info) if cache else None
    if known_id is not None:
        # Unchanged since it passed every check, duplicate keys included.
        with contextlib.suppress(ValueError, ReceiptRejectedError):
            receipt = _validate_model(json.loads(data))
            if receipt.id == known_id:
                return receipt
    try:
        document = strict_loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReceiptRejectedError(f"malformed JSON: {exc}") from None
    receipt = parse_receipt(document)
    if cache:
        cache.remember("receipts", relpath, path, info, receipt.id)
    return receipt


def _validate_model(document: dict[str, object]) -> Receipt:
    try:
        return Receipt.model_validate(document)
    except ValidationError as exc:
        first = first_error(exc)
        raise ReceiptRejectedError(f"invalid receipt at {first.key}: {first.message}") from None


def parse_receipt(document: object) -> Receipt:
    """Check a parsed receipt against the envelope schema, the model and its id."""
    errors = sorted(validator("receipt").iter_errors(document), key=lambda e: e.json_path)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ReceiptRejectedError(f"schema: {errors[0].json_path}: {errors[0].message}{more}")
    if not isinstance(document, dict):  # unreachable: the schema requires an object
        raise ReceiptRejectedError("receipt is not a JSON object")
    receipt = _validate_model(document)
    expected = content_id(document)
    if receipt.id != expected:
        raise ReceiptRejectedError(
            f"id mismatch: the receipt was edited after creation (id {receipt.id[:19]}..., "
            f"content hashes to {expected[:19]}...)"
        )
    return receipt


def check_subjects(
    root: Path,
    receipt: Receipt,
    cache: StatCache,
    checked_dirs: set[str] | None = None,
    external: ExternalRoots | None = None,
) -> None:
    """Every subject exists as a regular file inside the workspace (or below an external root
    of ``external``) with its recorded digest."""
    seen: set[str] = set()
    for subject in receipt.subjects:
        if subject.path in seen:
            raise ReceiptRejectedError(f"subject {subject.path} is listed twice")
        seen.add(subject.path)
        try:
            path = subject_file(root, external, subject.path, checked_dirs=checked_dirs)
            info = os.lstat(path)
        except ExternalRootError as exc:
            raise ReceiptRejectedError(f"unverifiable here: {exc.message}") from None
        except UnsafePathError as exc:
            raise ReceiptRejectedError(exc.message) from None
        except FileNotFoundError:
            raise ReceiptRejectedError(f"subject {subject.path} is missing") from None
        if not stat.S_ISREG(info.st_mode):
            raise ReceiptRejectedError(f"subject {subject.path} is not a regular file")
        if info.st_size != subject.size:
            raise ReceiptRejectedError(
                f"subject {subject.path} changed: {info.st_size} bytes, receipt says {subject.size}"
            )
        try:
            digest = cache.digest(subject.path, path, info).sha256
        except OSError as exc:
            raise ReceiptRejectedError(
                f"subject {subject.path} cannot be read: {exc.strerror}"
            ) from None
        if digest != subject.sha256:
            raise ReceiptRejectedError(
                f"subject {subject.path} changed: sha256 differs from the receipt"
            )


@dataclass(frozen=True)
class JudgingContext:
    """What a receipt is judged against: the freeze now and the pin's source tree."""

    root: Path
    cache: StatCache
    freeze_discharged: bool
    pin_source_tree: str | None
    checked_dirs: set[str] = field(default_factory=set)
    anchors: Anchors = NO_ANCHORS
    external: ExternalRoots | None = None


def judge(context: JudgingContext, relpath: str) -> Judgement:
    receipt: Receipt | None = None
    try:
        receipt = read_receipt(context.root, relpath, context.cache, context.checked_dirs)
        check_subjects(context.root, receipt, context.cache, context.checked_dirs, context.external)
    except ReceiptRejectedError as exc:
        # a file that reads as a receipt keeps its id, kind and stamp in the report
        return Judgement(relpath, receipt, Status.REJECTED, str(exc))
    except RecursionError:
        return Judgement(relpath, None, Status.REJECTED, "receipt is nested too deeply to read")
    attestation = attest(context, relpath, receipt)
    if attestation.state is Attested.TAMPERED:
        return Judgement(relpath, receipt, Status.REJECTED, attestation.reason)
    signer = attestation.signer.name if attestation.signer else None
    if attestation.state is not Attested.TRUSTED:
        return Judgement(relpath, receipt, Status.PROBE, attestation.reason, signer)
    return Judgement(relpath, receipt, *_weigh(context, receipt), signer)


def attest(context: JudgingContext, relpath: str, receipt: Receipt) -> Attestation:
    """The receipt's attestation against the anchors, remembered per anchors and file state."""
    if receipt.attestation is None:
        return Attestation(Attested.UNSIGNED, "unsigned")
    anchors = context.anchors.digest
    path = context.root / relpath
    info = os.lstat(path)
    known = context.cache.lookup("attestations", relpath, info)
    if known is not None:
        with contextlib.suppress(ValueError, TypeError):
            digest, state, reason, fingerprint = json.loads(known)
            signer = context.anchors.by_fingerprint(fingerprint) if fingerprint else None
            if digest == anchors and (fingerprint is None or signer is not None):
                return Attestation(Attested(state), reason, signer)
    document = json.loads(path.read_bytes())
    framework = receipt.framework.value if receipt.framework else None
    if receipt.kind is ArtifactKind.REPLAY:
        framework = REPLAY_ROLE  # a verifier's replay: its signer must be trusted for replay
    found = verify_document(document, context.anchors, framework)
    if found.state is not Attested.TAMPERED:
        fingerprint = found.signer.fingerprint if found.signer else None
        answer = json.dumps([anchors, found.state.value, found.reason, fingerprint])
        context.cache.remember("attestations", relpath, path, info, answer)
    return found


def _weigh(context: JudgingContext, receipt: Receipt) -> tuple[Status, str]:
    if receipt.evidence_class is EvidenceClass.PROBE:
        why = "; ".join(receipt.stamp_reasons) or "no reason recorded"
        return Status.PROBE, f"stamped probe at creation: {why}"
    if context.pin_source_tree is None or receipt.provenance.source_tree is None:
        return Status.PROBE, "produced on a source tree that is not the pin's"
    # Whether its side's code is the code in force is judged on every audit, outside the
    # index (gates/policy/sides.py): it depends on the pin's and the policy ref's trees.
    if not context.freeze_discharged:
        return (
            Status.PROBE,
            "the source-freeze contract is not discharged now, so every receipt counts 0",
        )
    return Status.FORMAL, "formal: valid, unchanged, made on the pinned source tree"
