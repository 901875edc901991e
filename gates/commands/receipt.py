"""`gates receipt create|verify|show`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gates.core import exitcodes
from gates.core.echo import Echo, Output
from gates.core.errors import ReceiptError
from gates.core.json_writer import indented_json, pretty_json
from gates.core.paths import to_workspace_relpath
from gates.engine.audit import code_judge, freeze_discharged, judge_workspace, judging_context
from gates.engine.inputs import AuditInputs
from gates.receipts.create import ReceiptRequest, create_receipt
from gates.receipts.judge_all import code_in_force
from gates.receipts.model import Receipt
from gates.receipts.verify import Judgement, ReceiptRejectedError, Status, judge, read_receipt
from gates.reporters.json_report import receipt_entry
from gates.trust.keys import configured_key
from gates.workspace.repository import Workspace


def create(inputs: AuditInputs, request: ReceiptRequest, *, echo: Echo) -> int:
    """Bind the request's subjects, signed with the command's key (none: unsigned)."""
    workspace = inputs.workspace
    receipt, path = create_receipt(
        workspace,
        request,
        cache=inputs.cache,
        signing_key=configured_key(inputs.invocation.signing_key),
        freeze_inputs=inputs.freeze_inputs,
    )
    inputs.cache.save()
    relpath = path.relative_to(workspace.root).as_posix()
    echo(
        f"{relpath}: {receipt.evidence_class.value}/{receipt.formal_weight} {receipt.id}"
        + "".join(f"\n  probe because: {reason}" for reason in receipt.stamp_reasons)
    )
    return exitcodes.OK


def _relpaths(workspace: Workspace, given: tuple[str, ...], cwd: Path) -> list[str]:
    return [to_workspace_relpath(workspace.root, path, cwd) for path in given]


@dataclass(frozen=True)
class Verdicts:
    """What `gates receipt verify` found: each receipt judged as the audit would."""

    judgements: tuple[Judgement, ...]

    @property
    def rejected(self) -> bool:
        return any(j.status is Status.REJECTED for j in self.judgements)


def verdicts(inputs: AuditInputs, paths: tuple[str, ...], *, cwd: Path) -> Verdicts:
    """The given receipts judged exactly as `gates audit` judges them."""
    workspace = inputs.workspace
    relpaths = _relpaths(workspace, paths, cwd)
    state = judge_workspace(inputs)
    judged = {judgement.path: judgement for judgement in state.receipts}
    context = judging_context(inputs, state.freeze, freeze_discharged(state.frozen))
    code = code_judge(inputs, state.freeze)
    judgements = tuple(
        judged.get(relpath) or code_in_force(judge(context, relpath), code) for relpath in relpaths
    )
    context.cache.save()
    return Verdicts(judgements)


#: --format -> the renderer of `gates receipt verify`'s Verdicts
VERIFY_RENDERERS: dict[str, Callable[[Verdicts], str]] = {
    "text": lambda v: "\n".join(f"{j.path}: {j.status.value} ({j.reason})" for j in v.judgements),
    "json": lambda v: indented_json([receipt_entry(j) for j in v.judgements]),
}


def verify(inputs: AuditInputs, paths: tuple[str, ...], *, cwd: Path, out: Output) -> int:
    """Re-judge the given receipts exactly as `gates audit` would; exit 1 if any is rejected."""
    found = verdicts(inputs, paths, cwd=cwd)
    out.render(VERIFY_RENDERERS, found)
    return exitcodes.BLOCKED if found.rejected else exitcodes.OK


@dataclass(frozen=True)
class Shown:
    """One receipt as `gates receipt show` prints it: where it is, its model, and the
    document as written (JSON shows the file, not a re-serialisation)."""

    relpath: str
    receipt: Receipt
    document: object


def shown(workspace: Workspace, path: str, *, cwd: Path) -> Shown:
    """The receipt at ``path``; one that cannot be read is an error naming the reason."""
    relpath = _relpaths(workspace, (path,), cwd)[0]
    try:
        receipt = read_receipt(workspace.root, relpath)
    except ReceiptRejectedError as exc:
        raise ReceiptError(str(exc), file=relpath) from None
    return Shown(relpath, receipt, json.loads((workspace.root / relpath).read_bytes()))


def render_shown_text(shown: Shown) -> str:
    receipt, relpath = shown.receipt, shown.relpath
    provenance = receipt.provenance
    lines = [
        f"receipt   {relpath}",
        f"id        {receipt.id}",
        f"kind      {receipt.kind.value}  framework {receipt.framework or '-'}",
        f"stamp     {receipt.evidence_class.value}/{receipt.formal_weight}",
        *(f"  because {reason}" for reason in receipt.stamp_reasons),
        f"created   {receipt.created_at}  by {provenance.tool}",
        f"git head  {provenance.git_head or '-'}  pin {provenance.pin or '-'}"
        f"  dirty {str(provenance.dirty).lower()}  freeze {provenance.freeze_verdict}",
        f"profile   {_profile_text(provenance.profile)}",
        "subjects",
        *(f"  {s.path}  {s.size} bytes  sha256:{s.sha256}" for s in receipt.subjects),
    ]
    return "\n".join(lines)


#: --format -> the renderer of `gates receipt show`'s Shown
SHOW_RENDERERS: dict[str, Callable[[Shown], str]] = {
    "text": render_shown_text,
    "json": lambda s: pretty_json(s.document).rstrip(),
}


def show(workspace: Workspace, path: str, *, cwd: Path, out: Output) -> int:
    """Print one receipt (exit 0)."""
    out.render(SHOW_RENDERERS, shown(workspace, path, cwd=cwd))
    return exitcodes.OK


def _profile_text(profile: dict[str, str]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(profile.items())) or "-"
