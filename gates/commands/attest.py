"""`gates attest export`: every accepted envelope, and the verdict as a SLSA VSA."""

from __future__ import annotations

import json
import time
from pathlib import Path

from gates import exitcodes
from gates.atomic import write_text_atomic
from gates.canonical import content_id, pretty_json
from gates.commands import Echo
from gates.engine import run_audit
from gates.receipts.verify import Status
from gates.trust.envelope import sign_statement
from gates.trust.keys import key_from_environment, load_key
from gates.trust.vsa import vsa_statement
from gates.workspace import Workspace


def _envelope_name(receipt_path: str) -> str:
    return receipt_path.replace("/", "__").removesuffix(".receipt.json") + ".dsse.json"


def export(
    workspace: Workspace, out: Path, *, key_path: Path | None, as_json: bool, echo: Echo
) -> int:
    """Exit 0 when the verdict is pass, 1 when blocked (the files are written either way)."""
    key = load_key(key_path) if key_path else key_from_environment()
    result = run_audit(workspace)
    inputs = []
    written = []
    for judgement in result.receipts:
        receipt = judgement.receipt
        if receipt is None or judgement.status is Status.REJECTED:
            continue
        document = json.loads((workspace.root / judgement.path).read_bytes())
        envelope = document.get("attestation")
        if not isinstance(envelope, dict) or content_id(document) != receipt.id:
            continue  # unsigned, or changed since the audit judged it
        name = _envelope_name(judgement.path)
        write_text_atomic(out / name, pretty_json(envelope))
        inputs.append((judgement.path, envelope))
        written.append(name)
    policy = result.policy
    statement = vsa_statement(
        head=result.freeze.head,
        repository=workspace.root.name,
        verdict=result.verdict,
        policy_uri=(
            f"git+{(policy.ref or '').removeprefix('commit ')}@{policy.commit}"
            if policy and policy.protected
            else "unprotected"
        ),
        policy_digest=policy.digest if policy else "",
        inputs=inputs,
        time_verified=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    if key is not None:
        vsa_name = "vsa.dsse.json"
        write_text_atomic(out / vsa_name, pretty_json(sign_statement(statement, key)))
    else:
        vsa_name = "vsa.intoto.json"
        write_text_atomic(out / vsa_name, pretty_json(statement))
    summary = {
        "verdict": result.verdict,
        "envelopes": written,
        "vsa": vsa_name,
        "vsa_signed": key is not None,
        "out": str(out),
    }
    if as_json:
        echo(json.dumps(summary, indent=2))
    else:
        echo(f"wrote {len(written)} envelope(s) and {vsa_name} to {out}")
        echo(f"verificationResult={statement['predicate']['verificationResult']}")
    return exitcodes.OK if result.verdict == "pass" else exitcodes.BLOCKED
