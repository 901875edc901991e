"""The audit: judge the freeze, re-judge every receipt, evaluate every contract, decide.

Fail closed: the verdict is `pass` only when at least one contract exists,
every blocking contract is discharged, no contract file failed to load and
no receipt was rejected.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gates import __version__, progress
from gates.contracts import results_schema_and_provenance as results_contract
from gates.contracts.model import ContractResult, Evaluation, EvaluationContext, EvaluationError
from gates.contracts.registry import FREEZE_CHECK, MODULES, evaluator
from gates.criteria import Criterion, DischargeStatus, discharge_status
from gates.freeze.check import (
    FreezeReport,
    SourceTree,
    entrypoint_script_problems,
    evaluate_freeze,
)
from gates.hashing import StatCache, cache_file
from gates.policy.contract_files import ContractFileError, ContractSpec
from gates.policy.in_force import Policy, policy_of
from gates.policy.sides import CodeJudge, SideName, SidePaths
from gates.policy.waivers import LoadedWaiver, today
from gates.receipts.alignment import Alignment, Side, formal_alignment
from gates.receipts.binding import (
    Entrypoints,
    IsolationPolicy,
    declared_scripts,
    is_run,
    needs_run,
    run_covers,
    run_problems,
)
from gates.receipts.crosscheck import capture_problem
from gates.receipts.derive import loss_check_problem
from gates.receipts.evidence import Evidence
from gates.receipts.index import INDEX_KIND, AuditIndex
from gates.receipts.model import RECEIPT_SUFFIX, Receipt
from gates.receipts.verify import Judgement, JudgingContext, Status, judge
from gates.replay.gate import gate_on_replay
from gates.replay.windows import detection_power
from gates.workspace import Workspace, roots_of

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
    """The freeze, the contract files and every receipt, judged once."""

    workspace: Workspace
    freeze: FreezeReport
    loaded: list[tuple[Path, ContractSpec]]
    file_errors: list[ContractFileError]
    receipts: tuple[Judgement, ...]
    policy: Policy


def discover_receipts(root: Path, locations: tuple[str, ...]) -> tuple[list[str], list[Judgement]]:
    """Workspace paths of every `*.receipt.json` under the evidence locations, sorted.

    Symlinked folders are not followed: each is returned as a rejected entry.
    Symlinked receipt files are listed, so that judging rejects them by name.
    """
    found: list[str] = []
    refused: list[Judgement] = []
    for location in locations:
        base = root / location
        if base.is_symlink():
            refused.append(_refused(location, "evidence location is a symlink: not followed"))
            continue
        unreadable: list[OSError] = []
        for folder, dirnames, filenames in os.walk(base, onerror=unreadable.append):
            rel_folder = Path(folder).relative_to(root).as_posix()
            for name in dirnames:
                if (Path(folder) / name).is_symlink():
                    refused.append(
                        _refused(f"{rel_folder}/{name}", "symlinked folder: not followed")
                    )
            found += [
                f"{rel_folder}/{name}"
                for name in (*filenames, *dirnames)
                if name.endswith(RECEIPT_SUFFIX)
            ]
        for error in unreadable:
            if isinstance(error, FileNotFoundError | NotADirectoryError):
                continue  # no such evidence location: nothing hidden
            # a folder that cannot be listed may hide receipts, or rejected ones: never skip it
            where = Path(error.filename or base).relative_to(root).as_posix()
            refused.append(
                _refused(where, f"folder cannot be read: {error.strerror} (make it readable)")
            )
    return sorted(found), refused


def _refused(path: str, reason: str) -> Judgement:
    return Judgement(path, None, Status.REJECTED, reason)


def judging_context(
    workspace: Workspace,
    freeze: FreezeReport,
    loaded: list[tuple[Path, ContractSpec]],
    policy: Policy,
) -> JudgingContext:
    """What receipts are judged against now: the freeze contract's status, the pin's tree
    and the trust anchors in force."""
    bare = EvaluationContext(workspace, freeze, ())
    cache = StatCache(cache_file(workspace.root))
    return JudgingContext(
        workspace.root,
        cache,
        _freeze_discharged(loaded, bare),
        freeze.pin_source_tree,
        anchors=policy.anchors,
        external=roots_of(workspace),
    )


def judge_receipts(
    workspace: Workspace,
    context: JudgingContext,
    entrypoints: Entrypoints | None = None,
    code: CodeJudge | None = None,
) -> tuple[Judgement, ...]:
    """Every receipt under the evidence locations, re-judged now, sorted by path.

    A receipt whose file and subjects are unchanged since an audit under the same
    fingerprint is not read again: the audit index holds its judgement. The rules
    that look across receipts (inputs, entrypoint binding, recomputed checks) run
    on every audit.
    """
    paths, judgements = discover_receipts(workspace.root, workspace.config.evidence.locations)
    index = AuditIndex(
        workspace.root,
        cache_file(workspace.root, INDEX_KIND),
        index_fingerprint(workspace, context),
    )
    judgements += [
        index.judge(path, functools.partial(judge, context, path), context.checked_dirs)
        for path in progress.counted(paths, len(paths), "judging receipts", "receipt")
    ]
    index.save()
    context.cache.save()
    judgements = _recompute_checks(judgements, workspace.root)
    judgements = _cross_check(judgements, workspace.root)
    if code is not None:
        judgements = [code_in_force(judgement, code) for judgement in judgements]
    sandbox = workspace.config.sandbox
    isolation = IsolationPolicy(sandbox.required, sandbox.recorded)
    settled = settle(judgements, entrypoints or {}, isolation=isolation)
    return tuple(sorted(settled, key=lambda j: j.path))


def _cross_check(judgements: list[Judgement], root: Path) -> list[Judgement]:
    """Reject every env capture or manifest that disagrees with the run that bound it, and
    count that run (so every output it bound) as probe."""
    runs = {
        j.receipt.id: j.receipt
        for j in judgements
        if j.receipt and is_run(j.receipt) and j.status is not Status.REJECTED
    }
    problems: dict[str, str] = {}
    doubted: dict[str, str] = {}
    for judgement in judgements:
        receipt = judgement.receipt
        if receipt is None or judgement.status is Status.REJECTED:
            continue
        bound_by = [runs[i] for i in receipt.provenance.inputs if i in runs]
        problem = capture_problem(root, receipt, bound_by[0]) if bound_by else None
        if problem:
            problems[judgement.path] = problem
            doubted.setdefault(bound_by[0].id, problem)
    checked = []
    for judgement in judgements:
        receipt = judgement.receipt
        if receipt and judgement.path in problems:
            status, reason = Status.REJECTED, problems[judgement.path]
        elif receipt and receipt.id in doubted and judgement.status is Status.FORMAL:
            status, reason = Status.PROBE, f"run attestation: its capture {doubted[receipt.id]}"
        else:
            checked.append(judgement)
            continue
        checked.append(Judgement(judgement.path, receipt, status, reason, judgement.signer))
    return checked


def code_in_force(judgement: Judgement, code: CodeJudge) -> Judgement:
    """A formal receipt whose side's code is not the code in force counts as probe."""
    if judgement.status is not Status.FORMAL or judgement.receipt is None:
        return judgement
    problem = code.problem(judgement.receipt)
    if problem is None:
        return judgement
    return Judgement(judgement.path, judgement.receipt, Status.PROBE, problem, judgement.signer)


