"""`gates check loss` and `gates check determinism`: compare, write the output, receipt it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gates.checkers.outputs import (
    receipt_binding,
    render_figures,
    write_checker_output,
)
from gates.core import exitcodes
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.paths import resolve_inside, to_workspace_relpath
from gates.core.progress import Progress
from gates.engine.audit import judge_workspace
from gates.engine.inputs import AuditInputs
from gates.losses.compare import compare_losses, compare_repeats
from gates.losses.series import LossSeries, read_losses
from gates.receipts.judge_all import Wanted
from gates.receipts.model import ArtifactKind, Receipt
from gates.receipts.verify import Judgement
from gates.workspace.repository import Workspace

LOSS_CHECK_FORMAT = "gates.loss_check/v1"
RUN_LOSS_FILES = ("loss.json", "raw_loss.jsonl")


def _loss_path(workspace: Workspace, given: str, cwd: Path) -> str:
    """A loss file, or a run folder holding loss.json or raw_loss.jsonl; workspace-relative."""
    relpath = to_workspace_relpath(workspace.root, given, cwd)
    path = resolve_inside(workspace.root, relpath, what="loss file")
    if path.is_dir():
        for name in RUN_LOSS_FILES:
            if (path / name).is_file():
                return f"{relpath}/{name}"
        raise GatesError(f"no {' or '.join(RUN_LOSS_FILES)} in this run folder", file=relpath)
    return relpath


def _read_both(
    root: Path, ref_rel: str, cand_rel: str, progress: Progress
) -> tuple[LossSeries, LossSeries]:
    """Both series, with progress by file bytes (10 million steps take seconds each)."""
    sizes = [
        (root / rel).stat().st_size if (root / rel).is_file() else 0 for rel in (ref_rel, cand_rel)
    ]
    series = []
    with progress.bar(sum(sizes), "reading losses") as shown:
        for rel, size in zip((ref_rel, cand_rel), sizes, strict=True):
            series.append(read_losses(root / rel, rel))
            shown.update(size)
    return series[0], series[1]


def _describe(series: LossSeries, judgement: Judgement | None) -> dict[str, object]:
    return {
        "path": series.path,
        "receipt": judgement.receipt.id if judgement and judgement.receipt else None,
        "steps": len(series),
        "rounded": series.rounded,
        "series_sha256": series.digest(),
    }


@dataclass(frozen=True)
class LossChecked:
    """What `gates check loss|determinism` found and wrote: the figures, the receipt and the
    output's path (nothing written when ``throwaway``: --no-receipt), the remarks on series
    that cannot be compared bit for bit, and whether the check passed."""

    figures: dict[str, object]
    receipt: Receipt
    artifact: str
    throwaway: bool
    passed: bool
    remarks: tuple[str, ...] = ()


def render_text(checked: LossChecked) -> str:
    figures = render_figures(
        checked.figures,
        checked.receipt,
        checked.artifact,
        as_json=False,
        throwaway=checked.throwaway,
    )
    return "\n".join((figures, *checked.remarks))


def render_json(checked: LossChecked) -> str:
    return render_figures(
        checked.figures,
        checked.receipt,
        checked.artifact,
        as_json=True,
        throwaway=checked.throwaway,
    )


#: --format -> the renderer of a LossChecked (dumps' repeats: `tensors.DETERMINISM_RENDERERS`)
RENDERERS: dict[str, Callable[[LossChecked], str]] = {"text": render_text, "json": render_json}


def show(checked: LossChecked, out: Output) -> int:
    """The result in the format asked for (with JSON, the remarks go to stderr, so that stdout
    holds one document); exit 0 when the check passed, else 1."""
    out.render(RENDERERS, checked)
    if out.as_json:
        for remark in checked.remarks:
            out.note(remark)
    return exitcodes.OK if checked.passed else exitcodes.BLOCKED


def loss_check(
    audit: AuditInputs,
    reference: str,
    candidate: str,
    *,
    required_steps: int,
    bit_exact: bool,
    output: str,
    cwd: Path,
) -> LossChecked:
    """Compare two loss series bit by bit and write the output and its receipt; failed on a
    length mismatch or, with ``bit_exact``, when the required steps are not bit-identical."""
    workspace = audit.workspace
    ref_rel = _loss_path(workspace, reference, cwd)
    cand_rel = _loss_path(workspace, candidate, cwd)
    ref, cand = _read_both(workspace.root, ref_rel, cand_rel, audit.invocation.progress)
    comparison = compare_losses(ref, cand, required_steps)
    judged = judge_workspace(audit, wanted=Wanted(files=(ref_rel, cand_rel)))
    receipts = judged.receipts
    bound = [
        (ref_rel, receipt_binding(ref_rel, receipts)),
        (cand_rel, receipt_binding(cand_rel, receipts)),
    ]
    figures = comparison.figures()
    document = {
        "format": LOSS_CHECK_FORMAT,
        "mode": "pair",
        "reference": _describe(ref, bound[0][1]),
        "candidate": _describe(cand, bound[1][1]),
        **{k: v for k, v in figures.items() if k not in _SIDE_FIGURES},
    }
    receipt, artifact = write_checker_output(
        audit, output, ArtifactKind.LOSS_CHECK, document, bound, judged_under=judged.freeze
    )
    remarks = tuple(
        f"rounded=true: every value of {series.path} has 7 or fewer significant "
        "digits; it is not bit-comparable"
        for series in (ref, cand)
        if series.rounded
    )
    failed = not comparison.length_match or (bit_exact and not comparison.bit_exact_required_steps)
    throwaway = audit.invocation.checker.no_receipt
    return LossChecked(figures, receipt, artifact, throwaway, not failed, remarks)


def check_loss(
    audit: AuditInputs,
    reference: str,
    candidate: str,
    *,
    required_steps: int,
    bit_exact: bool,
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Compare two loss series bit by bit; exit 1 on a length mismatch or, with
    ``bit_exact``, when the required steps are not bit-identical."""
    checked = loss_check(
        audit,
        reference,
        candidate,
        required_steps=required_steps,
        bit_exact=bit_exact,
        output=output,
        cwd=cwd,
    )
    return show(checked, out)


