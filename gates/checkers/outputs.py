"""Writing a checker's output file and its receipt, the same way for every checker.

Written on success only, and never as a downgrade: an output whose receipt is signed is not
replaced by an unsigned one, a formal one not by a probe one, and a check that failed (an
invalid checkpoint, say) does not replace a formal output, unless the user passes
`--force`. `--no-receipt` is a throwaway check: the figures are shown, nothing is written.
Each receipt records the checker's command line, which `gates refresh` re-runs.
"""

from __future__ import annotations

import hashlib
import json

from gates.core.atomic import write_bytes_atomic
from gates.core.echo import note
from gates.core.errors import GatesError, ReceiptError
from gates.core.json_writer import indented_json, pretty_json_bytes
from gates.core.paths import resolve_inside
from gates.engine.inputs import AuditInputs
from gates.freeze.check import FreezeReport
from gates.outputs.models import check_output
from gates.receipts.create import ReceiptRequest, build_document, create_receipt
from gates.receipts.model import RECEIPT_SUFFIX, ArtifactKind, EvidenceClass, Receipt
from gates.receipts.verify import (
    Judgement,
    ReceiptRejectedError,
    Status,
    parse_receipt,
    read_receipt,
)
from gates.trust.keys import configured_key
from gates.workspace.repository import Workspace


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
    audit: AuditInputs,
    receipt_path: str,
    kind: ArtifactKind,
    document: dict[str, object],
    inputs: list[tuple[str, Judgement | None]],
    *,
    extra_probe_reasons: tuple[str, ...] = (),
    extra_subjects: tuple[str, ...] = (),
    failed: bool = False,
    judged_under: FreezeReport | None = None,
) -> tuple[Receipt, str]:
    """Write ``document`` beside ``receipt_path`` atomically, then its receipt.

    The receipt names the input receipts by id and is probe when an input has
    no accepted receipt or counts as probe. ``extra_subjects`` are bound beside the output
    (e.g. the files of a checkpoint below an external root). ``judged_under`` is the freeze
    the checker judged its inputs under: the receipt's freeze before, so that only the
    freeze after hashing is judged again (and what the audit counts is judged under it).
    """
    workspace = audit.workspace
    artifact = artifact_path(receipt_path)
    check_output(kind, document, artifact)
    mode = audit.invocation.checker
    request = ReceiptRequest(
        kind=kind,
        subjects=(artifact, *extra_subjects),
        profile=shared_profile([j for _, j in inputs]),
        command=mode.command,
        inputs=tuple(j.receipt.id for _, j in inputs if j and j.receipt),
        output=receipt_path,
        overwrite=True,
        probe_reasons=input_probe_reasons(inputs) + extra_probe_reasons,
    )
    data = pretty_json_bytes(document)
    if mode.no_receipt:
        return _unwritten_receipt(audit, request, data), artifact
    key = configured_key(audit.invocation.signing_key)
    if not mode.force:
        refusal = downgrade_problem(workspace, request, failed=failed, signed=key is not None)
        if refusal:
            raise GatesError(
                f"refusing to replace {artifact}: {refusal}",
                file=receipt_path,
                hint="pass --force to replace it anyway, --no-receipt for a throwaway check, "
                "or -o OTHER.receipt.json to write elsewhere",
            )
    write_bytes_atomic(resolve_inside(workspace.root, artifact, what="checker output"), data)
    freeze = None
    if judged_under is not None:
        freeze = (judged_under, audit.judge_freeze())
    receipt, _ = create_receipt(
        workspace,
        request,
        cache=audit.cache,
        freeze=freeze,
        signing_key=key,
        freeze_inputs=audit.freeze_inputs,
    )
    audit.cache.save()
    if mode.command is not None:  # from the command line (the demo and the API stay quiet)
        from gates.engine.counting import what_counts  # noqa: PLC0415  (counting imports the engine)

        after = freeze[1] if freeze else None
        for counted in what_counts(audit, [receipt_path], freeze=after):
            note(f"audit: {counted.line()}")
    return receipt, artifact


def downgrade_problem(
    workspace: Workspace, request: ReceiptRequest, *, failed: bool, signed: bool
) -> str:
    """Why writing ``request`` (``signed`` or not) over the output already there would be a
    downgrade ("" if not).

    An unreadable or rejected receipt there may be replaced: it counts for nothing.
    """
    relpath = request.output or ""
    try:
        existing = read_receipt(workspace.root, relpath)
    except (ReceiptRejectedError, OSError):
        return ""
    was_formal = existing.evidence_class is EvidenceClass.FORMAL
    if existing.attestation is not None and not signed:
        return (
            "the output there is signed and this one would be unsigned "
            "(GATES_SIGNING_KEY is not set)"
        )
    if was_formal and failed and _passed(workspace, existing):
        return "the output there is a formal pass and this check failed"
    if was_formal and request.probe_reasons:
        return (
            f"the output there is stamped formal and this one would be probe: "
            f"{request.probe_reasons[0]}"
        )
    return ""


def _passed(workspace: Workspace, receipt: Receipt) -> bool:
    """The output a receipt binds records a pass (a valid, clean checkpoint)."""
    try:
        document = json.loads((workspace.root / receipt.subjects[0].path).read_bytes())
    except (OSError, ValueError):
        return False
    return (
        isinstance(document, dict)
        and document.get("valid") is True
        and document.get("hygiene_clean") is not False
    )


def _unwritten_receipt(audit: AuditInputs, request: ReceiptRequest, data: bytes) -> Receipt:
    """The receipt a throwaway check would have had (unsigned, not written): its stamp and
    reasons are shown, nothing lands in the workspace."""
    subjects: list[dict[str, object]] = [
        {"path": request.subjects[0], "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    ]
    freeze = audit.judge_freeze()
    return parse_receipt(build_document(request, subjects, freeze, freeze))


def render_figures(
    figures: dict[str, object],
    receipt: Receipt,
    artifact: str,
    *,
    as_json: bool,
    throwaway: bool,
) -> str:
    """`key=value` lines and where the output went, or one JSON object. ``throwaway``: the
    check wrote nothing (--no-receipt)."""
    no_receipt = throwaway
    if as_json:
        if no_receipt:
            return indented_json({**figures, "output": None, "receipt": None})
        return indented_json({**figures, "output": artifact, "receipt": receipt.id})
    lines = [f"{key}={json.dumps(value)}" for key, value in figures.items()]
    if no_receipt:
        lines.append(f"throwaway check (--no-receipt): {artifact} and its receipt not written")
        return "\n".join(lines)
    lines.append(f"wrote {artifact} ({receipt.id})")
    lines += [f"  probe because: {reason}" for reason in receipt.stamp_reasons]
    return "\n".join(lines)