def code_judge(
    workspace: Workspace, freeze: FreezeReport, spec: ContractSpec | None, policy: Policy
) -> CodeJudge:
    """Judges each side's evidence by its side's code (gates/policy/sides.py), with the sides'
    frameworks from the results contract in force."""
    frameworks: dict[str, SideName] = {"torch": "reference", "paddle": "candidate"}
    if spec is not None:
        try:
            params = results_contract.parse_params(spec.params)
            frameworks = {
                params.reference_framework.value: "reference",
                params.candidate_framework.value: "candidate",
            }
        except EvaluationError:
            pass
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


def index_fingerprint(workspace: Workspace, context: JudgingContext) -> str:
    """Everything a kept judgement depends on besides the files it read: the gates
    version, the policy in force, the trust anchors, the pin's tree, the freeze."""
    _, policy = policy_of(workspace)
    return "|".join(
        [
            __version__,
            policy.digest,
            context.anchors.digest,
            context.pin_source_tree or "-",
            "discharged" if context.freeze_discharged else "not-discharged",
        ]
    )


def _recompute_checks(judgements: list[Judgement], root: Path) -> list[Judgement]:
    """Reject every loss checker output that disagrees with its recomputation."""
    by_id = {
        j.receipt.id: j.receipt for j in judgements if j.receipt and j.status is not Status.REJECTED
    }
    settled = []
    for judgement in judgements:
        receipt = judgement.receipt
        if receipt and judgement.status is not Status.REJECTED:
            if not all(i in by_id for i in receipt.provenance.inputs):
                settled.append(judgement)  # settle() rejects it, naming the missing input
                continue
            inputs = [by_id[i] for i in receipt.provenance.inputs]
            problem = loss_check_problem(root, receipt, inputs)
            if problem:
                settled.append(Judgement(judgement.path, receipt, Status.REJECTED, problem))
                continue
        settled.append(judgement)
    return settled