_SIDE_FIGURES = ("reference_steps", "candidate_steps", "reference_rounded", "candidate_rounded")


def check_determinism(
    audit: AuditInputs,
    runs: tuple[str, ...],
    *,
    output: str,
    cwd: Path,
    out: Output,
) -> int:
    """Repeats of one side and profile: exit 1 unless every run is bit-identical."""
    workspace = audit.workspace
    if len(runs) < 2:
        raise GatesError("a determinism check needs at least two runs")
    from gates.commands.tensors import check_dump_determinism, is_dump  # noqa: PLC0415

    folders = [
        resolve_inside(workspace.root, to_workspace_relpath(workspace.root, run, cwd), what="run")
        for run in runs
    ]
    if all(is_dump(folder) for folder in folders):
        return check_dump_determinism(audit, runs, output=output, cwd=cwd, out=out)
    return show(determinism_check(audit, runs, output=output, cwd=cwd), out)


def determinism_check(
    audit: AuditInputs, runs: tuple[str, ...], *, output: str, cwd: Path
) -> LossChecked:
    """Repeats' loss series compared and the output and its receipt written; passed when
    every run is bit-identical."""
    workspace = audit.workspace
    relpaths = [_loss_path(workspace, run, cwd) for run in runs]
    series = [read_losses(workspace.root / rel, rel) for rel in relpaths]
    result = compare_repeats(series)
    judged = judge_workspace(audit, wanted=Wanted(files=tuple(relpaths)))
    receipts = judged.receipts
    bound = [(rel, receipt_binding(rel, receipts)) for rel in relpaths]
    figures = result.figures()
    document = {
        "format": LOSS_CHECK_FORMAT,
        "mode": "determinism",
        "runs": [_describe(s, j) for s, (_, j) in zip(series, bound, strict=True)],
        **{k: v for k, v in figures.items() if k != "runs"},
    }
    receipt, artifact = write_checker_output(
        audit, output, ArtifactKind.LOSS_CHECK, document, bound, judged_under=judged.freeze
    )
    throwaway = audit.invocation.checker.no_receipt
    return LossChecked(figures, receipt, artifact, throwaway, result.deterministic)
