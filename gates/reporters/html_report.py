"""`gates report --html`: one self-contained page for the release manager.

Charts are drawn with matplotlib on the server and inlined as SVG: the page holds no
script and loads nothing when viewed. Series carry SVG ids (`reference-loss`,
`candidate-loss`, `first-divergence`, `ulp-difference`, `tensor-map`,
`first-differing-tensor`, `history-formal-steps`) so that a reader or a test can find them.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from gates.reporters.report_data import LossCurves, ReportData, TensorMap

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Beyond this many points a curve is drawn from every k-th step (the first divergence and
#: the last step always kept); the ULP chart keeps each bucket's maximum instead.
MAX_POINTS = 2000
#: Beyond this many rows the tensor map aggregates neighbouring layers.
MAX_ROWS = 96
#: Where a cell with any differing tensor starts on the colour scale (orange).
SOME_DIFFER = 0.7

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:72rem;color:#1b1b1b}
h1{font-size:1.4rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;width:100%}
td,th{border:1px solid #ddd;padding:.25rem .4rem;text-align:left;vertical-align:top}
.pass{color:#0a6b1f;font-weight:bold}.blocked{color:#a4000f;font-weight:bold}
.discharged{color:#0a6b1f}.discharging{color:#8a5a00}.undischarged,.error{color:#a4000f}
.formal{color:#0a6b1f;font-weight:bold}.probe{color:#8a5a00}.note{color:#555;font-size:.85rem}
.figures{font-size:1.1rem} .chart svg{max-width:100%;height:auto}
"""


def _figure(width: float, height: float, *, left: float = 0.09, bottom: float = 0.1) -> Figure:
    """Fixed margins: a constrained layout would draw every figure several times."""
    from matplotlib.figure import Figure  # noqa: PLC0415  (the optional `report` extra)

    figure = Figure(figsize=(width, height))
    figure.subplots_adjust(left=left, right=0.98, top=0.95, bottom=bottom, hspace=0.12)
    return figure


def _svg(figure: Figure) -> str:
    import matplotlib as mpl  # noqa: PLC0415

    buffer = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "gates"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    start, end = text.find("<metadata>"), text.find("</metadata>")
    return text[:start] + text[end + len("</metadata>") :] if start >= 0 <= end else text


def _sampled(count: int, keep: Iterable[int]) -> np.ndarray:
    """Indices of at most MAX_POINTS evenly spaced steps, plus the ones that must show."""
    if count <= MAX_POINTS:
        return np.arange(count)
    stride = math.ceil(count / MAX_POINTS)
    extra = [i for i in keep if 0 <= i < count]
    return np.unique(np.concatenate([np.arange(0, count, stride), [count - 1], extra]))


