"""`gates report --html DIR`: the audit as one self-contained page (docs/html-report.md)."""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gates.contracts import tensor_alignment
from gates.contracts.model import EvaluationError
from gates.core import exitcodes
from gates.core.atomic import write_text_atomic
from gates.core.echo import Output
from gates.core.errors import GatesError
from gates.core.paths import resolve_inside
from gates.engine.audit import AuditResult, run_audit
from gates.engine.inputs import AuditInputs
from gates.losses.series import LossFileError, read_losses
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Judgement, Status
from gates.reporters import html_report
from gates.reporters.history import history
from gates.reporters.report_data import (
    CandidateOrder,
    HistoryPoint,
    LossSide,
    LossSides,
    audited_comparison,
    dtype_of,
    report_data,
    tensor_contract,
)
from gates.tensors.layout import ORDER_FILE, open_dump
from gates.tensors.layout import _order as read_order

REPORT_FILE = "report.html"


def _require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise GatesError(
            "the HTML report needs matplotlib, which is not installed",
            hint="pip install 'gates[report]' (or pip install matplotlib)",
        )


def _lenient_values(path: Path) -> tuple[float, ...]:
    """The numbers of a loss file as they are, NaN included, to draw what strict reading
    refused (the report says why it is not evidence)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.name.endswith(".jsonl"):
        values = []
        for line in text.splitlines():
            if line.strip():
                record = json.loads(line)
                values.append(record.get("loss") if isinstance(record, dict) else None)
    else:
        document = json.loads(text)
        values = document.get("losses", []) if isinstance(document, dict) else []
    return tuple(
        float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
        for v in values
    )


def _side(root: Path, judgement: Judgement, formal: bool) -> LossSide | None:
    receipt = judgement.receipt
    if receipt is None or not receipt.subjects:
        return None
    relpath = receipt.subjects[0].path
    try:
        series = read_losses(root / relpath, relpath)
        return LossSide(judgement.path, tuple(series.values), formal)
    except LossFileError as error:
        try:
            values = _lenient_values(root / relpath)
        except (OSError, ValueError, RecursionError):
            values = ()
        return LossSide(judgement.path, values, False, error.one_line())


def _first_loss(receipts: tuple[Judgement, ...], framework: str) -> Judgement | None:
    return next(
        (
            j
            for j in receipts
            if j.receipt is not None
            and j.status is not Status.REJECTED
            and j.receipt.kind is ArtifactKind.LOSS
            and j.receipt.framework is not None
            and j.receipt.framework.value == framework
        ),
        None,
    )


def loss_sides(root: Path, result: AuditResult) -> LossSides | None:
    """The pair that sets formal_alignment_steps (read by the audit); without one, the first
    loss receipt of each framework, read here and drawn as probe."""
    pair = result.alignment.chosen
    if pair is not None:
        return LossSides(
            LossSide(pair.reference.path, tuple(pair.reference_series.values), True),
            LossSide(pair.candidate.path, tuple(pair.candidate_series.values), True),
            dtype_of(pair.candidate.receipt),
        )
    ref_judgement = _first_loss(result.receipts, "torch")
    cand_judgement = _first_loss(result.receipts, "paddle")
    if ref_judgement is None and cand_judgement is None:
        return None
    return LossSides(
        _side(root, ref_judgement, False) if ref_judgement else None,
        _side(root, cand_judgement, False) if cand_judgement else None,
        dtype_of((cand_judgement or ref_judgement).receipt),  # type: ignore[union-attr]
    )


def candidate_order(root: Path, result: AuditResult) -> CandidateOrder | None:
    """The candidate dump's order files over the steps the audit compared (the tensor map's
    cells); None when there is no comparison to draw."""
    contract = tensor_contract(result)
    comparison = audited_comparison(contract) if contract is not None else None
    if contract is None or comparison is None:
        return None
    try:
        params, _, _ = tensor_alignment._parse(dict(contract.spec.params))
        dump = open_dump(resolve_inside(root, params.candidate, what="dump"), params.candidate)
        entries: list[tuple[str, str]] = []
        for step in comparison.steps:
            folder = dump.steps[step]
            entries += read_order(folder / ORDER_FILE, f"{dump.display}/{folder.name}")
    except (GatesError, EvaluationError, KeyError) as error:
        return CandidateOrder(
            problem=error.one_line() if isinstance(error, GatesError) else str(error)
        )
    return CandidateOrder(tuple(entries))


@dataclass(frozen=True)
class PageWritten:
    """What `gates report --html` wrote: the page's path and size, and the verdict it shows."""

    target: Path
    size: int
    verdict: str
    formal_alignment_steps: int


def render_json(written: PageWritten) -> str:
    document = {
        "report": str(written.target),
        "bytes": written.size,
        "verdict": written.verdict,
        "formal_alignment_steps": written.formal_alignment_steps,
    }
    return json.dumps(document)


#: --format -> the renderer of a PageWritten (the page itself is HTML, in its file)
RENDERERS: dict[str, Callable[[PageWritten], str]] = {
    "text": lambda written: f"wrote {written.target} (verdict={written.verdict})",
    "json": render_json,
}


def report(
    inputs: AuditInputs,
    folder: Path,
    *,
    out: Output,
    history_range: str | None = None,
) -> int:
    """Write FOLDER/report.html; exit 0 once written, whatever the verdict (the page says it)."""
    out.render(RENDERERS, page_written(inputs, folder, history_range=history_range))
    return exitcodes.OK


def page_written(inputs: AuditInputs, folder: Path, *, history_range: str | None) -> PageWritten:
    """The audit drawn as one page, written to FOLDER/report.html."""
    workspace = inputs.workspace
    _require_matplotlib()
    result = run_audit(inputs)
    points: tuple[HistoryPoint, ...] = ()
    if history_range is not None:
        points = tuple(
            HistoryPoint(e.commit, e.summary.formal_alignment_steps, e.fact is not None)
            for e in history(workspace.root, history_range or None, inputs.policy.anchors)
            if e.summary is not None
        )
    root = workspace.root
    data = report_data(result, loss_sides(root, result), candidate_order(root, result), points)
    page = html_report.render(data)
    target = folder / REPORT_FILE
    try:
        write_text_atomic(target, page)
    except OSError as error:
        raise GatesError(
            f"cannot write the report: {error.strerror}",
            file=target,
            hint="pass --html a folder you can write (outside the repository)",
        ) from None
    size = len(page.encode("utf-8"))
    return PageWritten(target, size, result.verdict, result.formal_alignment_steps)
