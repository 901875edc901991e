"""`gates replay RUN`: re-execute windows of a signed run sampled with a seed the runner
cannot predict, compare bit for bit, and sign a replay attestation (docs/replay.md)."""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gates.core.atomic import write_text_atomic
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.paths import is_under, resolve_inside, to_workspace_relpath
from gates.engine.audit import judge_workspace
from gates.engine.inputs import AuditInputs
from gates.freeze.check import FreezeReport
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import ArtifactKind, Framework, Receipt
from gates.receipts.verify import Status
from gates.replay.commitments import COMMITMENTS_FILE, Commitments, read_commitments
from gates.replay.environments import (
    EnvironmentDifference,
    describe,
    environment_differences,
    environment_of,
)
from gates.replay.execute import RunUnderReplay, check_template, replay_window
from gates.replay.report import (
    REPLAY_FILE,
    REPLAY_FORMAT,
    Outcome,
    ReplayReport,
    WindowResult,
    report_json,
)
from gates.replay.settings import results_params
from gates.replay.windows import (
    Window,
    derived_seed,
    detection_power,
    parse_window,
    sample_windows,
    with_resume,
)
from gates.training.env import capture
from gates.trust.keys import SigningKey, configured_key
from gates.workspace.repository import Workspace


@dataclass(frozen=True)
class ReplayRequest:
    run: str  # the run folder as given
    seed: str | None = None
    seed_file: Path | None = None
    windows: int | None = None  # default: the policy's replay_windows
    window_steps: int | None = None  # default: the policy's replay_window_steps
    explicit: tuple[str, ...] = ()  # FIRST:LAST windows asked for by hand (never counted)
    timeout: float = 600.0


@dataclass(frozen=True)
class Seed:
    value: str
    source: str
    policy_commit: str | None
    when: str


def choose_seed(inputs: AuditInputs, request: ReplayRequest, cwd: Path) -> Seed:
    """The verifier's seed: `--seed` (CI's), a seed file outside the workspace, or the
    policy commit and now. A seed from the audited repository is the runner's: refused."""
    workspace, policy = inputs.workspace, inputs.policy
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if request.seed_file is not None:
        path = (cwd / request.seed_file).resolve()
        if path.is_relative_to(workspace.root.resolve()):
            raise GatesError(
                f"seed file {request.seed_file} lies in the audited repository: a seed the "
                "runner chose is refused",
                hint="let CI pass --seed, or omit it (the policy commit and the time draw one)",
            )
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise GatesError(f"seed file {request.seed_file}: {exc.strerror}") from None
        return Seed(value, "ci", policy.commit, when)
    if request.seed is not None:
        return Seed(request.seed, "ci", policy.commit, when)
    return Seed(derived_seed(policy.commit, when), "policy+time", policy.commit, when)


def _run_receipt(inputs: AuditInputs, folder: str, freeze: FreezeReport) -> Receipt:
    path = f"{folder}/run.receipt.json"
    state = judge_workspace(inputs, freeze=freeze)
    judgement = next((j for j in state.receipts if j.path == path), None)
    if judgement is None:
        raise GatesError(
            f"{path}: no run attestation",
            hint="replay replays signed runs: gates run --framework ... -- <entrypoint>",
        )
    if judgement.status is Status.REJECTED or judgement.receipt is None:
        raise GatesError(f"{path}: rejected: {judgement.reason}: nothing to replay")
    return judgement.receipt


def _refuse(freeze: FreezeReport, out: Output) -> int:
    """Replay runs the pinned code: never while the worktree is not the pin's (exit 1)."""
    reason = "refusing to replay while the source freeze is blocked: " + "; ".join(
        freeze.messages()
    )
    if out.as_json:
        out.echo(json.dumps({"result": "refused", "reason": reason}))
    else:
        out.note(f"gates replay: {reason}")
        out.note("replay runs the pinned code: commit or stash, and pin (gates freeze pin)")
    return 1


def _same_code(freeze: FreezeReport, run: Receipt, folder: str) -> None:
    """The pinned code must be the code the run ran."""
    if run.provenance.source_tree != freeze.pin_source_tree:
        raise GatesError(
            f"{folder}/run.receipt.json: the run was made on another source tree than the "
            "pin's: a replay would run different code",
            hint="run it again under the pin, then replay",
        )