def settle(
    judgements: list[Judgement],
    entrypoints: Entrypoints,
    *,
    isolation: IsolationPolicy | None = None,
) -> list[Judgement]:
    """Apply the rules that look across receipts until nothing changes.

    A receipt derived from others (provenance.inputs) is no better than its
    inputs: an input that is not accepted here rejects it, a probe input makes
    it probe. Run outputs count only through a run attestation of their side's
    declared entrypoint.
    """
    changed = True
    while changed:
        changed = False
        accepted = {
            j.receipt.id: j for j in judgements if j.receipt and j.status is not Status.REJECTED
        }
        for index, judgement in enumerate(judgements):
            downgraded = _downgrade(judgement, accepted, entrypoints, judgements, isolation)
            if downgraded is not None:
                judgements[index] = downgraded
                changed = True
    return judgements


def _downgrade(
    judgement: Judgement,
    accepted: dict[str, Judgement],
    entrypoints: Entrypoints,
    everything: list[Judgement],
    isolation: IsolationPolicy | None = None,
) -> Judgement | None:
    receipt = judgement.receipt
    if receipt is None or judgement.status is Status.REJECTED:
        return None
    missing = [i for i in receipt.provenance.inputs if i not in accepted]
    if missing:
        reason = missing_input_reason(receipt, missing[0], everything)
        return Judgement(judgement.path, receipt, Status.REJECTED, reason, judgement.signer)
    if judgement.status is not Status.FORMAL:
        return None
    sources = [accepted[i] for i in receipt.provenance.inputs]
    why = _probe_reason(receipt, sources, entrypoints, isolation)
    if why is None:
        return None
    return Judgement(judgement.path, receipt, Status.PROBE, why, judgement.signer)


def missing_input_reason(receipt: Receipt, missing: str, everything: list[Judgement]) -> str:
    """Why a derived receipt is rejected for an input that is gone, naming the file that input
    bound (or that now binds the same files) and the command that re-makes the receipt."""
    where = next((j.path for j in everything if j.receipt and j.receipt.id == missing), None)
    command = receipt.provenance.command
    if where is None and command:
        named = set(command)
        where = next(
            (
                j.path
                for j in everything
                if j.receipt
                and j.receipt.id not in receipt.provenance.inputs  # the inputs still in place
                and any(s.path in named for s in j.receipt.subjects)
            ),
            None,
        )
    located = f" ({where})" if where else ""
    fix = (
        f"re-run `{' '.join(command)}` (or `gates refresh`)"
        if command
        else "re-run the checker that wrote it (`gates evidence` lists the command)"
    )
    return (
        f"input receipt {missing[:19]}...{located} is not an accepted receipt in this "
        f"workspace (tampered, changed or re-made since): {fix}"
    )


def _probe_reason(
    receipt: Receipt,
    sources: list[Judgement],
    entrypoints: Entrypoints,
    isolation: IsolationPolicy | None = None,
) -> str | None:
    """Why a formal receipt counts only as probe once its inputs and binding are known."""
    probe_input = next((s for s in sources if s.status is Status.PROBE), None)
    if probe_input is not None:
        return f"input receipt {probe_input.path} counts as probe"
    if is_run(receipt):
        problems = run_problems(receipt, entrypoints, isolation=isolation)
        return "run attestation: " + "; ".join(problems) if problems else None
    if needs_run(receipt) and not any(
        s.receipt and is_run(s.receipt) and run_covers(s.receipt, receipt) for s in sources
    ):
        return (
            "not from a signed run of the declared entrypoint (no run attestation among its "
            "inputs that ran its framework and bound its files; write it with "
            "`gates run --framework ... -- <entrypoint>`)"
        )
    return None


