"""`--format json`: the audit object (docs/cli.md), keys in a stable order."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from gates.contracts.model import ContractResult
from gates.engine.audit import AuditResult
from gates.receipts.evidence import Evidence
from gates.receipts.verify import Judgement, Status


def _counting(judgement: Judgement, counts: bool) -> dict[str, Any]:
    """The class and weight that count now: formal/1 only for what counts, rejected: null/0."""
    if judgement.status is Status.REJECTED:
        return {"evidenceClass": None, "formalWeight": 0}
    return {"evidenceClass": "formal" if counts else "probe", "formalWeight": int(counts)}


def receipt_entry(judgement: Judgement, *, counts: bool | None = None) -> dict[str, Any]:
    """One receipt: what counts now (`evidenceClass`, `formalWeight`) and its `stamped` pair."""
    receipt = judgement.receipt
    counting = judgement.status is Status.FORMAL if counts is None else counts
    stamped = (
        {"evidenceClass": receipt.evidence_class.value, "formalWeight": receipt.formal_weight}
        if receipt
        else None
    )
    return {
        "path": judgement.path,
        "id": receipt.id if receipt else None,
        "kind": receipt.kind.value if receipt else None,
        "framework": receipt.framework.value if receipt and receipt.framework else None,
        **_counting(judgement, counting),
        "stamped": stamped,
        "status": judgement.status.value,
        "reason": judgement.reason,
        "signer": judgement.signer,
    }


def evidence_entry(evidence: Evidence) -> dict[str, Any]:
    return {
        **receipt_entry(evidence.judgement, counts=evidence.counts),
        "counts": evidence.counts,
        "reason": evidence.reason,
    }


def contract_entry(result: ContractResult, today: dt.date) -> dict[str, Any]:
    return {
        "id": result.spec.id,
        "title": result.spec.title,
        "blocking": result.spec.blocking,
        "dischargeStatus": result.status.value,
        "criteria": [{"name": c.name, "met": c.met, "detail": c.detail} for c in result.criteria],
        "discharge": result.spec.discharge,
        "remediation": list(result.spec.remediation),
        "evidence": [evidence_entry(e) for e in result.evidence],
        "waived": result.waived(today) and result.status != "discharged",
        "waivers": [w.to_json(today) for w in result.waivers],
    }


def policy_object(result: AuditResult) -> dict[str, Any]:
    policy = result.policy
    return {
        "protected": bool(policy and policy.protected),
        "ref": policy.ref if policy else None,
        "commit": policy.commit if policy else None,
        "origin": policy.origin if policy else None,
        "description": policy.describe() if policy else "not resolved",
        "proposed_changes": list(result.proposed_changes),
        "trust_anchors": {
            "source": policy.anchors.source if policy else "none",
            "signers": [
                {
                    "name": s.name,
                    "keyid": s.keyid,
                    "frameworks": list(s.frameworks),
                    "revoked": s.revoked,
                }
                for s in (policy.anchors.signers if policy else ())
            ],
        },
    }


def audit_object(result: AuditResult) -> dict[str, Any]:
    found: dict[str, Any] = {
        "verdict": result.verdict,
        "policy": policy_object(result),
        "formal_alignment_steps": result.formal_alignment_steps,
        "required_steps": result.required_steps,
        "blockers": list(result.blockers),
        "freeze": result.freeze.to_json(),
        "contracts": [contract_entry(c, result.today) for c in result.contracts],
        "waivers": [w.to_json(result.today) for w in result.waivers],
        "receipts": [receipt_entry(j) for j in result.receipts],
    }
    if result.alignment.replay:  # the detection power of the replay the policy requires
        found["replay_detection_power"] = result.alignment.replay.sentence()
    return found


def render(result: AuditResult) -> str:
    # Compact on purpose: the C encoder only runs without indent, and the
    # object can list tens of thousands of receipts. Pipe through `jq` to read.
    return json.dumps(audit_object(result), ensure_ascii=False)
