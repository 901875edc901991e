"""`gates check loss` and `gates check determinism`: compare, write the output, receipt it."""

from __future__ import annotations

import json
from pathlib import Path

from gates import exitcodes
from gates.atomic import write_text_atomic
from gates.canonical import pretty_json
from gates.checks.loss import compare_losses, compare_repeats
from gates.commands import Echo
from gates.engine import judge_workspace
from gates.errors import GatesError, ReceiptError
from gates.hashing import StatCache, cache_file
from gates.losses import LossSeries, read_losses
from gates.paths import resolve_inside, to_workspace_relpath
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import RECEIPT_SUFFIX, ArtifactKind, Receipt
from gates.receipts.verify import Judgement, Status
from gates.workspace import Workspace

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


def _receipt_for(relpath: str, judgements: tuple[Judgement, ...]) -> Judgement | None:
    """The accepted receipt binding ``relpath`` (formal preferred), if any."""
    binding = [
        j
        for j in judgements
        if j.receipt is not None
        and j.status is not Status.REJECTED
        and any(s.path == relpath for s in j.receipt.subjects)
    ]
    return min(binding, key=lambda j: (j.status is not Status.FORMAL, j.path), default=None)


def _describe(series: LossSeries, judgement: Judgement | None) -> dict[str, object]:
    return {
        "path": series.path,
        "receipt": judgement.receipt.id if judgement and judgement.receipt else None,
        "steps": len(series),
        "rounded": series.rounded,
        "series_sha256": series.digest(),
    }


def _probe_reasons(inputs: list[tuple[str, Judgement | None]]) -> tuple[str, ...]:
    reasons = []
    for relpath, judgement in inputs:
        if judgement is None:
            reasons.append(f"input {relpath} is not bound by an accepted receipt")
        elif judgement.status is not Status.FORMAL:
            reasons.append(f"input receipt {judgement.path} counts as {judgement.status.value}")
    return tuple(reasons)


def _shared_profile(judgements: list[Judgement | None]) -> dict[str, str]:
    profiles = [j.receipt.provenance.profile for j in judgements if j and j.receipt]
    if len(profiles) == len(judgements) and all(p == profiles[0] for p in profiles):
        return dict(profiles[0])
    return {}


def _write_output(
    workspace: Workspace,
    output: str,
    document: dict[str, object],
    inputs: list[tuple[str, Judgement | None]],
) -> tuple[Receipt, str]:
    if not output.endswith(RECEIPT_SUFFIX):
        raise ReceiptError(f"receipt path {output} must end in {RECEIPT_SUFFIX}")
    artifact = output.removesuffix(RECEIPT_SUFFIX) + ".json"
    request = ReceiptRequest(
        kind=ArtifactKind.LOSS_CHECK,
        subjects=(artifact,),
        profile=_shared_profile([j for _, j in inputs]),
        inputs=tuple(j.receipt.id for _, j in inputs if j and j.receipt),
        output=output,
        overwrite=True,
        probe_reasons=_probe_reasons(inputs),
    )
    path = resolve_inside(workspace.root, artifact, what="checker output")
    write_text_atomic(path, pretty_json(document))
    cache = StatCache(cache_file(workspace.root))
    receipt, _ = create_receipt(workspace, request, cache=cache)
    cache.save()
    return receipt, artifact


def _render(figures: dict[str, object], receipt: Receipt, artifact: str, as_json: bool) -> str:
    if as_json:
        return json.dumps({**figures, "output": artifact, "receipt": receipt.id}, indent=2)
    lines = [f"{key}={json.dumps(value)}" for key, value in figures.items()]
    lines.append(
        f"wrote {artifact} ({receipt.evidence_class.value}/{receipt.formal_weight} {receipt.id})"
    )
    lines += [f"  probe because: {reason}" for reason in receipt.stamp_reasons]
    return "\n".join(lines)


def check_loss(
    workspace: Workspace,
    reference: str,
    candidate: str,
    *,
    required_steps: int,
    bit_exact: bool,
    output: str,
    cwd: Path,
    as_json: bool,
    echo: Echo,
) -> int:
    """Compare two loss series bit by bit; exit 1 on a length mismatch or, with
    ``bit_exact``, when the required steps are not bit-identical."""
    ref_rel = _loss_path(workspace, reference, cwd)
    cand_rel = _loss_path(workspace, candidate, cwd)
    ref = read_losses(workspace.root / ref_rel, ref_rel)
    cand = read_losses(workspace.root / cand_rel, cand_rel)
    comparison = compare_losses(ref, cand, required_steps)
    receipts = judge_workspace(workspace).receipts
    inputs = [
        (ref_rel, _receipt_for(ref_rel, receipts)),
        (cand_rel, _receipt_for(cand_rel, receipts)),
    ]
    figures = comparison.figures()
    document = {
        "format": LOSS_CHECK_FORMAT,
        "mode": "pair",
        "reference": _describe(ref, inputs[0][1]),
        "candidate": _describe(cand, inputs[1][1]),
        **{k: v for k, v in figures.items() if k not in _SIDE_FIGURES},
    }
    receipt, artifact = _write_output(workspace, output, document, inputs)
    echo(_render(figures, receipt, artifact, as_json))
    for series in (ref, cand):
        if series.rounded:
            echo(
                f"rounded=true: every value of {series.path} has 7 or fewer significant "
                "digits; it is not bit-comparable"
            )
    failed = not comparison.length_match or (bit_exact and not comparison.bit_exact_required_steps)
    return exitcodes.BLOCKED if failed else exitcodes.OK


_SIDE_FIGURES = ("reference_steps", "candidate_steps", "reference_rounded", "candidate_rounded")


def check_determinism(
    workspace: Workspace,
    runs: tuple[str, ...],
    *,
    output: str,
    cwd: Path,
    as_json: bool,
    echo: Echo,
) -> int:
    """Repeats of one side and profile: exit 1 unless every run is bit-identical."""
    if len(runs) < 2:
        raise GatesError("a determinism check needs at least two runs")
    relpaths = [_loss_path(workspace, run, cwd) for run in runs]
    series = [read_losses(workspace.root / rel, rel) for rel in relpaths]
    result = compare_repeats(series)
    receipts = judge_workspace(workspace).receipts
    inputs = [(rel, _receipt_for(rel, receipts)) for rel in relpaths]
    figures = result.figures()
    document = {
        "format": LOSS_CHECK_FORMAT,
        "mode": "determinism",
        "runs": [_describe(s, j) for s, (_, j) in zip(series, inputs, strict=True)],
        **{k: v for k, v in figures.items() if k != "runs"},
    }
    receipt, artifact = _write_output(workspace, output, document, inputs)
    echo(_render(figures, receipt, artifact, as_json))
    return exitcodes.OK if result.deterministic else exitcodes.BLOCKED
