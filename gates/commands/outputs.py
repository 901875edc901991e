"""Writing a checker's output file and its receipt, the same way for every checker."""

from __future__ import annotations

import json

from gates.atomic import write_text_atomic
from gates.canonical import pretty_json
from gates.errors import ReceiptError
from gates.hashing import StatCache, cache_file
from gates.paths import resolve_inside
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.model import RECEIPT_SUFFIX, ArtifactKind, Receipt
from gates.receipts.verify import Judgement, Status
from gates.workspace import Workspace


def artifact_path(receipt_path: str) -> str:
    """`outputs/x.receipt.json` -> `outputs/x.json`."""
    if not receipt_path.endswith(RECEIPT_SUFFIX):
        raise ReceiptError(f"receipt path {receipt_path} must end in {RECEIPT_SUFFIX}")
    return receipt_path.removesuffix(RECEIPT_SUFFIX) + ".json"


def receipt_binding(relpath: str, judgements: tuple[Judgement, ...]) -> Judgement | None:
    """The accepted receipt binding ``relpath`` (formal preferred), if any."""
    binding = [
        j
        for j in judgements
        if j.receipt is not None
        and j.status is not Status.REJECTED
        and any(s.path == relpath for s in j.receipt.subjects)
    ]
    return min(binding, key=lambda j: (j.status is not Status.FORMAL, j.path), default=None)


def input_probe_reasons(inputs: list[tuple[str, Judgement | None]]) -> tuple[str, ...]:
    reasons = []
    for relpath, judgement in inputs:
        if judgement is None:
            reasons.append(f"input {relpath} is not bound by an accepted receipt")
        elif judgement.status is not Status.FORMAL:
            reasons.append(f"input receipt {judgement.path} counts as {judgement.status.value}")
    return tuple(reasons)


def shared_profile(judgements: list[Judgement | None]) -> dict[str, str]:
    profiles = [j.receipt.provenance.profile for j in judgements if j and j.receipt]
    if profiles and len(profiles) == len(judgements) and all(p == profiles[0] for p in profiles):
        return dict(profiles[0])
    return {}


def write_checker_output(
    workspace: Workspace,
    receipt_path: str,
    kind: ArtifactKind,
    document: dict[str, object],
    inputs: list[tuple[str, Judgement | None]],
    *,
    extra_probe_reasons: tuple[str, ...] = (),
    extra_subjects: tuple[str, ...] = (),
) -> tuple[Receipt, str]:
    """Write ``document`` beside ``receipt_path`` atomically, then its receipt.

    The receipt names the input receipts by id and is probe when an input has
    no accepted receipt or counts as probe. ``extra_subjects`` are bound beside the output
    (e.g. the files of a checkpoint below an external root).
    """
    artifact = artifact_path(receipt_path)
    request = ReceiptRequest(
        kind=kind,
        subjects=(artifact, *extra_subjects),
        profile=shared_profile([j for _, j in inputs]),
        inputs=tuple(j.receipt.id for _, j in inputs if j and j.receipt),
        output=receipt_path,
        overwrite=True,
        probe_reasons=input_probe_reasons(inputs) + extra_probe_reasons,
    )
    write_text_atomic(
        resolve_inside(workspace.root, artifact, what="checker output"), pretty_json(document)
    )
    cache = StatCache(cache_file(workspace.root))
    receipt, _ = create_receipt(workspace, request, cache=cache)
    cache.save()
    return receipt, artifact


def render_figures(
    figures: dict[str, object], receipt: Receipt, artifact: str, *, as_json: bool
) -> str:
    """`key=value` lines and where the output went, or one JSON object."""
    if as_json:
        return json.dumps({**figures, "output": artifact, "receipt": receipt.id}, indent=2)
    lines = [f"{key}={json.dumps(value)}" for key, value in figures.items()]
    lines.append(
        f"wrote {artifact} ({receipt.evidence_class.value}/{receipt.formal_weight} {receipt.id})"
    )
    lines += [f"  probe because: {reason}" for reason in receipt.stamp_reasons]
    return "\n".join(lines)