def _commitments(workspace: Workspace, folder: str, run: Receipt) -> tuple[Commitments, str]:
    relpath = f"{folder}/{COMMITMENTS_FILE}"
    bound = next((s for s in run.subjects if s.path == relpath), None)
    path = workspace.root / relpath
    commitments = read_commitments(path, relpath)  # a run with none: one line, how to fix
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if bound is None or bound.sha256 != digest:
        raise GatesError(
            f"{relpath} is not the file the run attestation bound (edited after the run?)"
        )
    return commitments, digest


def _run_environment(workspace: Workspace, folder: str, run: Receipt) -> dict[str, object]:
    """The run's env.json, when its run attestation binds it as it is; else nothing (then
    no field differs, and a mismatch stays a mismatch: fail closed)."""
    relpath = f"{folder}/env.json"
    bound = next((s for s in run.subjects if s.path == relpath), None)
    try:
        raw = (workspace.root / relpath).read_bytes()
    except OSError:
        return {}
    if bound is None or bound.sha256 != hashlib.sha256(raw).hexdigest():
        return {}
    try:
        loaded = json.loads(raw)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _judged(
    results: list[WindowResult], differences: tuple[EnvironmentDifference, ...]
) -> tuple[list[WindowResult], Outcome]:
    """A mismatch on another build or hardware is inconclusive, not a forgery; on the
    run's own it is a failure. The outcome: error, mismatch, inconclusive, match."""
    if differences:
        results = [
            r.model_copy(update={"result": "inconclusive"}) if r.result == "mismatch" else r
            for r in results
        ]
    found = {r.result for r in results}
    order: tuple[Outcome, ...] = ("error", "mismatch", "inconclusive")
    return results, next((o for o in order if o in found), "match")


def _windows(
    request: ReplayRequest, commitments: Commitments, seed: Seed, count: int, width: int
) -> list[Window]:
    total = commitments.last_step
    explicit = [parse_window(text, total) for text in request.explicit]
    drawn = sample_windows(seed.value, total, count, width) if count else []
    saved = commitments.saved_steps()
    return [with_resume(window, saved) for window in drawn + explicit]


def replay(inputs: AuditInputs, request: ReplayRequest, *, cwd: Path, out: Output) -> int:
    signing_key = configured_key(inputs.invocation.signing_key)
    if signing_key is None:
        raise GatesError(
            "GATES_SIGNING_KEY is not set: a replay attestation must be signed",
            hint="export GATES_SIGNING_KEY=<the verifier's key> (docs/trust.md)",
        )
    freeze = inputs.judge_freeze()
    if freeze.verdict != "pass":
        return _refuse(freeze, out)
    replayed = replay_run(inputs, request, cwd=cwd, freeze=freeze, signing_key=signing_key)
    out.render(RENDERERS, replayed)
    return 0 if replayed.report.result == "match" else 1


@dataclass(frozen=True)
class Replayed:
    """What `gates replay` did: the signed report of the windows replayed, the detection
    power of the sample, and the receipt that stamps it (with its workspace path)."""

    report: ReplayReport
    power: str
    receipt: Receipt
    receipt_path: str


