"""`gates explain ID`: one contract, each criterion now, and what would discharge it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from gates import exitcodes
from gates.contracts import results_schema_and_provenance as results_contract
from gates.contracts.model import ContractResult, EvaluationError
from gates.echo import Echo
from gates.engine.audit import AuditResult, results_spec, run_audit
from gates.errors import GatesError
from gates.reporters.json_report import contract_entry
from gates.workspace import Workspace


def find_contract(contracts: Sequence[ContractResult], given: str) -> ContractResult:
    """The contract ``given`` names: its full id, or a short form that names one contract
    only (`tensor-inventory` for `contract_environment.tensor-inventory`, or a prefix)."""
    exact = [c for c in contracts if c.spec.id == given]
    short = [
        c for c in contracts if c.spec.id.rsplit(".", 1)[-1] == given or c.spec.id.endswith(given)
    ]
    prefix = [
        c
        for c in contracts
        if c.spec.id.startswith(given) or c.spec.id.rsplit(".", 1)[-1].startswith(given)
    ]
    for matches in (exact, short, prefix):
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(c.spec.id for c in matches)
            raise GatesError(
                f"{given!r} names more than one contract: {names}", hint="give more of the id"
            )
    known = ", ".join(c.spec.id for c in contracts)
    raise GatesError(f"no contract {given!r}", hint=f"known: {known}")


def remediation_commands(result: AuditResult, found: ContractResult) -> list[str]:
    """The contract's remediation with the declared entrypoints filled in."""
    spec = results_spec([(c.source, c.spec) for c in result.contracts])
    fills: dict[str, str] = {}
    if spec is not None:
        try:
            params = results_contract.parse_params(spec.params)
        except EvaluationError:
            params = None
        if params is not None:
            for side, declared in (
                ("reference", params.reference_entrypoint),
                ("candidate", params.candidate_entrypoint),
            ):
                if declared:
                    fills[f"<{side} entrypoint>"] = shlex.join(declared)
    commands = []
    for template in found.spec.remediation:
        filled = template
        for placeholder, value in fills.items():
            filled = filled.replace(placeholder, value)
        commands.append(filled)
    return commands


def explain(workspace: Workspace, contract_id: str, *, as_json: bool, echo: Echo) -> int:
    result = run_audit(workspace)
    found = find_contract(result.contracts, contract_id)
    commands = remediation_commands(result, found)
    if as_json:
        entry = contract_entry(found, result.today) | {"remediation": commands}
        echo(json.dumps(entry, indent=2, ensure_ascii=False))
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
    if commands:
        lines.append("commands that would discharge it:")
        lines += [f"  $ {command}" for command in commands]
    lines += [f"waiver: {w.describe(result.today)}" for w in found.waivers]
    if found.evidence:
        lines.append("evidence:")
        lines += [
            f"  {e.judgement.path}: {'counts' if e.counts else 'counts 0'} ({e.reason})"
            for e in found.evidence
        ]
    echo("\n".join(lines))
    return exitcodes.OK if not found.blocks(result.today) else exitcodes.BLOCKED
