"""The audit's replay criterion: with `replay_windows = n > 0` in the results contract, a
loss counts toward formal_alignment_steps only when its run committed every step, the
committed losses are the loss file's bits, and a replay attestation by a signer trusted for
replay shows the n windows its seed draws replayed and matched."""

from __future__ import annotations

from pathlib import PurePosixPath

from gates.contracts.results_schema_and_provenance import Params
from gates.losses.series import LossFileError, read_losses
from gates.receipts.evidence import Evidence
from gates.receipts.model import ArtifactKind, Receipt
from gates.receipts.verify import Judgement, Status
from gates.replay.commitments import COMMITMENTS_FILE, CommitmentsError, loss_bits, read_commitments
from gates.replay.report import REPLAY_FILE, read_report, report_problem
from gates.workspace.repository import Workspace

LOSS_KINDS = (ArtifactKind.LOSS, ArtifactKind.RAW_LOSS)


def gate_on_replay(
    workspace: Workspace,
    evidence: tuple[Evidence, ...],
    receipts: tuple[Judgement, ...],
    params: Params,
) -> tuple[Evidence, ...]:
    """The evidence, with every counting loss that lacks the required replay demoted."""
    if params.replay_windows == 0:
        return evidence
    accepted = {
        j.receipt.id: j.receipt for j in receipts if j.receipt and j.status is not Status.REJECTED
    }
    gated = []
    for item in evidence:
        receipt = item.judgement.receipt
        if not item.counts or receipt is None or receipt.kind not in LOSS_KINDS:
            gated.append(item)
            continue
        problem = replay_problem(workspace, receipt, accepted, receipts, params)
        if problem is None:
            gated.append(item)
        else:
            gated.append(Evidence(item.judgement, False, f"not replayed as required: {problem}"))
    return tuple(gated)


def _committed_losses_problem(
    workspace: Workspace, loss: Receipt, commitments_path: str
) -> str | None:
    root = workspace.root
    try:
        commitments = read_commitments(root / commitments_path, commitments_path)
        series = read_losses(root / loss.subjects[0].path, loss.subjects[0].path)
    except (CommitmentsError, LossFileError) as exc:
        return exc.one_line()
    committed = {c.step: c.loss_bits for c in commitments.steps if c.loss is not None}
    for step, value in enumerate(series.values, start=1):
        if committed.get(step) != loss_bits(value):
            return (
                f"{loss.subjects[0].path} step {step} is not the committed loss "
                f"({commitments_path}: {committed.get(step)}, file: {loss_bits(value)})"
            )
    return None


def replay_problem(
    workspace: Workspace,
    loss: Receipt,
    accepted: dict[str, Receipt],
    receipts: tuple[Judgement, ...],
    params: Params,
) -> str | None:
    runs = [accepted[i] for i in loss.provenance.inputs if i in accepted]
    run = next((r for r in runs if r.kind is ArtifactKind.RUN), None)
    if run is None:
        return "no run attestation"
    folder = PurePosixPath(loss.subjects[0].path).parent.as_posix()
    commitments_path = f"{folder}/{COMMITMENTS_FILE}"
    bound = next((s for s in run.subjects if s.path == commitments_path), None)
    if bound is None:
        return f"the run has no step commitments ({commitments_path} not among its outputs)"
    problem = _committed_losses_problem(workspace, loss, commitments_path)
    if problem:
        return problem
    replays = [
        j
        for j in receipts
        if j.receipt is not None
        and j.receipt.kind is ArtifactKind.REPLAY
        and run.id in j.receipt.provenance.inputs
    ]
    if not replays:
        return f"no replay attestation of {folder} (gates replay {folder})"
    reasons = []
    for judgement in replays:
        assert judgement.receipt is not None  # noqa: S101  (filtered above)
        if judgement.status is not Status.FORMAL:
            reasons.append(f"{judgement.path}: {judgement.status.value}: {judgement.reason}")
            continue
        report_subject = next(
            (s for s in judgement.receipt.subjects if s.path.endswith(f"/{REPLAY_FILE}")), None
        )
        if report_subject is None:
            reasons.append(f"{judgement.path}: binds no {REPLAY_FILE}")
            continue
        report = read_report(workspace.root / report_subject.path)
        if isinstance(report, str):
            reasons.append(f"{report_subject.path}: {report}")
            continue
        found = report_problem(
            report,
            required=params.replay_windows,
            width=params.replay_window_steps,
            run_id=run.id,
            commitments_sha256=bound.sha256,
            across_builds=params.replay_across_builds,
        )
        if found is None:
            return None
        reasons.append(f"{judgement.path}: {found}")
    return "; ".join(reasons)