def replay_run(
    inputs: AuditInputs,
    request: ReplayRequest,
    *,
    cwd: Path,
    freeze: FreezeReport,
    signing_key: SigningKey,
) -> Replayed:
    """The sampled and the explicit windows of the run replayed in the sandbox under the
    passing ``freeze``; the report written and receipted."""
    workspace = inputs.workspace
    folder = to_workspace_relpath(workspace.root, request.run, cwd)
    if not is_under(folder, workspace.config.evidence.locations):
        raise GatesError(f"run folder {folder} is outside the evidence locations")
    resolve_inside(workspace.root, folder, what="run folder")
    run = _run_receipt(inputs, folder, freeze)
    _same_code(freeze, run, folder)
    framework = run.framework.value if run.framework else None
    params = results_params(inputs.policy)
    if params is None:
        raise GatesError("no results contract in the policy: no replay protocol declared")
    side = "reference" if run.framework is params.reference_framework else "candidate"
    if run.framework not in (params.reference_framework, params.candidate_framework):
        raise GatesError(f"{folder}: a run of framework {framework}, neither side's")
    template = params.reference_replay if side == "reference" else params.candidate_replay
    check_template(template, side)
    commitments, commitments_sha = _commitments(workspace, folder, run)
    seed = choose_seed(inputs, request, cwd)
    count = params.replay_windows if request.windows is None else request.windows
    width = params.replay_window_steps if request.window_steps is None else request.window_steps
    windows = _windows(request, commitments, seed, count, width)
    if not windows:
        raise GatesError("no window to replay", hint="--windows N, or set params.replay_windows")
    under = RunUnderReplay(
        workspace.root,
        folder,
        commitments,
        template,
        run.provenance.run.cwd if run.provenance.run else ".",
        request.timeout,
        freeze.head or "HEAD",
        workspace.config.evidence.locations,
        framework or "",
        inputs.sandbox_host,
        workspace.config.sandbox.writable_copies,
    )
    with tempfile.TemporaryDirectory(prefix="gates-replay-") as scratch:
        results = [replay_window(under, window, Path(scratch)) for window in windows]
    environment = capture(framework=framework, variables=inputs.invocation.environment)
    run_environment = _run_environment(workspace, folder, run)
    differences = environment_differences(run_environment, environment)
    results, outcome = _judged(results, differences)
    report = ReplayReport(
        format=REPLAY_FORMAT,
        run=folder,
        framework=framework or "",
        run_attestation=run.id,
        commitments_sha256=commitments_sha,
        total_steps=commitments.last_step,
        seed=seed.value,
        seed_source="ci" if seed.source == "ci" else "policy+time",
        policy_commit=seed.policy_commit,
        replayed_at=seed.when,
        sampled=min(count, len(windows) - len(request.explicit)),
        window_steps=width,
        windows=tuple(results),
        result=outcome,
        environment=environment,
        run_environment=environment_of(run_environment),
        differences=differences,
    )
    write_text_atomic(workspace.root / folder / REPLAY_FILE, report_json(report))
    receipt, path = create_receipt(
        workspace,
        ReceiptRequest(
            kind=ArtifactKind.REPLAY,
            subjects=(f"{folder}/{REPLAY_FILE}", f"{folder}/{COMMITMENTS_FILE}"),
            framework=Framework(framework) if framework else None,
            inputs=(run.id,),
            output=f"{folder}/replay.receipt.json",
            overwrite=True,
        ),
        cache=inputs.cache,
        signing_key=signing_key,
        freeze_inputs=inputs.freeze_inputs,
    )
    power = detection_power(report.sampled, width, commitments.last_step)
    return Replayed(report, power, receipt, path.relative_to(workspace.root).as_posix())


def render_json(replayed: Replayed) -> str:
    document = replayed.report.model_dump(mode="json")
    document["receipt"] = replayed.receipt_path
    document["detection_power"] = replayed.power
    return json.dumps(document, sort_keys=True)


def render_text(replayed: Replayed) -> str:
    report, power, receipt = replayed.report, replayed.power, replayed.receipt
    lines = [
        f"replay of {report.run} ({report.framework}, {report.total_steps} steps), "
        f"seed {report.seed[:16]} ({report.seed_source})"
    ]
    for window in report.windows:
        label = f"  window {window.first}-{window.last} (resumed after step {window.resumed_from})"
        if window.result == "match":
            lines.append(f"{label}: match, bit for bit ({window.duration_s:.1f} s)")
        elif window.mismatch is not None:
            verdict = "INCONCLUSIVE" if window.result == "inconclusive" else "MISMATCH"
            mismatch = window.mismatch
            lines.append(f"{label}: {verdict} at step {mismatch.step}: {mismatch.what}")
        else:
            lines.append(f"{label}: ERROR: {window.error}")
    if report.differences:
        lines.append(
            f"  replayed on another build or hardware than the run: {describe(report.differences)}"
            " (bit-exact replay is promised on the run's own; a mismatch here is inconclusive)"
        )
    stamp = f"{receipt.evidence_class.value}/{receipt.formal_weight}"
    lines += [power, f"{replayed.receipt_path}: {stamp}", f"replay={report.result}"]
    return "\n".join(lines)


#: --format -> the renderer of a Replayed (a refusal is remarks on stderr, or its JSON)
RENDERERS: dict[str, Callable[[Replayed], str]] = {"text": render_text, "json": render_json}
