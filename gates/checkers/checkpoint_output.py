"""What every `gates check checkpoint` mode writes: the output document and its receipt
(one process, slices, or the job's ranks)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from gates.checkers.outputs import render_figures, write_checker_output
from gates.checkpoints.check import CheckpointReport
from gates.checkpoints.layout import INDEX_NAME
from gates.core import exitcodes
from gates.core.echo import Echo
from gates.engine.inputs import AuditInputs
from gates.receipts.model import ArtifactKind, Receipt
from gates.workspace.external import Location

CHECK_FORMAT = "gates.checkpoint_check/v1"


def layout_digest(report: CheckpointReport) -> str:
    """Identifies a checkpoint's layout (tensor, shard, dtype, shape) so slices can be merged."""
    rows = sorted(
        (name, t.shard, t.entry.dtype, list(t.entry.shape))
        for name, t in report.checkpoint.tensors.items()
    )
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def output_document(report: CheckpointReport, mode: str) -> dict[str, object]:
    figures = report.figures()
    return {
        "format": CHECK_FORMAT,
        "mode": mode,
        **{k: figures[k] for k in ("path", "valid", "problems", "hygiene_clean", "hygiene")},
        "incomplete": list(report.incomplete),
        "tensor_count": figures["tensor_count"],
        "shard_count": figures["shard_count"],
        "digest": figures["digest"] if mode != "partial" else None,
        "layout_digest": layout_digest(report),
        "against": None,
    }


def bound_files(location: Location, report: CheckpointReport) -> tuple[str, ...]:
    """The external files a check of a checkpoint below an external root binds: index and
    shards, as ``external:<root>/<relpath>`` subjects of its receipt."""
    if not location.external or not report.valid:
        return ()
    names = sorted(report.checkpoint.shards)
    if report.checkpoint.index_present:
        names.append(INDEX_NAME)
    return tuple(f"{location.label}/{name}" for name in names)


@dataclass(frozen=True)
class CheckpointChecked:
    """What `gates check checkpoint` wrote, in any mode: the figures it shows, the receipt,
    the output's path (nothing written when ``throwaway``: --no-receipt), and whether the
    check failed."""

    shown: dict[str, object]
    receipt: Receipt
    artifact: str
    throwaway: bool
    failed: bool


#: --format -> the renderer of a CheckpointChecked
RENDERERS: dict[str, Callable[[CheckpointChecked], str]] = {
    "text": lambda c: render_figures(
        c.shown, c.receipt, c.artifact, as_json=False, throwaway=c.throwaway
    ),
    "json": lambda c: render_figures(
        c.shown, c.receipt, c.artifact, as_json=True, throwaway=c.throwaway
    ),
}


def checked(
    receipt: Receipt,
    artifact: str,
    document: dict[str, object],
    *,
    failed: bool,
    throwaway: bool,
) -> CheckpointChecked:
    """The result of a check whose output and receipt are written (or, ``throwaway``, not):
    what it shows of them."""
    shown = {k: v for k, v in document.items() if k not in ("tensor_contents", "format")}
    return CheckpointChecked(shown, receipt, artifact, throwaway, failed)


def written(
    inputs: AuditInputs,
    document: dict[str, object],
    output: str,
    subjects: tuple[str, ...],
    *,
    failed: bool,
) -> CheckpointChecked:
    """Write the output and its receipt (binding ``subjects`` too)."""
    receipt, artifact = write_checker_output(
        inputs,
        output,
        ArtifactKind.CHECKPOINT_CHECK,
        document,
        [],
        extra_subjects=subjects,
        failed=failed,
    )
    throwaway = inputs.invocation.checker.no_receipt
    return checked(receipt, artifact, document, failed=failed, throwaway=throwaway)


def finish(
    inputs: AuditInputs,
    document: dict[str, object],
    output: str,
    subjects: tuple[str, ...],
    *,
    failed: bool,
    as_json: bool,
    echo: Echo,
) -> int:
    """Write the output and its receipt (binding ``subjects`` too), show the figures."""
    result = written(inputs, document, output, subjects, failed=failed)
    echo(RENDERERS["json" if as_json else "text"](result))
    return exitcodes.BLOCKED if result.failed else exitcodes.OK