def _bucket_max(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Steps and the largest value of each bucket, so that no spike is sampled away."""
    count = len(values)
    if count <= MAX_POINTS:
        return np.arange(1, count + 1), values
    stride = math.ceil(count / MAX_POINTS)
    padded = np.full(stride * math.ceil(count / stride), np.nan)
    padded[:count] = values
    with np.errstate(invalid="ignore"):
        buckets = padded.reshape(-1, stride)
        finite = np.isfinite(buckets).any(axis=1)
        peaks = np.where(
            finite, np.nanmax(np.where(np.isfinite(buckets), buckets, -1), axis=1), np.nan
        )
    return np.arange(1, count + 1, stride), peaks


def loss_chart(curves: LossCurves) -> str:
    figure = _figure(10, 5.2)
    losses, ulps = figure.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    first = curves.first_diverging_step
    for side, gid, colour, style in (
        (curves.reference, "reference-loss", "#1f5fbf", "-"),
        (curves.candidate, "candidate-loss", "#d9480f", "--"),
    ):
        if side is None or not side.values:
            continue
        values = np.asarray(side.values, dtype=np.float64)
        index = _sampled(len(values), [first - 1] if first else [])
        kind = "formal" if side.formal else "probe"
        losses.plot(
            index + 1,
            values[index],
            style,
            color=colour,
            lw=1.3,
            gid=gid,
            label=f"{side.label} ({kind})",
        )
        nan_steps = np.flatnonzero(~np.isfinite(values)) + 1
        if nan_steps.size:
            finite = values[np.isfinite(values)]
            floor = float(finite.min()) if finite.size else 0.0
            losses.plot(
                nan_steps[:MAX_POINTS],
                np.full(min(nan_steps.size, MAX_POINTS), floor),
                "x",
                color=colour,
                gid=f"{gid}-nan",
                label=f"{nan_steps.size} NaN step(s)",
            )
    if first is not None:
        for axes in (losses, ulps):
            axes.axvline(first, color="#a4000f", lw=1, ls=":", gid="first-divergence")
        losses.annotate(
            f"first divergence: step {first}",
            (first, 0.5),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            color="#a4000f",
            fontsize=9,
        )
    losses.set_ylabel("loss")
    losses.legend(fontsize=8, loc="upper right")
    losses.grid(alpha=0.3)
    if curves.ulps:
        steps, peaks = _bucket_max(np.asarray(curves.ulps, dtype=np.float64))
        ulps.step(steps, peaks, where="mid", color="#5f3dc4", lw=1.1, gid="ulp-difference")
        if np.nanmax(np.where(np.isfinite(peaks), peaks, 0)) > 0:
            ulps.set_yscale("symlog", linthresh=1)
    ulps.set_ylabel(f"|difference| in ULPs\n({curves.dtype})")
    ulps.set_xlabel("step")
    ulps.grid(alpha=0.3)
    return _svg(figure)


def _aggregate(tensors: TensorMap) -> tuple[list[str], np.ndarray, np.ndarray, int | None]:
    """Rows of at most MAX_ROWS (neighbouring layers summed), the fraction of tensors that
    differ in each cell, the counts, and the row of the first differing tensor."""
    total = np.asarray(tensors.total, dtype=np.int64).reshape(len(tensors.layers), -1)
    unequal = np.asarray(tensors.unequal, dtype=np.int64).reshape(len(tensors.layers), -1)
    labels = list(tensors.layers)
    first_row = labels.index(tensors.first[0]) if tensors.first else None
    if len(labels) > MAX_ROWS:
        size = math.ceil(len(labels) / MAX_ROWS)
        groups = range(0, len(labels), size)
        total = np.add.reduceat(total, list(groups), axis=0)
        unequal = np.add.reduceat(unequal, list(groups), axis=0)
        labels = [
            f"{labels[g].strip()} .. {labels[min(g + size, len(labels)) - 1].strip()}"
            for g in groups
        ]
        first_row = first_row // size if first_row is not None else None
    with np.errstate(invalid="ignore", divide="ignore"):
        share = unequal / np.maximum(total, 1)
    # one differing tensor among thousands must not look equal: any difference starts at
    # orange and grows to red with the share that differs
    fraction = np.where(
        total > 0, np.where(unequal > 0, SOME_DIFFER + (1 - SOME_DIFFER) * share, 0.0), np.nan
    )
    return labels, fraction, unequal, first_row


def tensor_chart(tensors: TensorMap) -> str:
    import matplotlib as mpl  # noqa: PLC0415
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    labels, fraction, unequal, first_row = _aggregate(tensors)
    height = min(2 + 0.22 * len(labels), 22)
    figure = _figure(9, height, left=0.3, bottom=0.6 / height + 0.02)
    axes = figure.subplots()
    masked = np.ma.masked_invalid(fraction)
    image = axes.imshow(
        masked,
        aspect="auto",
        cmap=mpl.colormaps["RdYlGn_r"].with_extremes(bad="#e9ecef"),
        vmin=0,
        vmax=1,
        interpolation="nearest",
        gid="tensor-map",
    )
    axes.set_xticks(range(len(tensors.phases)), tensors.phases, rotation=20, fontsize=8)
    axes.set_yticks(range(len(labels)), labels, fontsize=7 if len(labels) > 40 else 8)
    if len(labels) * len(tensors.phases) <= 400:
        for (row, column), count in np.ndenumerate(unequal):
            if count:
                axes.text(column, row, str(count), ha="center", va="center", fontsize=7)
    if tensors.first is not None and first_row is not None:
        column = tensors.phases.index(tensors.first[1]) if tensors.first[1] in tensors.phases else 0
        axes.add_patch(
            Rectangle(
                (column - 0.5, first_row - 0.5),
                1,
                1,
                fill=False,
                ec="#000",
                lw=2.5,
                gid="first-differing-tensor",
            )
        )
    bar = figure.colorbar(image, ax=axes, shrink=0.6, pad=0.02)
    bar.set_ticks([0, SOME_DIFFER, 1], labels=["all equal", "some differ", "all differ"])
    return _svg(figure)


def history_chart(data: ReportData) -> str:
    figure = _figure(10, 3, bottom=0.25)
    axes = figure.subplots()
    points = data.history
    trusted = [(i, p.formal_alignment_steps) for i, p in enumerate(points) if p.trusted]
    untrusted = [(i, p.formal_alignment_steps) for i, p in enumerate(points) if not p.trusted]
    if trusted:
        xs, ys = zip(*trusted, strict=True)
        axes.plot(
            xs, ys, "o-", color="#1f5fbf", gid="history-formal-steps", label="signed, trusted"
        )
    if untrusted:
        xs, ys = zip(*untrusted, strict=True)
        axes.plot(
            xs, ys, "x", color="#a4000f", gid="history-untrusted", label="untrusted (not fact)"
        )
    axes.axhline(data.summary.required_steps, color="#888", ls=":", lw=1)
    step = max(1, len(points) // 20)
    axes.set_xticks(
        range(0, len(points), step),
        [p.commit[:8] for p in points][::step],
        rotation=45,
        fontsize=7,
    )
    axes.set_ylabel("formal_alignment_steps")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return _svg(figure)


# -- HTML --------------------------------------------------------------------------------
def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(headers: list[str], rows: Iterable[list[str]], table_id: str) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _top(data: ReportData) -> str:
    s = data.summary
    tensor = (
        f" · tensor_aligned_steps = {s.tensor_aligned_steps} / {s.tensor_required_steps}"
        if s.tensor_aligned_steps is not None
        else ""
    )
    blockers = "".join(f"<li>{_e(b)}</li>" for b in data.blockers)
    return (
        f'<section id="verdict"><h1>gates audit: <span class="{_e(s.verdict)}">'
        f"verdict={_e(s.verdict)}</span></h1>"
        f'<p class="figures">formal_alignment_steps = {s.formal_alignment_steps} / '
        f"{s.required_steps}{_e(tensor)}</p>"
        f"<p>commit {_e(s.commit or '(none)')} · policy: {_e(data.policy)}</p>"
        + (f"<ul>{blockers}</ul>" if blockers else "")
        + "</section>"
    )


def _contracts(data: ReportData) -> str:
    rows = []
    for c in data.contracts:
        met = sum(1 for x in c.criteria if x.met)
        unmet = c.first_unmet
        rows.append(
            [
                f"{_e(c.spec.id)}<br><span class='note'>{_e(c.spec.title)}</span>",
                "yes" if c.spec.blocking else "no",
                f'<span class="{_e(c.status.value)}">{_e(c.status.value)}</span>',
                f"{met}/{len(c.criteria)}",
                _e(f"{unmet.name}: {unmet.detail}") if unmet else "",
            ]
        )
    table = _table(["contract", "blocking", "status", "met", "first unmet"], rows, "contracts")
    return f'<section id="contracts-section"><h2>Contracts</h2>{table}</section>'


def _losses(data: ReportData) -> str:
    curves = data.losses
    title = "<h2>Loss curves</h2>"
    if curves is None:
        return f'<section id="losses">{title}<p>No loss receipts: nothing to draw.</p></section>'
    notes = []
    for name, side in (("reference", curves.reference), ("candidate", curves.candidate)):
        if side is None:
            notes.append(f"No {name} loss receipt: only one side is drawn.")
        elif side.problem:
            notes.append(f"{side.label}: not evidence as it stands: {side.problem}")
    if curves.first_diverging_step is not None:
        notes.append(f"First diverging step: {curves.first_diverging_step}.")
    elif curves.reference and curves.candidate:
        notes.append("The two curves are bit-identical at every step.")
    if curves.reference is None and curves.candidate is None:
        chart = ""
    else:
        chart = f'<div class="chart" id="loss-chart">{loss_chart(curves)}</div>'
    body = "".join(f'<p class="note">{_e(n)}</p>' for n in notes)
    return f'<section id="losses">{title}{body}{chart}</section>'


def _tensors(data: ReportData) -> str:
    title = "<h2>Tensor alignment map (layers by phases)</h2>"
    tensors = data.tensors
    if tensors is None:
        return f'<section id="tensors">{title}<p>No tensor-alignment contract.</p></section>'
    notes = "".join(f'<p class="note">{_e(p)}</p>' for p in tensors.problems)
    if not tensors.layers:
        return f'<section id="tensors">{title}{notes or "<p>No tensors compared.</p>"}</section>'
    first = (
        f"<p>First differing tensor (outlined): {_e(tensors.first_detail)}</p>"
        if tensors.first
        else "<p>Every compared tensor is bit-identical.</p>"
    )
    total = sum(map(sum, tensors.total))
    chart = f'<div class="chart" id="tensor-chart">{tensor_chart(tensors)}</div>'
    rows = len(tensors.layers)
    summary = f'<p class="note">{total} candidate tensor(s) dumped, in {rows} row(s).</p>'
    return f'<section id="tensors">{title}{first}{notes}{summary}{chart}</section>'


def _inventory(data: ReportData) -> str:
    title = "<h2>Inventory differences</h2>"
    if not data.inventory:
        return f'<section id="inventory">{title}<p>None found.</p></section>'
    parts = []
    for group in data.inventory:
        shown = group.findings[:200]
        more = len(group.findings) - len(shown)
        items = "".join(f"<li>{_e(f)}</li>" for f in shown)
        if more:
            items += f"<li>... and {more} more</li>"
        parts.append(
            f"<h3>{_e(group.criterion)} <span class='note'>({_e(group.contract)}, "
            f"{len(group.findings)})</span></h3><ul>{items}</ul>"
        )
    return f'<section id="inventory">{title}{"".join(parts)}</section>'


def _evidence(data: ReportData) -> str:
    rows = [
        [
            _e(r.contract),
            _e(r.path),
            _e(r.kind),
            _e(r.framework),
            f'<span class="{"formal" if r.counts else "probe"}">'
            f"{'formal/1' if r.counts else 'probe/0'}</span>",
            _e(r.why),
        ]
        for r in data.evidence
    ]
    if not rows:
        rows = [["", "no receipt was looked at by any contract", "", "", "", ""]]
    table = _table(["contract", "receipt", "kind", "framework", "counts", "why"], rows, "evidence")
    return f'<section id="evidence-section"><h2>Evidence</h2>{table}</section>'


def _history(data: ReportData) -> str:
    if not data.history:
        return ""
    chart = f'<div class="chart" id="history-chart">{history_chart(data)}</div>'
    untrusted = sum(1 for p in data.history if not p.trusted)
    note = (
        f'<p class="note">{untrusted} note(s) are not signed by a trusted key: shown, '
        "never counted as fact.</p>"
        if untrusted
        else ""
    )
    return (
        f'<section id="history"><h2>History of formal_alignment_steps</h2>{note}{chart}</section>'
    )


def render(data: ReportData) -> str:
    """The page. Text from the workspace (paths, tensor names) is escaped in the HTML, and
    matplotlib draws it literally: mathtext (`$...$`) is off, so a path is never parsed."""
    import matplotlib as mpl  # noqa: PLC0415

    with mpl.rc_context({"text.parse_math": False, "text.usetex": False}):
        return _page(data)


def _page(data: ReportData) -> str:
    sections = [
        _top(data),
        _contracts(data),
        _losses(data),
        _tensors(data),
        _inventory(data),
        _evidence(data),
        _history(data),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>gates report: {_e(data.summary.verdict)}</title><style>{_STYLE}</style>"
        f"</head><body>{''.join(sections)}</body></html>\n"
    )
