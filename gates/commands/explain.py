"""`gates explain ID`: one contract, each criterion now, and what would discharge it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from gates import exitcodes
from gates.contracts.model import ContractResult
from gates.criteria import DischargeStatus
from gates.echo import Output
from gates.engine.audit import broken_file_result, explain_contract, run_audit
from gates.engine.inputs import AuditInputs
from gates.errors import GatesError
from gates.reporters.json_report import contract_entry


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


def _in_force(inputs: AuditInputs) -> list[ContractResult]:
    """The contracts in force and the files that do not load, unevaluated (to find one)."""
    found = [
        ContractResult(spec, path, DischargeStatus.ERROR, ()) for path, spec in inputs.contracts
    ]
    return found + [broken_file_result(error, inputs.root) for error in inputs.file_errors]


def remediation_commands(inputs: AuditInputs, found: ContractResult) -> list[str]:
    """The contract's remediation with the declared entrypoints filled in."""
    fills: dict[str, str] = {}
    if inputs.results_spec is not None:
        params = inputs.results_params
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


def explain(inputs: AuditInputs, contract_id: str, out: Output) -> int:
    """One contract evaluated (with the freeze and the receipts it needs), not the audit."""
    chosen = find_contract(_in_force(inputs), contract_id)
    if chosen.spec.check:
        result = explain_contract(inputs, chosen.spec.id)
        found = result.contracts[0]
    else:  # a contract file that does not load: its error result, as the audit shows it
        result = run_audit(inputs)
        found = find_contract(result.contracts, chosen.spec.id)
    commands = remediation_commands(inputs, found)
    if out.as_json:
        entry = contract_entry(found, result.today) | {"remediation": commands}
        out.echo(json.dumps(entry, indent=2, ensure_ascii=False))
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
    out.echo("\n".join(lines))
    return exitcodes.OK if not found.blocks(result.today) else exitcodes.BLOCKED
