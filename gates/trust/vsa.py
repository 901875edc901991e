"""The verdict as a SLSA Verification Summary Attestation v1 (an in-toto Statement)."""

from __future__ import annotations

import hashlib
from typing import Any

from gates import __version__
from gates.canonical import canonical_json
from gates.trust.envelope import STATEMENT_TYPE

VSA_PREDICATE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://gates.dev/verifier/gates-audit"


def envelope_digest(envelope: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(envelope)).hexdigest()


def vsa_statement(
    *,
    head: str | None,
    repository: str,
    verdict: str,
    policy_uri: str,
    policy_digest: str,
    inputs: list[tuple[str, dict[str, Any]]],
    time_verified: str,
) -> dict[str, Any]:
    """A VSA v1 statement: the commit audited, who verified it, under which policy, from
    which input attestations, and PASSED or FAILED."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": repository, "digest": {"gitCommit": head or ""}}],
        "predicateType": VSA_PREDICATE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID, "version": {"gates": __version__}},
            "timeVerified": time_verified,
            "resourceUri": f"git+{repository}@{head or ''}",
            "policy": {"uri": policy_uri, "digest": {"sha256": policy_digest}},
            "inputAttestations": [
                {"uri": uri, "digest": {"sha256": envelope_digest(envelope)}}
                for uri, envelope in inputs
            ],
            "verificationResult": "PASSED" if verdict == "pass" else "FAILED",
            "verifiedLevels": [],
            "slsaVersion": "1.0",
        },
    }
