"""`gates explain ID`: one contract, each criterion now, and what would discharge it."""

from __future__ import annotations

import json

from gates import exitcodes
from gates.commands import Echo
from gates.engine import run_audit
from gates.errors import GatesError
from gates.reporters.json_report import contract_entry
from gates.reporters.status_md import short_id
from gates.workspace import Workspace


def explain(workspace: Workspace, contract_id: str, *, as_json: bool, echo: Echo) -> int:
    result = run_audit(workspace)
    found = next((c for c in result.contracts if c.spec.id == contract_id), None)
    short = [c for c in result.contracts if short_id(c.spec.id) == contract_id]
    if found is None and len(short) == 1:  # the short id the status block shows beside the long
        found = short[0]
    if found is None:
        known = ", ".join(c.spec.id for c in result.contracts)
        raise GatesError(f"no contract {contract_id!r}", hint=f"known: {known}")
    if as_json:
        echo(json.dumps(contract_entry(found, result.today), indent=2, ensure_ascii=False))
        return exitcodes.OK if not found.blocks(result.today) else exitcodes.BLOCKED
    lines = [
        f"{found.spec.id}: {found.spec.title}",
        f"  check {found.spec.check}, {'blocking' if found.spec.blocking else 'not blocking'}, "
        f"defined in {result.relative(found.source)}",
        f"  status {found.status.value}"
        + (" (waived)" if found.waived(result.today) and found.status != "discharged" else ""),
        "criteria:",
        *(f"  [{'x' if c.met else ' '}] {c.name}: {c.detail}" for c in found.criteria),
        f"discharged when: {found.spec.discharge}",
    ]
    if found.spec.remediation:
        lines.append("commands that would discharge it:")
        lines += [f"  $ {command}" for command in found.spec.remediation]
    lines += [f"waiver: {w.describe(result.today)}" for w in found.waivers]
    if found.evidence:
        lines.append("evidence:")
        lines += [
            f"  {e.judgement.path}: {'counts' if e.counts else 'counts 0'} ({e.reason})"
            for e in found.evidence
        ]
    echo("\n".join(lines))
    return exitcodes.OK if not found.blocks(result.today) else exitcodes.BLOCKED
