"""`gates attest export`: every accepted envelope, and the verdict as a SLSA VSA."""

from __future__ import annotations

import json
import time
from pathlib import Path

from gates import exitcodes
from gates.atomic import write_text_atomic
from gates.canonical import content_id, pretty_json
from gates.echo import Output
from gates.engine.audit import run_audit
from gates.engine.inputs import AuditInputs
from gates.engine.summary import summarize
from gates.receipts.verify import Status
from gates.reporters.verify_export import verify_export
from gates.reporters.vsa import repository_uri, vsa_statement
from gates.trust.anchors import (
    Anchors,
    TrustError,
    load_trust_file,
    trust_file_from_environment,
)
from gates.trust.envelope import sign_statement
from gates.trust.keys import key_from_environment, load_key


def _envelope_name(receipt_path: str) -> str:
    return receipt_path.replace("/", "__").removesuffix(".receipt.json") + ".dsse.json"


def export(
    inputs: AuditInputs,
    folder: Path,
    *,
    key_path: Path | None,
    out: Output,
    resource_uri: str | None = None,
) -> int:
    """Exit 0 when the verdict is pass, 1 when blocked (the files are written either way)."""
    workspace = inputs.workspace
    as_json, echo = out.as_json, out.echo
    key = load_key(key_path) if key_path else key_from_environment()
    repository = repository_uri(workspace.root, resource_uri)
    result = run_audit(inputs)
    envelopes = []
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
        write_text_atomic(folder / name, pretty_json(envelope))
        envelopes.append((judgement.path, envelope))
        written.append(name)
    policy = result.policy
    statement = vsa_statement(
        summary=summarize(result),
        repository=repository,
        policy_uri=(
            f"git+{(policy.ref or '').removeprefix('commit ')}@{policy.commit}"
            if policy and policy.protected
            else "unprotected"
        ),
        policy_digest=policy.digest if policy else "",
        inputs=envelopes,
        time_verified=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    if key is not None:
        vsa_name = "vsa.dsse.json"
        write_text_atomic(folder / vsa_name, pretty_json(sign_statement(statement, key)))
    else:
        vsa_name = "vsa.intoto.json"
        write_text_atomic(folder / vsa_name, pretty_json(statement))
    summary = {
        "verdict": result.verdict,
        "envelopes": written,
        "vsa": vsa_name,
        "vsa_signed": key is not None,
        "resourceUri": statement["predicate"]["resourceUri"],
        "out": str(folder),
    }
    if as_json:
        echo(json.dumps(summary, indent=2))
    else:
        echo(f"wrote {len(written)} envelope(s) and {vsa_name} to {folder}")
        echo(f"verificationResult={statement['predicate']['verificationResult']}")
    return exitcodes.OK if result.verdict == "pass" else exitcodes.BLOCKED


def verify(folder: Path, anchors: Anchors, *, expect_pass: bool, out: Output) -> int:
    """Exit 0 when every envelope and the VSA verify (and, with expect_pass, the VSA says
    PASSED); 1 otherwise, each reason on its own line."""
    check = verify_export(folder, anchors)
    summary = check.summary
    failed = not check.ok or (expect_pass and check.verification_result != "PASSED")
    echo = out.echo
    if out.as_json:
        document = {
            "verified": check.ok,
            "problems": list(check.problems),
            "envelopes": [
                {"file": e.name, "verified": e.ok, "reason": e.reason} for e in check.envelopes
            ],
            "vsa": {"file": check.vsa.name, "verified": check.vsa.ok, "reason": check.vsa.reason},
            "resourceUri": check.resource_uri,
            "verificationResult": check.verification_result,
            "audit": summary.model_dump(mode="json") if summary else None,
            "not_referenced_by_vsa": list(check.unreferenced),
            "trust_anchors": anchors.source,
        }
        echo(json.dumps(document, indent=2))
        return exitcodes.BLOCKED if failed else exitcodes.OK
    for entry in (*check.envelopes, check.vsa):
        echo(f"{entry.name}: {'ok' if entry.ok else 'FAILED'} ({entry.reason})")
    for name in check.unreferenced:
        echo(f"{name}: verifies, but the VSA does not name it as an input")
    if check.ok and summary is not None:
        tensor = (
            f", tensor_aligned_steps = {summary.tensor_aligned_steps} / "
            f"{summary.tensor_required_steps}"
            if summary.tensor_aligned_steps is not None
            else ""
        )
        echo(f"resourceUri={check.resource_uri}")
        echo(
            f"verificationResult={check.verification_result} verdict={summary.verdict} "
            f"formal_alignment_steps = {summary.formal_alignment_steps} / "
            f"{summary.required_steps}{tensor}"
        )
        policy = summary.policy
        echo(
            f"policy: {policy.ref or '-'} at {policy.commit or '-'}"
            + ("" if policy.protected else " (unprotected)")
        )
        for contract in summary.contracts:
            echo(f"  {contract.id}: {contract.status}{' (blocking)' if contract.blocking else ''}")
        echo(f"verified: {len(check.envelopes)} envelope(s) and the VSA ({anchors.source})")
    else:
        for problem in check.problems:
            echo(f"problem: {problem}")
        echo(f"NOT verified: {len(check.problems)} problem(s)")
    if check.ok and expect_pass and check.verification_result != "PASSED":
        echo(f"expected PASSED, the VSA says {check.verification_result}")
    return exitcodes.BLOCKED if failed else exitcodes.OK


def anchors_for_verify(option: Path | None) -> Anchors:
    """The trust file named by --trust or GATES_TRUST: verification needs one."""
    path = trust_file_from_environment(option)
    if path is None:
        raise TrustError(
            "no trust file to verify with",
            hint="pass --trust FILE (the signers you trust) or set GATES_TRUST",
        )
    anchors = load_trust_file(path)
    return Anchors(f"trust file {path}", anchors.signers, origin="--trust")
