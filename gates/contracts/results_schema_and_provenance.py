"""Check `results_schema_and_provenance`: the acceptance oracle.

Schema half, per side: every required result file exists, is valid for its
kind, and is bound by an accepted (not rejected) receipt. Equality half:
formal_alignment_steps >= required_steps, the candidate's formal loss backed
by identical repeats, and checkpoint hashes equal where asked. The schema
half alone gives `discharging`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from gates.contracts.model import (
    Evaluation,
    EvaluationContext,
    EvaluationError,
    ResultsFigures,
)
from gates.core.content_ids import strict_loads
from gates.core.criteria import Criterion
from gates.core.errors import GatesError, UnsafePathError
from gates.core.paths import check_relpath
from gates.core.validation import first_error
from gates.outputs.checkpoint_check import Against, CheckpointCheck
from gates.outputs.loss_check import DeterminismCheck
from gates.outputs.models import parse_output
from gates.receipts.artifacts import KIND_BY_FILE_NAME, artifact_problem
from gates.receipts.binding import DeclaredEntrypoint
from gates.receipts.binding import declared_entrypoints as declared_in
from gates.receipts.model import ArtifactKind, Framework
from gates.receipts.verify import Judgement, Status
from gates.workspace.repository import Workspace

CHECK = "results_schema_and_provenance"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    required_steps: StrictInt = Field(default=100, ge=1)  # 0 would pass vacuously
    reference: str = "results/torch"
    candidate: str = "results/paddle"
    required_files: tuple[str, ...] = ("loss.json", "env.json")
    reference_framework: Framework = Framework.TORCH
    candidate_framework: Framework = Framework.PADDLE
    min_repeats: StrictInt = Field(default=2, ge=0)
    checkpoint_hash_equal: StrictBool = False
    # argv prefixes (program, script inside the pinned source tree, fixed arguments)
    reference_entrypoint: tuple[str, ...] = ()
    candidate_entrypoint: tuple[str, ...] = ()
    # Replay (docs/replay.md): formal steps count only with this many sampled windows of
    # replay_window_steps steps replayed and matched by a signer trusted for replay.
    # 0 (the default) requires none.
    replay_windows: StrictInt = Field(default=0, ge=0)
    replay_window_steps: StrictInt = Field(default=1, ge=1)
    state_save_every: StrictInt = Field(default=10, ge=1)
    # argv templates with {state}, {start}, {end}, {out}: how each side resumes a window
    reference_replay: tuple[str, ...] = ()
    candidate_replay: tuple[str, ...] = ()
    # whether a replay on another framework build or hardware than the run's may count
    # (bit-exact replay is promised on the run's own only; a mismatch there is inconclusive)
    replay_across_builds: StrictBool = False


def parse_params(raw: dict[str, Any]) -> Params:
    try:
        params = Params.model_validate(raw)
    except ValidationError as exc:
        first = first_error(exc)
        raise EvaluationError(f"params.{first.key}: {first.message}") from None
    try:
        check_relpath(params.reference, what="params.reference")
        check_relpath(params.candidate, what="params.candidate")
    except UnsafePathError as exc:
        raise EvaluationError(exc.message) from None
    unknown = [name for name in params.required_files if name not in KIND_BY_FILE_NAME]
    if unknown:
        known = ", ".join(sorted(KIND_BY_FILE_NAME))
        raise EvaluationError(f"params.required_files: unknown {unknown} (known: {known})")
    return params


def params_of(context: EvaluationContext, raw: dict[str, Any]) -> Params:
    """The params the command parsed once (for the results contract in force, whose table
    ``raw`` is), else ``raw`` parsed here (another results contract of the set)."""
    given = context.results_params
    if given is not None and given.raw is raw and isinstance(given.parsed, Params):
        return given.parsed
    return parse_params(raw)


def _bound(relpath: str, receipts: tuple[Judgement, ...]) -> bool:
    return any(
        j.receipt is not None
        and j.status is not Status.REJECTED
        and any(s.path == relpath for s in j.receipt.subjects)
        for j in receipts
    )


def side_problems(
    context: EvaluationContext, folder: str, files: tuple[str, ...]
) -> list[tuple[str, str]]:
    """Every missing, invalid or unreceipted required file of one side: (its path, why)."""
    root = context.workspace.root
    problems = []
    for name in files:
        relpath = f"{folder}/{name}"
        path = root / relpath
        if not path.is_file() or path.is_symlink():
            problems.append((relpath, f"{relpath} is missing"))
            continue
        problem = artifact_problem(KIND_BY_FILE_NAME[name], path, relpath)
        if problem:
            problems.append((relpath, problem))
        elif not _bound(relpath, context.receipts):
            problems.append(
                (
                    relpath,
                    f"{relpath} is not bound by an accepted receipt (gates receipt create "
                    f"--kind {KIND_BY_FILE_NAME[name].value} --subject {relpath})",
                )
            )
    return problems


def _side(name: str, context: EvaluationContext, folder: str, files: tuple[str, ...]) -> Criterion:
    problems = side_problems(context, folder, files)
    detail = "; ".join(why for _, why in problems) or (
        f"{', '.join(files)} present, valid and receipted in {folder}/"
    )
    named = (
        tuple(path for path, _ in problems) if problems else tuple(f"{folder}/{n}" for n in files)
    )
    return Criterion(f"{name}_results_valid", not problems, detail, files=named, key=name)


def declared_entrypoints(workspace: Workspace, params: Params) -> tuple[DeclaredEntrypoint, ...]:
    """Each side's declared entrypoint, with its scripts outside the pinned tree."""
    return declared_in(
        workspace.root,
        workspace.config,
        (
            ("reference", params.reference_framework.value, params.reference_entrypoint),
            ("candidate", params.candidate_framework.value, params.candidate_entrypoint),
        ),
    )


