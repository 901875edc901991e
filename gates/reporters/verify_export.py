"""`gates attest verify`: check what `gates attest export` wrote, as a third party would.

Every receipt envelope must carry a valid signature by a signer the trust file names for
the receipt's framework; the VSA must be signed by a trusted signer, and every input
attestation it names (by sha256 of the envelope's canonical JSON) must be in the folder
and verify. Nothing is read from a repository: the folder and the trust file are all.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gates.core.errors import GatesError
from gates.engine.summary import AuditSummary
from gates.reporters.vsa import RESULT_FIELD, VSA_PREDICATE, envelope_digest
from gates.trust.anchors import Anchors
from gates.trust.envelope import RECEIPT_PREDICATE, Attested, verify_envelope

VSA_SIGNED = "vsa.dsse.json"
VSA_UNSIGNED = "vsa.intoto.json"
ENVELOPE_SUFFIX = ".dsse.json"


@dataclass(frozen=True)
class FileCheck:
    name: str
    ok: bool
    reason: str
    digest: str | None = None


@dataclass(frozen=True)
class ExportCheck:
    envelopes: tuple[FileCheck, ...]
    vsa: FileCheck
    problems: tuple[str, ...]
    resource_uri: str | None = None
    verification_result: str | None = None
    summary: AuditSummary | None = None
    unreferenced: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a JSON file ({exc})") from None


def _claimed_statement(envelope: object) -> dict[str, Any]:
    """The statement the envelope carries, decoded before the signature is checked: used only
    to learn which framework's signer must have signed it."""
    if not isinstance(envelope, dict) or not isinstance(envelope.get("payload"), str):
        return {}
    try:
        statement = json.loads(base64.b64decode(envelope["payload"], validate=True))
    except (binascii.Error, ValueError):
        return {}
    return statement if isinstance(statement, dict) else {}


def _check_receipt(path: Path, anchors: Anchors) -> FileCheck:
    try:
        envelope = _read_json(path)
    except ValueError as exc:
        return FileCheck(path.name, False, str(exc))
    statement = _claimed_statement(envelope)
    predicate = statement.get("predicate")
    framework = predicate.get("framework") if isinstance(predicate, dict) else None
    attestation, _ = verify_envelope(
        envelope, anchors, framework if isinstance(framework, str) else None
    )
    digest = envelope_digest(envelope) if isinstance(envelope, dict) else None
    if attestation.state is not Attested.TRUSTED:
        return FileCheck(path.name, False, f"{attestation.state.value}: {attestation.reason}")
    if statement.get("predicateType") != RECEIPT_PREDICATE:
        return FileCheck(path.name, False, "not a gates receipt statement", digest)
    return FileCheck(path.name, True, attestation.reason, digest)


def _vsa_statement(folder: Path, anchors: Anchors) -> tuple[FileCheck, dict[str, Any] | None]:
    path = folder / VSA_SIGNED
    if not path.is_file():
        reason = (
            f"the VSA is unsigned ({VSA_UNSIGNED}): export it with a signing key"
            if (folder / VSA_UNSIGNED).is_file()
            else f"no VSA ({VSA_SIGNED}) in the folder"
        )
        return FileCheck(VSA_SIGNED, False, reason), None
    try:
        envelope = _read_json(path)
    except ValueError as exc:
        return FileCheck(VSA_SIGNED, False, str(exc)), None
    attestation, payload = verify_envelope(envelope, anchors, None)
    if attestation.state is not Attested.TRUSTED or payload is None:
        return FileCheck(
            VSA_SIGNED, False, f"{attestation.state.value}: {attestation.reason}"
        ), None
    try:
        statement = json.loads(payload)
    except ValueError:
        return FileCheck(VSA_SIGNED, False, "the signed payload is not JSON"), None
    if not isinstance(statement, dict) or statement.get("predicateType") != VSA_PREDICATE:
        return FileCheck(VSA_SIGNED, False, f"not a VSA (predicateType {VSA_PREDICATE})"), None
    return FileCheck(VSA_SIGNED, True, attestation.reason), statement


def verify_export(folder: Path, anchors: Anchors) -> ExportCheck:
    """Judge every envelope in the folder and the VSA; each problem is one line."""
    if not folder.is_dir():
        raise GatesError(
            "not a folder", file=folder, hint="pass the folder `gates attest export --out` wrote"
        )
    names = sorted(
        p.name
        for p in folder.iterdir()
        if p.name.endswith(ENVELOPE_SUFFIX) and p.name != VSA_SIGNED
    )
    envelopes = tuple(_check_receipt(folder / name, anchors) for name in names)
    problems = [f"{e.name}: {e.reason}" for e in envelopes if not e.ok]
    vsa, statement = _vsa_statement(folder, anchors)
    if statement is None:
        return ExportCheck(envelopes, vsa, (*problems, f"{vsa.name}: {vsa.reason}"))
    raw_predicate = statement.get("predicate")
    predicate: dict[str, Any] = raw_predicate if isinstance(raw_predicate, dict) else {}
    by_digest = {e.digest: e for e in envelopes if e.digest}
    referenced: set[str] = set()
    inputs = predicate.get("inputAttestations")
    for entry in inputs if isinstance(inputs, list) else []:
        uri = entry.get("uri", "?") if isinstance(entry, dict) else "?"
        digests = entry.get("digest") if isinstance(entry, dict) else None
        digest = digests.get("sha256") if isinstance(digests, dict) else None
        found = by_digest.get(digest) if isinstance(digest, str) else None
        if found is None:
            problems.append(
                f"{VSA_SIGNED}: input attestation {uri} (sha256 {str(digest)[:16]}...) is "
                "missing from the folder"
            )
        elif not found.ok:
            problems.append(f"{VSA_SIGNED}: input attestation {uri} does not verify")
        else:
            referenced.add(found.name)
    summary = None
    try:
        summary = AuditSummary.model_validate(predicate.get(RESULT_FIELD))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(object)"
        problems.append(
            f"{VSA_SIGNED}: {RESULT_FIELD} is not a gates audit summary ({where}: {first['msg']})"
        )
    return ExportCheck(
        envelopes,
        vsa,
        tuple(problems),
        resource_uri=predicate.get("resourceUri"),
        verification_result=predicate.get("verificationResult"),
        summary=summary,
        unreferenced=tuple(e.name for e in envelopes if e.ok and e.name not in referenced),
    )
