"""`gates explain ID`: one contract, each criterion now, and what would discharge it."""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gates.contracts.model import ContractResult
from gates.core import exitcodes
from gates.core.criteria import DischargeStatus
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.json_writer import indented_json
from gates.engine.audit import broken_file_result, explain_contract, run_audit
from gates.engine.inputs import AuditInputs
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


@dataclass(frozen=True)
class Explanation:
    """What `gates explain ID` found: the contract's result as the audit would report it,
    the day its waivers are judged on, where it is defined and the commands that would
    discharge it."""

    found: ContractResult
    today: dt.date
    source: str
    commands: tuple[str, ...]

    @property
    def blocks(self) -> bool:
        return self.found.blocks(self.today)


def explanation(inputs: AuditInputs, contract_id: str) -> Explanation:
    """One contract evaluated (with the freeze and the receipts it needs), not the audit."""
    chosen = find_contract(_in_force(inputs), contract_id)
    if chosen.spec.check:
        result = explain_contract(inputs, chosen.spec.id)
        found = result.contracts[0]
    else:  # a contract file that does not load: its error result, as the audit shows it
        result = run_audit(inputs)
        found = find_contract(result.contracts, chosen.spec.id)
    commands = tuple(remediation_commands(inputs, found))
    return Explanation(found, result.today, result.relative(found.source), commands)


def render_json(explained: Explanation) -> str:
    entry = contract_entry(explained.found, explained.today)
    return indented_json(entry | {"remediation": list(explained.commands)}, ensure_ascii=False)


def render_text(explained: Explanation) -> str:
    found, today, commands = explained.found, explained.today, explained.commands
    lines = [
        f"{found.spec.id}: {found.spec.title}",
        f"  check {found.spec.check}, {'blocking' if found.spec.blocking else 'not blocking'}, "
        f"defined in {explained.source}",
        f"  status {found.status.value}"
        + (" (waived)" if found.waived(today) and found.status != "discharged" else ""),
        "criteria:",
        *(f"  [{'x' if c.met else ' '}] {c.name}: {c.detail}" for c in found.criteria),
        f"discharged when: {found.spec.discharge}",
    ]
    if commands:
        lines.append("commands that would discharge it:")
        lines += [f"  $ {command}" for command in commands]
    lines += [f"waiver: {w.describe(today)}" for w in found.waivers]
    if found.evidence:
        lines.append("evidence:")
        lines += [
            f"  {e.judgement.path}: {'counts' if e.counts else 'counts 0'} ({e.reason})"
            for e in found.evidence
        ]
    return "\n".join(lines)


#: --format -> the renderer of an Explanation
RENDERERS: dict[str, Callable[[Explanation], str]] = {"text": render_text, "json": render_json}


def explain(inputs: AuditInputs, contract_id: str, out: Output) -> int:
    """Exit 0 when the contract does not block (today), else 1."""
    explained = explanation(inputs, contract_id)
    out.render(RENDERERS, explained)
    return exitcodes.BLOCKED if explained.blocks else exitcodes.OK
