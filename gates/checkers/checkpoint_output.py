"""What every `gates check checkpoint` mode writes: the output document and its receipt
(one process, slices, or the job's ranks)."""

from __future__ import annotations

import hashlib
import json

from gates import exitcodes
from gates.checkers.outputs import render_figures, write_checker_output
from gates.checkpoints.check import CheckpointReport
from gates.checkpoints.layout import INDEX_NAME
from gates.echo import Echo
from gates.engine.inputs import AuditInputs
from gates.external import Location
from gates.receipts.model import ArtifactKind

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
    receipt, artifact = write_checker_output(
        inputs,
        output,
        ArtifactKind.CHECKPOINT_CHECK,
        document,
        [],
        extra_subjects=subjects,
        failed=failed,
    )
    shown = {k: v for k, v in document.items() if k not in ("tensor_contents", "format")}
    echo(render_figures(shown, receipt, artifact, as_json=as_json))
    return exitcodes.BLOCKED if failed else exitcodes.OK
