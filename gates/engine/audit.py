"""The audit: judge the freeze, have the receipts stage re-judge every receipt
(gates/receipts/judge_all.py), evaluate every contract, attach the waivers, decide.

Fail closed: the verdict is `pass` only when at least one contract exists,
every blocking contract is discharged, no contract file failed to load and
no receipt was rejected.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gates.contracts import results_schema_and_provenance as results_contract
from gates.contracts.model import ContractResult, Evaluation, EvaluationContext, EvaluationError
from gates.contracts.registry import FREEZE_CHECK, MODULES, evaluator
from gates.core.criteria import Criterion, DischargeStatus, discharge_status
from gates.core.detection import DetectionPower
from gates.engine.inputs import AuditInputs
from gates.freeze.check import FreezeReport, SourceTree, evaluate_freeze
from gates.policy.contract_files import ContractFileError, ContractSpec
from gates.policy.in_force import Policy
from gates.policy.sides import CodeJudge, SideName, SidePaths
from gates.policy.waivers import LoadedWaiver, today
from gates.receipts.alignment import Alignment, Side, formal_alignment
from gates.receipts.binding import IsolationPolicy
from gates.receipts.evidence import Evidence
from gates.receipts.judge_all import Wanted, index_fingerprint, judge_receipts
from gates.receipts.model import Receipt
from gates.receipts.verify import Judgement, JudgingContext, Status
from gates.replay.gate import gate_on_replay
from gates.workspace.repository import Workspace, roots_of

RESULTS_CHECK = results_contract.CHECK


@dataclass(frozen=True)
class AuditResult:
    verdict: Literal["pass", "blocked"]
    blockers: tuple[str, ...]
    freeze: FreezeReport
    contracts: tuple[ContractResult, ...]
    receipts: tuple[Judgement, ...]
    alignment: Alignment
    configuration_errors: tuple[str, ...]
    waivers: tuple[LoadedWaiver, ...] = ()
    today: dt.date = dataclasses.field(default_factory=today)
    root: Path = Path()
    policy: Policy | None = None

    @property
    def proposed_changes(self) -> tuple[str, ...]:
        if self.policy is None:
            return ()
        return self.policy.proposed_changes + self.policy.anchors.proposed_changes

    def relative(self, path: Path) -> str:
        return (
            path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)
        )

    @property
    def formal_alignment_steps(self) -> int:
        return self.alignment.steps

    @property
    def required_steps(self) -> int:
        return self.alignment.required


@dataclass(frozen=True)
class WorkspaceState:
    """The freeze, the freeze contracts and every receipt, judged once."""

    inputs: AuditInputs
    freeze: FreezeReport
    receipts: tuple[Judgement, ...]
    #: the freeze contracts' results, by their place in the contract set
    frozen: Mapping[int, ContractResult] = dataclasses.field(default_factory=dict)

    @property
    def workspace(self) -> Workspace:
        return self.inputs.workspace

    @property
    def policy(self) -> Policy:
        return self.inputs.policy

    @property
    def loaded(self) -> list[tuple[Path, ContractSpec]]:
        return self.inputs.contracts

    @property
    def file_errors(self) -> list[ContractFileError]:
        return self.inputs.file_errors


def code_judge(inputs: AuditInputs, freeze: FreezeReport) -> CodeJudge:
    """Judges each side's evidence by its side's code (gates/policy/sides.py), with the sides'
    frameworks from the results contract in force."""
    frameworks: dict[str, SideName] = {"torch": "reference", "paddle": "candidate"}
    params = inputs.results_params
    if params is not None:
        frameworks = {
            params.reference_framework.value: "reference",
            params.candidate_framework.value: "candidate",
        }
    workspace, policy = inputs.workspace, inputs.policy
    sides = workspace.config.sides
    return CodeJudge(
        workspace.root,
        SourceTree(workspace.config),
        SidePaths(sides.reference, sides.candidate),
        freeze.pin,
        frameworks,
        policy_commit=policy.commit if policy.protected else None,
        policy_name=policy.ref or "",
        pin_source_tree=freeze.pin_source_tree,
    )


def judging_context(
    inputs: AuditInputs, freeze: FreezeReport, freeze_discharged: bool
) -> JudgingContext:
    """What receipts are judged against now: the freeze contract's status, the pin's tree
    and the trust anchors in force."""
    return JudgingContext(
        inputs.root,
        inputs.cache,
        freeze_discharged,
        freeze.pin_source_tree,
        anchors=inputs.policy.anchors,
        external=roots_of(inputs.workspace),
    )


def evaluation_context(
    inputs: AuditInputs,
    freeze: FreezeReport,
    receipts: tuple[Judgement, ...],
    alignment: Alignment | None = None,
) -> EvaluationContext:
    return EvaluationContext(
        inputs.workspace,
        freeze,
        receipts,
        alignment=alignment,
        policy=inputs.policy,
        cache=inputs.cache,
        progress=inputs.invocation.progress,
        sandbox=inputs.sandbox_host,
        entrypoints=inputs.declared_entrypoints,
        results_params=inputs.parsed_results,
    )


def freeze_results(inputs: AuditInputs, freeze: FreezeReport) -> dict[int, ContractResult]:
    """The freeze contracts evaluated (once per audit), by their place in the contract set."""
    bare = evaluation_context(inputs, freeze, ())
    return {
        index: evaluate_contract(path, spec, bare)
        for index, (path, spec) in enumerate(inputs.contracts)
        if spec.check == FREEZE_CHECK
    }


def freeze_discharged(results: Mapping[int, ContractResult]) -> bool:
    """Receipts are stamped and judged formal only while every freeze contract is discharged
    (and one exists)."""
    return bool(results) and all(r.status is DischargeStatus.DISCHARGED for r in results.values())


def judge_workspace(
    inputs: AuditInputs,
    *,
    freeze: FreezeReport | None = None,
    between_reads: Callable[[], None] | None = None,
    wanted: Wanted | None = None,
) -> WorkspaceState:
    """The freeze (``freeze`` when the command has just judged it), the freeze contracts and
    every receipt, judged once (with ``wanted``, a checker's inputs: only the receipts that
    decide them, each judged as the whole audit judges it)."""
    workspace = inputs.workspace
    if freeze is None:
        freeze = evaluate_freeze(
            workspace.root, workspace.config, inputs.freeze_inputs, between_reads=between_reads
        )
    frozen = freeze_results(inputs, freeze)
    context = judging_context(inputs, freeze, freeze_discharged(frozen))
    sandbox = workspace.config.sandbox
    receipts = judge_receipts(
        context,
        workspace.config.evidence.locations,
        index_fingerprint(inputs.policy.digest, context),
        index_file=inputs.caches.index,
        progress=inputs.invocation.progress,
        entrypoints=inputs.entrypoints,
        code=code_judge(inputs, freeze),
        isolation=IsolationPolicy(sandbox.required, sandbox.recorded),
        wanted=wanted,
    )
    return WorkspaceState(inputs, freeze, receipts, frozen)


def _normalize(value: str | int | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def profile_mismatch(required: dict[str, str], receipt: Receipt) -> str:
    """Empty when the receipt's parallel profile satisfies the contract (``required``, values
    normalized by `_normalize`), else why not."""
    return profile_difference(required, receipt.provenance.profile)


def profile_difference(required: dict[str, str], have: Mapping[str, str]) -> str:
    """Empty when ``have`` satisfies ``required`` (`gates run`'s pre-flight asks it too)."""
    if all(key in have and have[key].lower() == want.lower() for key, want in required.items()):
        return ""
    problems = []
    for key, want in sorted(required.items()):
        if key not in have:
            problems.append(f"{key} missing (contract requires {key}={want})")
        elif have[key].lower() != want.lower():
            problems.append(f"{key}={have[key]} (contract requires {key}={want})")
    return "; ".join(problems)


def contract_evidence(spec: ContractSpec, receipts: tuple[Judgement, ...]) -> tuple[Evidence, ...]:
    """The receipts of the kinds a contract looks at, each saying whether it counts for it."""
    evidence = []
    required = {key: _normalize(value) for key, value in spec.profile.items()}
    for judgement in receipts:
        receipt = judgement.receipt
        if receipt is None or receipt.kind not in spec.evidence_kinds:
            continue
        mismatch = profile_mismatch(required, receipt)
        if mismatch:
            evidence.append(Evidence(judgement, False, f"counts 0: other profile: {mismatch}"))
        else:
            evidence.append(
                Evidence(judgement, judgement.status is Status.FORMAL, judgement.reason)
            )
    return tuple(evidence)


def evaluate_contract(
    path: Path,
    spec: ContractSpec,
    context: EvaluationContext,
    evidence: tuple[Evidence, ...] | None = None,
) -> ContractResult:
    """Run one evaluator; an unknown check or an evaluator failure is status `error`."""
    evaluate = evaluator(spec.check)
    if evidence is None:
        evidence = contract_evidence(spec, context.receipts)
    if evaluate is None:
        known = ", ".join(sorted(MODULES))
        detail = f"no evaluator named '{spec.check}' in this version of gates (known: {known})"
        return _error_result(path, spec, "evaluator_available", detail, evidence)
    try:
        found = evaluate(_with_evidence(context, evidence), spec.params)
    except EvaluationError as exc:
        return _error_result(path, spec, "evaluated", f"could not evaluate: {exc}", evidence)
    except (OSError, RecursionError, ValueError, AttributeError, TypeError, KeyError) as exc:
        # bad input the evaluator did not foresee (an unreadable file, a document of the
        # wrong shape): this contract is `error`, the rest of the report is still produced
        detail = f"could not evaluate: {type(exc).__name__}: {exc}"
        return _error_result(path, spec, "evaluated", detail, evidence)
    evaluation = found if isinstance(found, Evaluation) else Evaluation(found)
    criteria = tuple(evaluation.criteria)
    status = discharge_status(criteria)
    return ContractResult(spec, path, status, criteria, evidence, figures=evaluation.figures)


def _with_evidence(context: EvaluationContext, evidence: tuple[Evidence, ...]) -> EvaluationContext:
    return dataclasses.replace(context, evidence=evidence)


def _error_result(
    path: Path,
    spec: ContractSpec,
    name: str,
    detail: str,
    evidence: tuple[Evidence, ...] = (),
    *,
    files: tuple[str, ...] = (),
) -> ContractResult:
    criteria = (Criterion(name, False, detail, files=files),)
    return ContractResult(spec, path, DischargeStatus.ERROR, criteria, evidence)


def broken_file_result(error: ContractFileError, root: Path) -> ContractResult:
    relpath = (
        error.source.relative_to(root).as_posix()
        if error.source.is_relative_to(root)
        else str(error.source)
    )
    spec = ContractSpec.model_construct(
        id=relpath,
        title="unreadable contract file",
        check="",
        blocking=True,
        discharge=f"fix {relpath}",
        remediation=(),
        evidence_kinds=(),
        profile={},
        params={},
    )
    detail = f"{relpath}: {error.message}"
    return _error_result(error.source, spec, "contract_file_valid", detail, files=(relpath,))


def alignment_for(
    state: WorkspaceState, spec: ContractSpec | None, evidence: tuple[Evidence, ...] | None = None
) -> Alignment:
    """formal_alignment_steps as the results contract defines it (0 / 0 without one)."""
    if spec is None:
        return Alignment(0, 0, f"no {RESULTS_CHECK} contract in the contract set")
    params = _params_of(state.inputs, spec)
    if isinstance(params, str):
        return Alignment(0, 0, params)
    if evidence is None:
        evidence = contract_evidence(spec, state.receipts)
    evidence = gate_on_replay(state.workspace, evidence, state.receipts, params)
    alignment = formal_alignment(
        state.workspace,
        evidence,
        params.required_steps,
        Side(params.reference, params.reference_framework),
        Side(params.candidate, params.candidate_framework),
    )
    if params.replay_windows == 0:
        return alignment
    power = DetectionPower(params.replay_windows, params.replay_window_steps, params.required_steps)
    return dataclasses.replace(alignment, replay=power)


def _params_of(inputs: AuditInputs, spec: ContractSpec) -> results_contract.Params | str:
    """The results contract's params (parsed once, for the one in force), or why not."""
    if spec is inputs.results_spec:
        return inputs.results_params or inputs.results_error or f"{spec.id}: no params"
    try:
        return results_contract.parse_params(spec.params)
    except EvaluationError as exc:
        return f"{spec.id}: {exc}"


def results_spec(loaded: list[tuple[Path, ContractSpec]]) -> ContractSpec | None:
    return next((spec for _, spec in loaded if spec.check == RESULTS_CHECK), None)


def run_audit(
    inputs: AuditInputs, *, between_reads: Callable[[], None] | None = None
) -> AuditResult:
    """The whole audit of the workspace under the policy the inputs carry."""
    state = judge_workspace(inputs, between_reads=between_reads)
    workspace = state.workspace
    evidence = {spec.id: contract_evidence(spec, state.receipts) for _, spec in state.loaded}
    results_contract_spec = results_spec(state.loaded)
    alignment = alignment_for(
        state,
        results_contract_spec,
        evidence[results_contract_spec.id] if results_contract_spec else None,
    )
    context = evaluation_context(inputs, state.freeze, state.receipts, alignment)
    results = [
        _evaluated(state, index, context, evidence[spec.id])
        for index, (_, spec) in enumerate(state.loaded)
    ]
    waivers, waiver_errors = state.policy.waivers()
    results, unknown = attach_waivers(results, waivers)
    results += [broken_file_result(error, workspace.root) for error in state.file_errors]
    date = today()
    errors = [f"{e.source}: {e.message}" for e in state.file_errors] + waiver_errors + unknown
    blockers = _blockers(results, state.receipts, date) + [
        f"configuration error: {error}" for error in waiver_errors + unknown
    ]
    invalid = state.policy.invalid_changes + state.policy.anchors.invalid_changes
    blockers += [f"invalid proposed policy change: {change}" for change in invalid]
    return AuditResult(
        verdict="blocked" if blockers else "pass",
        blockers=tuple(blockers),
        freeze=state.freeze,
        contracts=tuple(results),
        receipts=state.receipts,
        alignment=alignment,
        configuration_errors=tuple(errors),
        waivers=tuple(waivers),
        today=date,
        root=workspace.root,
        policy=state.policy,
    )


def _evaluated(
    state: WorkspaceState,
    index: int,
    context: EvaluationContext,
    evidence: tuple[Evidence, ...],
) -> ContractResult:
    """A contract's result; a freeze contract's is the one the receipts were judged under."""
    frozen = state.frozen.get(index)
    if frozen is not None:
        return dataclasses.replace(frozen, evidence=evidence)
    path, spec = state.loaded[index]
    return evaluate_contract(path, spec, context, evidence)


def explain_contract(inputs: AuditInputs, contract_id: str) -> AuditResult:
    """The audit of one contract (``contract_id``, an id in force): the freeze and the
    receipts judged, that contract alone evaluated, with its waivers (`gates explain`). The
    verdict and blockers are that contract's; the alignment is computed only for the
    results contract, which reads it."""
    state = judge_workspace(inputs)
    index = next(i for i, (_, spec) in enumerate(state.loaded) if spec.id == contract_id)
    spec = state.loaded[index][1]
    evidence = contract_evidence(spec, state.receipts)
    alignment = (
        alignment_for(state, spec, evidence)
        if spec.check == RESULTS_CHECK
        else Alignment(0, 0, "not computed: only this contract was evaluated")
    )
    context = evaluation_context(inputs, state.freeze, state.receipts, alignment)
    result = _evaluated(state, index, context, evidence)
    waivers, _ = state.policy.waivers()
    results, _ = attach_waivers([result], waivers)
    date = today()
    blockers = [_blocker(r, date) for r in results if r.blocks(date)]
    return AuditResult(
        verdict="blocked" if blockers else "pass",
        blockers=tuple(blockers),
        freeze=state.freeze,
        contracts=tuple(results),
        receipts=state.receipts,
        alignment=alignment,
        configuration_errors=(),
        waivers=tuple(w for w in waivers if w.waiver.contract == contract_id),
        today=date,
        root=inputs.root,
        policy=state.policy,
    )


def attach_waivers(
    results: list[ContractResult], waivers: list[LoadedWaiver]
) -> tuple[list[ContractResult], list[str]]:
    """Give each contract its waivers; one naming no known contract or criterion is an error."""
    by_id = {result.spec.id: result for result in results}
    errors = []
    for loaded in waivers:
        target = by_id.get(loaded.waiver.contract)
        if target is None:
            errors.append(f"{loaded.source}: waiver for unknown contract {loaded.waiver.contract}")
        elif loaded.waiver.criterion and loaded.waiver.criterion not in {
            c.name for c in target.criteria
        }:
            errors.append(
                f"{loaded.source}: contract {loaded.waiver.contract} has no criterion "
                f"{loaded.waiver.criterion}"
            )
    attached = [
        dataclasses.replace(
            result,
            waivers=tuple(w for w in waivers if w.waiver.contract == result.spec.id),
        )
        for result in results
    ]
    return attached, errors


def _blockers(
    results: list[ContractResult], receipts: tuple[Judgement, ...], date: dt.date
) -> list[str]:
    blockers = [_blocker(r, date) for r in results if r.blocks(date)]
    if not any(r.spec.blocking for r in results):
        blockers.append("no blocking contract is configured; an empty contract set never passes")
    rejected = [j.path for j in receipts if j.status is Status.REJECTED]
    if rejected:
        blockers.append(f"{len(rejected)} receipt(s) rejected: {', '.join(rejected[:5])}")
    return blockers


def _blocker(result: ContractResult, date: dt.date) -> str:
    expired = [w for w in result.waivers if not w.active(date)]
    note = "".join(
        f" (waiver by {w.waiver.owner} expired on {w.waiver.expires.isoformat()})" for w in expired
    )
    return f"{result.spec.id} is {result.status.value}{note}"