def entrypoints_of(
    spec: ContractSpec | None, workspace: Workspace
) -> tuple[Entrypoints, list[str]]:
    """framework -> declared entrypoint, from the results contract in force; plus the
    problems that void an entrypoint (a script outside the pinned source tree)."""
    if spec is None:
        return {}, []
    try:
        params = results_contract.parse_params(spec.params)
    except EvaluationError:
        return {}, []
    found: dict[str, tuple[str, ...]] = {}
    problems = []
    for side, framework, declared in (
        ("reference", params.reference_framework, params.reference_entrypoint),
        ("candidate", params.candidate_framework, params.candidate_entrypoint),
    ):
        outside = entrypoint_script_problems(
            workspace.root, workspace.config, declared_scripts(declared)
        )
        if outside:
            problems.append(
                f"{side}_entrypoint: {'; '.join(outside.values())}: nothing of that side can "
                "be formal"
            )
        elif declared:
            found[framework.value] = declared
    return found, problems


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
    path: Path, spec: ContractSpec, name: str, detail: str, evidence: tuple[Evidence, ...] = ()
) -> ContractResult:
    criteria = (Criterion(name, False, detail),)
    return ContractResult(spec, path, DischargeStatus.ERROR, criteria, evidence)


def _broken_file_result(error: ContractFileError, root: Path) -> ContractResult:
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
    return _error_result(error.source, spec, "contract_file_valid", f"{relpath}: {error.message}")


def _freeze_discharged(loaded: list[tuple[Path, ContractSpec]], context: EvaluationContext) -> bool:
    freeze_specs = [(p, s) for p, s in loaded if s.check == FREEZE_CHECK]
    if not freeze_specs:
        return False
    return all(
        evaluate_contract(p, s, context).status is DischargeStatus.DISCHARGED
        for p, s in freeze_specs
    )


def judge_workspace(
    workspace: Workspace, *, between_reads: Callable[[], None] | None = None
) -> WorkspaceState:
    workspace, policy = policy_of(workspace)
    freeze = evaluate_freeze(workspace.root, workspace.config, between_reads=between_reads)
    loaded, file_errors = policy.contracts()
    entrypoints, _ = entrypoints_of(results_spec(loaded), workspace)
    context = judging_context(workspace, freeze, loaded, policy)
    code = code_judge(workspace, freeze, results_spec(loaded), policy)
    receipts = judge_receipts(workspace, context, entrypoints, code)
    return WorkspaceState(workspace, freeze, loaded, file_errors, receipts, policy)


def alignment_for(
    state: WorkspaceState, spec: ContractSpec | None, evidence: tuple[Evidence, ...] | None = None
) -> Alignment:
    """formal_alignment_steps as the results contract defines it (0 / 0 without one)."""
    if spec is None:
        return Alignment(0, 0, f"no {RESULTS_CHECK} contract in the contract set")
    try:
        params = results_contract.parse_params(spec.params)
    except EvaluationError as exc:
        return Alignment(0, 0, f"{spec.id}: {exc}")
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
    power = detection_power(
        params.replay_windows, params.replay_window_steps, params.required_steps
    )
    return dataclasses.replace(alignment, replay=power)


def results_spec(loaded: list[tuple[Path, ContractSpec]]) -> ContractSpec | None:
    return next((spec for _, spec in loaded if spec.check == RESULTS_CHECK), None)


def run_audit(
    workspace: Workspace, *, between_reads: Callable[[], None] | None = None
) -> AuditResult:
    state = judge_workspace(workspace, between_reads=between_reads)
    workspace = state.workspace
    evidence = {spec.id: contract_evidence(spec, state.receipts) for _, spec in state.loaded}
    results_contract_spec = results_spec(state.loaded)
    alignment = alignment_for(
        state,
        results_contract_spec,
        evidence[results_contract_spec.id] if results_contract_spec else None,
    )
    context = EvaluationContext(workspace, state.freeze, state.receipts, alignment=alignment)
    results = [
        evaluate_contract(path, spec, context, evidence[spec.id]) for path, spec in state.loaded
    ]
    waivers, waiver_errors = state.policy.waivers()
    results, unknown = attach_waivers(results, waivers)
    results += [_broken_file_result(error, workspace.root) for error in state.file_errors]
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
