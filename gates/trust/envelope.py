"""Receipts as in-toto Statements v1 in DSSE envelopes, signed and verified with
securesystemslib (the in-toto/TUF project's library): no hand-rolled crypto.

The statement of a receipt is computed from the receipt itself: its subjects
(path and sha256) and, as predicate, the whole receipt body (without the
attestation). A verifier recomputes it and requires the signed payload to be
byte-identical, so the envelope and the receipt can never tell two stories.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gates.core.content_ids import canonical_json
from gates.trust.anchors import Anchors, TrustedSigner
from gates.trust.keys import SigningKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
RECEIPT_PREDICATE = "https://gates.dev/attestation/receipt/v1"
ATTESTATION_FIELD = "attestation"


def receipt_body(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != ATTESTATION_FIELD}


def statement_for(document: dict[str, Any]) -> dict[str, Any]:
    """The in-toto Statement v1 a receipt document stands for."""
    subjects = document.get("subjects") or []
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": subject["path"], "digest": {"sha256": subject["sha256"]}}
            for subject in subjects
        ],
        "predicateType": RECEIPT_PREDICATE,
        "predicate": receipt_body(document),
    }


def sign_statement(statement: dict[str, Any], key: SigningKey) -> dict[str, Any]:
    """A DSSE envelope (as a JSON-ready dict) over the statement's canonical JSON."""
    from securesystemslib.dsse import Envelope  # noqa: PLC0415

    envelope = Envelope(payload=canonical_json(statement), payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(key.signer)
    signed: dict[str, Any] = envelope.to_dict()
    return signed


def sign_document(document: dict[str, Any], key: SigningKey) -> dict[str, Any]:
    return sign_statement(statement_for(document), key)


class Attested(StrEnum):
    TRUSTED = "trusted"  # a valid signature by a signer in force for this framework
    UNSIGNED = "unsigned"
    UNTRUSTED = "untrusted"  # signed, but by no signer that may attest this
    TAMPERED = "tampered"  # the envelope does not verify or does not match the receipt


@dataclass(frozen=True)
class Attestation:
    state: Attested
    reason: str
    signer: TrustedSigner | None = None


def _decode(envelope: object) -> tuple[bytes, list[tuple[str, str]]]:
    if not isinstance(envelope, dict) or set(envelope) != {"payload", "payloadType", "signatures"}:
        raise ValueError("not a DSSE envelope (payload, payloadType, signatures)")
    if envelope["payloadType"] != PAYLOAD_TYPE:
        raise ValueError(f"payloadType is {envelope['payloadType']!r}, not {PAYLOAD_TYPE}")
    signatures = envelope["signatures"]
    if not isinstance(signatures, list) or not signatures:
        raise ValueError("envelope has no signatures")
    pairs = []
    for item in signatures:
        if not isinstance(item, dict) or not isinstance(item.get("keyid"), str):
            raise ValueError("a signature has no keyid")
        if not isinstance(item.get("sig"), str):
            raise ValueError("a signature has no sig")
        pairs.append((item["keyid"], item["sig"]))
    if not isinstance(envelope["payload"], str):
        raise ValueError("payload is not a string")
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
    except binascii.Error:
        raise ValueError("payload is not base64") from None
    return payload, pairs


def verify_document(
    document: dict[str, Any], anchors: Anchors, framework: str | None
) -> Attestation:
    """Judge a receipt's attestation against the anchors in force."""
    envelope = document.get(ATTESTATION_FIELD)
    if envelope is None:
        return Attestation(Attested.UNSIGNED, "unsigned")
    try:
        payload, signatures = _decode(envelope)
        if payload != canonical_json(statement_for(document)):
            raise ValueError(
                "the signed statement does not match the receipt (edited after signing)"
            )
    except ValueError as exc:
        return Attestation(Attested.TAMPERED, f"attestation: {exc}")
    return _verify_signatures(payload, signatures, anchors, framework)


def verify_envelope(
    envelope: object, anchors: Anchors, framework: str | None
) -> tuple[Attestation, bytes | None]:
    """Judge a standalone DSSE envelope (an exported one) and return its payload when it
    decodes: trusted only with a valid signature by a signer in force for the framework."""
    try:
        payload, signatures = _decode(envelope)
    except ValueError as exc:
        return Attestation(Attested.TAMPERED, str(exc)), None
    return _verify_signatures(payload, signatures, anchors, framework), payload


def _verify_signatures(
    payload: bytes, signatures: list[tuple[str, str]], anchors: Anchors, framework: str | None
) -> Attestation:
    from securesystemslib.dsse import Envelope  # noqa: PLC0415
    from securesystemslib.exceptions import UnverifiedSignatureError  # noqa: PLC0415
    from securesystemslib.signer import Signature  # noqa: PLC0415

    pae = Envelope(payload, PAYLOAD_TYPE, {}).pae()
    untrusted: list[str] = []
    for keyid, sig in signatures:
        signer = anchors.by_keyid(keyid)
        if signer is None:
            untrusted.append(f"signed by key {keyid[:16]}..., which is not a trust anchor")
            continue
        try:
            raw = base64.b64decode(sig, validate=True)  # DSSE: base64; the library: hex
            signer.key().verify_signature(Signature(keyid, raw.hex()), pae)
        except (UnverifiedSignatureError, binascii.Error):
            return Attestation(
                Attested.TAMPERED, f"attestation: signature by {signer.name} does not verify"
            )
        if signer.revoked:
            untrusted.append(f"signed by {signer.name}, whose key is revoked")
        elif not signer.may_attest(framework):
            allowed = ", ".join(signer.frameworks)
            untrusted.append(
                f"signed by {signer.name}, trusted only for {allowed}, not for {framework}"
            )
        else:
            return Attestation(Attested.TRUSTED, f"signed by {signer.name}", signer)
    if not anchors.signers:
        return Attestation(Attested.UNTRUSTED, f"no trust anchors in force ({anchors.source})")
    return Attestation(Attested.UNTRUSTED, "; ".join(untrusted))