def _entrypoints(context: EvaluationContext, params: Params) -> Criterion:
    """Each side declares the entrypoint whose signed runs alone make its evidence formal."""
    declared = context.entrypoints
    wanted = [
        ("reference", params.reference_framework.value, params.reference_entrypoint),
        ("candidate", params.candidate_framework.value, params.candidate_entrypoint),
    ]
    if declared is None or [(d.side, d.framework, d.argv) for d in declared] != wanted:
        declared = declared_entrypoints(context.workspace, params)  # not the audit's contract
    problems = [problem for entrypoint in declared for problem in entrypoint.problems()]
    detail = "; ".join(problems) or (
        f"reference: {' '.join(params.reference_entrypoint)}; "
        f"candidate: {' '.join(params.candidate_entrypoint)}"
    )
    failing = [entrypoint for entrypoint in declared if entrypoint.problems()]
    scripts = (script for entrypoint in failing or declared for script in entrypoint.scripts)
    key = f"{failing[0].side}_entrypoint" if failing else None
    files = tuple(dict.fromkeys(scripts))
    return Criterion("entrypoints_declared", not problems, detail, files=files, key=key)


def _alignment(context: EvaluationContext, params: Params) -> Criterion:
    alignment = context.alignment
    if alignment is None:
        raise EvaluationError("formal_alignment_steps was not computed")
    met = alignment.steps >= params.required_steps
    detail = (
        f"formal_alignment_steps = {alignment.steps} / {params.required_steps}: {alignment.why}"
    )
    return Criterion(
        "formal_alignment_steps", met, detail, files=alignment.files, key="required_steps"
    )


def _outputs(context: EvaluationContext, kind: ArtifactKind) -> list[tuple[Judgement, BaseModel]]:
    """The checker outputs of ``kind`` bound by receipts that count for this contract, as
    their models (an output that does not fit its model backs nothing)."""
    found = []
    for item in context.evidence:
        receipt = item.judgement.receipt
        if not item.counts or receipt is None or receipt.kind is not kind:
            continue
        try:
            output = strict_loads((context.workspace.root / receipt.subjects[0].path).read_bytes())
        except (OSError, ValueError):
            continue
        parsed = parse_output(kind, output)
        if parsed is not None:
            found.append((item.judgement, parsed))
    return found


def _determinism_checks(context: EvaluationContext) -> list[tuple[Judgement, DeterminismCheck]]:
    return [
        (judgement, output)
        for judgement, output in _outputs(context, ArtifactKind.LOSS_CHECK)
        if isinstance(output, DeterminismCheck)
    ]


