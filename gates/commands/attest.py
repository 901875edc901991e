"""`gates attest export`: every accepted envelope, and the verdict as a SLSA VSA."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gates.core import exitcodes
from gates.core.atomic import write_text_atomic
from gates.core.content_ids import content_id
from gates.core.echo import Output
from gates.core.invocation import Given
from gates.core.json_writer import indented_json, pretty_json
from gates.engine.audit import run_audit
from gates.engine.inputs import AuditInputs
from gates.engine.summary import summarize
from gates.receipts.verify import Status
from gates.reporters.verify_export import ExportCheck, verify_export
from gates.reporters.vsa import repository_uri, vsa_statement
from gates.trust.anchors import Anchors, TrustError, load_trust_file
from gates.trust.envelope import sign_statement
from gates.trust.keys import configured_key, load_key


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
    exported = exported_to(inputs, folder, key_path=key_path, resource_uri=resource_uri)
    out.render(EXPORT_RENDERERS, exported)
    return exitcodes.OK if exported.verdict == "pass" else exitcodes.BLOCKED


@dataclass(frozen=True)
class Exported:
    """What `gates attest export` wrote: the verdict, the envelopes' file names, the VSA's
    (signed or not), the repository it names and its result, and the folder."""

    verdict: str
    envelopes: tuple[str, ...]
    vsa: str
    vsa_signed: bool
    resource_uri: str
    verification_result: str
    folder: str


def exported_to(
    inputs: AuditInputs, folder: Path, *, key_path: Path | None, resource_uri: str | None
) -> Exported:
    """Every accepted receipt's envelope and the verdict's VSA written to ``folder``."""
    workspace = inputs.workspace
    key = load_key(key_path) if key_path else configured_key(inputs.invocation.signing_key)
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
    return Exported(
        result.verdict,
        tuple(written),
        vsa_name,
        key is not None,
        statement["predicate"]["resourceUri"],
        statement["predicate"]["verificationResult"],
        str(folder),
    )


def render_exported_json(exported: Exported) -> str:
    summary = {
        "verdict": exported.verdict,
        "envelopes": list(exported.envelopes),
        "vsa": exported.vsa,
        "vsa_signed": exported.vsa_signed,
        "resourceUri": exported.resource_uri,
        "out": exported.folder,
    }
    return indented_json(summary)


def render_exported_text(exported: Exported) -> str:
    return (
        f"wrote {len(exported.envelopes)} envelope(s) and {exported.vsa} to {exported.folder}\n"
        f"verificationResult={exported.verification_result}"
    )


#: --format -> the renderer of `gates attest export`'s Exported
EXPORT_RENDERERS: dict[str, Callable[[Exported], str]] = {
    "text": render_exported_text,
    "json": render_exported_json,
}


@dataclass(frozen=True)
class Verified:
    """What `gates attest verify` found: each file's check, the trust anchors it used, and
    whether the VSA had to say PASSED."""

    check: ExportCheck
    anchors_source: str
    expect_pass: bool

    @property
    def failed(self) -> bool:
        check = self.check
        return not check.ok or (self.expect_pass and check.verification_result != "PASSED")


def render_verified_json(verified: Verified) -> str:
    check = verified.check
    summary = check.summary
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
        "trust_anchors": verified.anchors_source,
    }
    return indented_json(document)


def render_verified_text(verified: Verified) -> str:
    check = verified.check
    summary = check.summary
    lines = [
        f"{e.name}: {'ok' if e.ok else 'FAILED'} ({e.reason})"
        for e in (*check.envelopes, check.vsa)
    ]
    lines += [
        f"{name}: verifies, but the VSA does not name it as an input" for name in check.unreferenced
    ]
    if check.ok and summary is not None:
        tensor = (
            f", tensor_aligned_steps = {summary.tensor_aligned_steps} / "
            f"{summary.tensor_required_steps}"
            if summary.tensor_aligned_steps is not None
            else ""
        )
        lines.append(f"resourceUri={check.resource_uri}")
        lines.append(
            f"verificationResult={check.verification_result} verdict={summary.verdict} "
            f"formal_alignment_steps = {summary.formal_alignment_steps} / "
            f"{summary.required_steps}{tensor}"
        )
        policy = summary.policy
        lines.append(
            f"policy: {policy.ref or '-'} at {policy.commit or '-'}"
            + ("" if policy.protected else " (unprotected)")
        )
        lines += [
            f"  {contract.id}: {contract.status}{' (blocking)' if contract.blocking else ''}"
            for contract in summary.contracts
        ]
        lines.append(
            f"verified: {len(check.envelopes)} envelope(s) and the VSA ({verified.anchors_source})"
        )
    else:
        lines += [f"problem: {problem}" for problem in check.problems]
        lines.append(f"NOT verified: {len(check.problems)} problem(s)")
    if check.ok and verified.expect_pass and check.verification_result != "PASSED":
        lines.append(f"expected PASSED, the VSA says {check.verification_result}")
    return "\n".join(lines)


#: --format -> the renderer of `gates attest verify`'s Verified
VERIFY_RENDERERS: dict[str, Callable[[Verified], str]] = {
    "text": render_verified_text,
    "json": render_verified_json,
}


def verify(folder: Path, anchors: Anchors, *, expect_pass: bool, out: Output) -> int:
    """Exit 0 when every envelope and the VSA verify (and, with expect_pass, the VSA says
    PASSED); 1 otherwise, each reason on its own line."""
    verified = Verified(verify_export(folder, anchors), anchors.source, expect_pass)
    out.render(VERIFY_RENDERERS, verified)
    return exitcodes.BLOCKED if verified.failed else exitcodes.OK


def anchors_for_verify(given: Given[Path] | None) -> Anchors:
    """The trust file named by --trust or GATES_TRUST: verification needs one."""
    path = given.value if given is not None else None
    if path is None:
        raise TrustError(
            "no trust file to verify with",
            hint="pass --trust FILE (the signers you trust) or set GATES_TRUST",
        )
    anchors = load_trust_file(path)
    return Anchors(f"trust file {path}", anchors.signers, origin="--trust")
