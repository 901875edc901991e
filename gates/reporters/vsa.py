"""The verdict as a SLSA Verification Summary Attestation v1 (an in-toto Statement)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gates import __version__
from gates.core.content_ids import canonical_json
from gates.core.errors import GatesError
from gates.core.git import run_git
from gates.engine.summary import AuditSummary
from gates.trust.envelope import STATEMENT_TYPE

VSA_PREDICATE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://gates.dev/verifier/gates-audit"
#: The predicate field (an in-toto extension: consumers ignore fields they do not know) that
#: holds the audit's figures: verdict, formal_alignment_steps, contract statuses, policy.
RESULT_FIELD = "gatesAudit"
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?([^:/]+):(.+)$")  # git@host:owner/name.git


class ResourceError(GatesError):
    """The repository has no remote to name it by, and no --resource-uri was given."""


def public_remote_url(url: str) -> str:
    """A remote's URL as others can name it: credentials and the user part removed
    (`https://token@host/x` and `git@host:x` both name `host/x`)."""
    scp = _SCP_LIKE.match(url)
    if scp and "://" not in url:
        return f"ssh://{scp.group(1)}/{scp.group(2)}"
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def repository_uri(root: Path, option: str | None) -> str:
    """`--resource-uri` when given, else the URL of the remote `origin` (or the only remote)."""
    if option:
        return option.removeprefix("git+")
    remotes = run_git(root, "remote").decode("utf-8", "replace").split()
    name = "origin" if "origin" in remotes else (remotes[0] if len(remotes) == 1 else None)
    if name is None:
        found = "no remote" if not remotes else f"remotes {', '.join(remotes)} and no origin"
        raise ResourceError(
            f"cannot name the repository for the VSA's resourceUri: {found}",
            file=root,
            hint="pass --resource-uri git+https://HOST/OWNER/NAME (what others clone it as)",
        )
    url = run_git(root, "remote", "get-url", name).decode("utf-8", "replace").strip()
    return public_remote_url(url)


def envelope_digest(envelope: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(envelope)).hexdigest()


def vsa_statement(
    *,
    summary: AuditSummary,
    repository: str,
    policy_uri: str,
    policy_digest: str,
    inputs: list[tuple[str, dict[str, Any]]],
    time_verified: str,
) -> dict[str, Any]:
    """A VSA v1 statement: the commit audited, who verified it, under which policy (its
    digest and, when protected, its commit), from which input attestations, PASSED or
    FAILED, and the audit's figures under `gatesAudit`."""
    head = summary.commit
    policy_digests = {"sha256": policy_digest}
    if summary.policy.protected and summary.policy.commit:
        policy_digests["gitCommit"] = summary.policy.commit
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": repository, "digest": {"gitCommit": head or ""}}],
        "predicateType": VSA_PREDICATE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID, "version": {"gates": __version__}},
            "timeVerified": time_verified,
            "resourceUri": f"git+{repository}@{head or ''}",
            "policy": {"uri": policy_uri, "digest": policy_digests},
            "inputAttestations": [
                {"uri": uri, "digest": {"sha256": envelope_digest(envelope)}}
                for uri, envelope in inputs
            ],
            "verificationResult": "PASSED" if summary.verdict == "pass" else "FAILED",
            "verifiedLevels": [],
            "slsaVersion": "1.0",
            RESULT_FIELD: summary.model_dump(mode="json"),
        },
    }