def _checkpoint_checks(context: EvaluationContext) -> list[tuple[Judgement, CheckpointCheck]]:
    return [
        (judgement, output)
        for judgement, output in _outputs(context, ArtifactKind.CHECKPOINT_CHECK)
        if isinstance(output, CheckpointCheck)
    ]


def _repeats(context: EvaluationContext, params: Params) -> Criterion:
    name, key = "candidate_repeats_identical", "min_repeats"
    chosen = context.alignment.chosen if context.alignment else None
    if chosen is None:
        return Criterion(name, False, "no formal candidate loss to back with repeats", key=key)
    digest = chosen.candidate_series.digest()
    for judgement, output in _determinism_checks(context):
        if (
            output.deterministic
            and output.series_sha256 == digest
            and len(output.runs) >= params.min_repeats
        ):
            runs = len(output.runs)
            detail = f"{runs} identical repeats in {judgement.path}"
            return Criterion(name, True, detail, files=(judgement.path,), key=key)
    return Criterion(
        name,
        False,
        f"no formal determinism check shows {params.min_repeats} identical repeats of "
        f"{chosen.candidate_series.path} (gates check determinism RUN RUN ...)",
        files=(chosen.candidate_series.path,),
        key=key,
    )


def evaluate(context: EvaluationContext, raw: dict[str, Any]) -> Evaluation:
    params = params_of(context, raw)
    criteria = [
        _entrypoints(context, params),
        _side("reference", context, params.reference, params.required_files),
        _side("candidate", context, params.candidate, params.required_files),
        _alignment(context, params),
    ]
    repeats = _repeats(context, params) if params.min_repeats >= 2 else None
    hashes = _checkpoint_hashes(context) if params.checkpoint_hash_equal else None
    criteria += [c for c in (repeats, hashes) if c is not None]
    figures = ResultsFigures(
        repeats_identical=repeats.met if repeats else None,
        hash_match=hashes.met if hashes else _hash_match_claimed(context),
    )
    return Evaluation(criteria, figures)


def _hash_match_claimed(context: EvaluationContext) -> bool:
    """A counting checkpoint check claims hash_match=true (not recomputed: not asked for)."""
    return any(output.hash_match is True for _, output in _checkpoint_checks(context))


def _checkpoint_hashes(context: EvaluationContext) -> Criterion:
    """A counting `gates check checkpoint --against` output with hash_match=true, whose
    claim the audit recomputes (digests through the stat cache, content through the naming
    rules in force) instead of believing it."""
    name, key = "checkpoint_hash_match", "checkpoint_hash_equal"
    for judgement, output in _checkpoint_checks(context):
        against = output.against
        if against is None or against.hash_match is not True:
            continue
        problem = _recomputed_pair_problem(context, output, against)
        files = (judgement.path,)
        if problem:
            return Criterion(name, False, f"{judgement.path}: {problem}", files=files, key=key)
        detail = f"hash_match=true after mapping, recomputed ({judgement.path})"
        return Criterion(name, True, detail, files=files, key=key)
    return Criterion(
        name,
        False,
        "no formal checkpoint check with hash_match=true "
        "(gates check checkpoint CANDIDATE --against REFERENCE)",
        key=key,
    )


def _recomputed_pair_problem(
    context: EvaluationContext, output: CheckpointCheck, against: Against
) -> str:
    from gates.checkpoints.check import check_checkpoint, compare_pair  # noqa: PLC0415
    from gates.naming.rulefile import INVENTORY_CHECK, ruleset_from_params  # noqa: PLC0415

    root = context.workspace.root
    candidate, reference = output.path, against.reference
    inventory = context.policy.contract(INVENTORY_CHECK) if context.policy else None
    try:
        ruleset = ruleset_from_params(inventory[1].params if inventory else {}, "tensor-inventory")
        cache = context.stat_cache()
        ref = check_checkpoint(root, reference, cache=cache, progress=context.progress)
        cand = check_checkpoint(root, candidate, cache=cache, progress=context.progress)
        cache.save()
    except GatesError as exc:
        return f"cannot recompute: {exc.one_line()}"
    if not compare_pair(ref, cand, ruleset).figures()["hash_match"]:
        return "the recomputation through the naming rules in force does not match"
    if ref.digest != against.reference_digest or cand.digest != output.digest:
        return "the output's digests are not the checkpoints' (recomputed)"
    return ""
