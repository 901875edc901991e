"""The PR status block: generated from the audit, fixed size, deterministic, en or zh.

One table row per contract; "Blocked by" with each unmet criterion and the
discharge criterion; "Evidence" (at most EVIDENCE_ROWS receipts, by path)
with class, weight and key figures read from the receipted files;
"Unverified", derived from what the contracts decided (their typed figures) and from the
alignment; and a
closing line of what the PR does not claim, and a glossary of the words a
non-engineer meets (formal, probe, discharged, discharging, undischarged,
formal/1). Contracts show their short id (`tensor-inventory`) beside the long
one. Every fixed text, status, class and figure label comes from the locale
file; criterion details and discharge texts are quoted as the contracts and
checkers wrote them (file names, figures). The evidence figures come in already read
(`gates.outputs.read`): the renderer opens no file and parses no detail. No timestamps: the
same inputs give the same bytes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from gates.contracts import results_schema_and_provenance as results_contract
from gates.contracts.model import EvaluationError, ResultsFigures
from gates.core.criteria import DischargeStatus
from gates.core.paths import is_under
from gates.engine.audit import AuditResult, results_spec
from gates.outputs.checkpoint_check import CheckpointCheck
from gates.outputs.read import LossFigures, Opaque, OutputFigures, Unreadable
from gates.outputs.structure_parity import StructureParity
from gates.receipts.alignment import LOSS_KINDS
from gates.receipts.model import ArtifactKind, Framework
from gates.receipts.verify import Judgement, Status
from gates.tensors.progress import tensor_progress

START = "<!-- gates:status -->"
END = "<!-- /gates:status -->"
EVIDENCE_ROWS = 12
DETAIL_WIDTH = 90

LOCALES = Path(__file__).resolve().parent.parent / "locales"


@functools.cache
def messages(lang: str) -> dict[str, str]:
    """The fixed texts of the block in ``lang`` (gates/locales/<lang>.json)."""
    table: dict[str, str] = json.loads((LOCALES / f"{lang}.json").read_text(encoding="utf-8"))
    return table


def short_id(contract_id: str) -> str:
    """`contract_environment.tensor-inventory` -> `tensor-inventory` (the part after the group)."""
    return contract_id.rsplit(".", 1)[-1]


def _contract_name(contract_id: str) -> str:
    short = short_id(contract_id)
    return f"`{contract_id}`" if short == contract_id else f"`{short}` · `{contract_id}`"


def _word(words: dict[str, str], prefix: str, value: str) -> str:
    """A status or class in the block's language; the value itself where no word is given."""
    return words.get(f"{prefix}{value}", value)


def _cell(text: str, width: int = DETAIL_WIDTH) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _figures(judgement: Judgement, found: OutputFigures | None, words: dict[str, str]) -> str:
    receipt = judgement.receipt
    if receipt is None or judgement.status is Status.REJECTED or found is None:
        return judgement.reason  # why it counts nothing
    if isinstance(found, Unreadable):
        return words["f_unreadable"]
    if isinstance(found, LossFigures):
        rounded = words["f_rounded"] if found.rounded else ""
        return words["f_loss"].format(steps=found.steps, first=repr(found.first)) + rounded
    if isinstance(found, Opaque):
        return words["f_files"].format(count=found.files)
    if isinstance(found, BaseModel):
        return _model_figures(receipt.kind, found)
    return _json_figures(receipt.kind, found)


def _pick(data: Mapping[str, object], *keys: str) -> str:
    return ", ".join(f"{k}={json.dumps(data[k])}" for k in keys if k in data)


def _model_figures(kind: ArtifactKind, output: BaseModel) -> str:
    if isinstance(output, CheckpointCheck):
        hash_match = f", hash_match={json.dumps(output.hash_match)}" if output.against else ""
        return (
            f"tensor_count={output.tensor_count}, valid={json.dumps(output.valid)}, "
            f"hygiene_clean={json.dumps(output.hygiene_clean)}{hash_match}"
        )
    if isinstance(output, StructureParity):
        sides = f"{output.reference.tensor_count} vs {output.candidate.tensor_count} tensors"
        counts = output.counts.model_dump()  # the four classes, in the schema's order
        return sides + "; " + ", ".join(f"{k} {v}" for k, v in counts.items())
    return _json_figures(kind, output.model_dump(mode="json", by_alias=True))


def _json_figures(kind: ArtifactKind, data: Mapping[str, object]) -> str:
    """An output whose kind has no model here, or that does not fit its model."""
    if kind is ArtifactKind.LOSS_CHECK and data.get("mode") == "determinism":
        return _pick(data, "runs", "deterministic_steps", "steps", "first_differing_step")
    if kind is ArtifactKind.LOSS_CHECK:
        return _pick(
            data,
            "consistent_steps",
            "first_divergence_step",
            "max_diff",
            "bit_exact_required_steps",
        )
    if kind is ArtifactKind.CHECKPOINT_CHECK:
        against = data.get("against")
        claim = against.get("hash_match") if isinstance(against, dict) else None
        hash_match = f", hash_match={json.dumps(claim)}" if against else ""
        return _pick(data, "tensor_count", "valid", "hygiene_clean") + hash_match
    if kind is ArtifactKind.ENV:
        return _pick(data, "framework_version", "device_name", "weights_loaded")
    return _pick(data, "format", "run_id")


def _side(judgement: Judgement, words: dict[str, str]) -> str:
    framework = judgement.receipt.framework if judgement.receipt else None
    if framework is Framework.TORCH:
        return f"{words['reference']} (torch)"
    if framework is Framework.PADDLE:
        return f"{words['candidate']} (paddle)"
    return "-"


def _contract_rows(result: AuditResult, words: dict[str, str]) -> list[str]:
    rows = [words["table"], "|---|---|---|---|---|"]
    for contract in result.contracts:
        met = sum(c.met for c in contract.criteria)
        unmet = contract.first_unmet
        status = _word(words, "status_", contract.status.value)
        if contract.status is not DischargeStatus.DISCHARGED and contract.waived(result.today):
            status += f" ({words['waived']})"
        rows.append(
            f"| {_contract_name(contract.spec.id)} "
            f"| {words['yes'] if contract.spec.blocking else words['no']} "
            f"| {status} | {met}/{len(contract.criteria)} "
            f"| {_cell(f'{unmet.name}: {unmet.detail}') if unmet else '-'} |"
        )
    return rows


def _blocked_by(result: AuditResult, words: dict[str, str]) -> list[str]:
    blocking = [c for c in result.contracts if c.blocks(result.today)]
    if not blocking:
        return []
    lines = ["", words["blocked_by"]]
    for contract in blocking:
        discharge = words["discharge"].format(discharge=contract.spec.discharge)
        status = _word(words, "status_", contract.status.value)
        lines.append(f"- {_contract_name(contract.spec.id)} ({status}): {discharge}")
        lines += [f"  - {c.name}: {_cell(c.detail)}" for c in contract.criteria if not c.met]
    others = [b for b in result.blockers if not any(b.startswith(c.spec.id) for c in blocking)]
    lines += [f"- {_cell(b)}" for b in others]
    return lines


def evidence_order(result: AuditResult) -> list[Judgement]:
    """The receipts a reviewer reads first first: each side's results (losses before the
    rest), then the checkers' outputs, then everything else (repeats, dumps), by path."""
    folders: tuple[str, ...] = ()
    spec = results_spec([(c.source, c.spec) for c in result.contracts])
    if spec is not None:
        try:
            params = results_contract.parse_params(spec.params)
            folders = (params.reference, params.candidate)
        except EvaluationError:
            folders = ()

    def rank(judgement: Judgement) -> tuple[int, str]:
        receipt = judgement.receipt
        if receipt is None:
            return 4, judgement.path
        if folders and is_under(judgement.path, folders):
            return (0 if receipt.kind in LOSS_KINDS else 1), judgement.path
        if receipt.provenance.inputs:
            return 2, judgement.path
        return 3, judgement.path

    return sorted(result.receipts, key=rank)


def _evidence(
    result: AuditResult, words: dict[str, str], outputs: Mapping[str, OutputFigures]
) -> list[str]:
    lines = ["", words["evidence"]]
    if not result.receipts:
        return [*lines, words["no_evidence"]]
    lines += [words["evidence_table"], "|---|---|---|---|---|---|"]
    for judgement in shown_evidence(result):
        kind = f"`{judgement.receipt.kind.value}`" if judgement.receipt else "-"
        evidence_class = _word(words, "class_", judgement.status.value)
        figures = _figures(judgement, outputs.get(judgement.path), words)
        lines.append(
            f"| `{judgement.path}` | {kind} | {_side(judgement, words)} | {evidence_class} "
            f"| {judgement.weight} | {_cell(figures)} |"
        )
    hidden = len(result.receipts) - EVIDENCE_ROWS
    if hidden > 0:
        lines.append(words["more"].format(count=hidden))
    return lines


def shown_evidence(result: AuditResult) -> list[Judgement]:
    """The receipts the block's evidence table shows, in its order (the caller reads their
    outputs: `gates.outputs.read.read_outputs`)."""
    return evidence_order(result)[:EVIDENCE_ROWS]


def results_figures(result: AuditResult) -> ResultsFigures | None:
    """What the results contract decided, if it was evaluated."""
    return next(
        (c.figures for c in result.contracts if isinstance(c.figures, ResultsFigures)), None
    )


def _checkpoint_matched(result: AuditResult) -> bool:
    figures = results_figures(result)
    return figures is not None and figures.hash_match


def unverified(result: AuditResult, words: dict[str, str]) -> list[str]:
    steps, required = result.formal_alignment_steps, result.required_steps
    items = []
    if steps < required:
        items.append(words["u_steps"].format(first=steps + 1, steps=steps, required=required))
    unformal = result.alignment.unformal_sides
    if "candidate" in unformal:
        items.append(words["u_candidate"])
    if "reference" in unformal:
        items.append(words["u_reference"])
    figures = results_figures(result)
    if figures is not None and figures.repeats_identical is False:
        items.append(words["u_repeats"])
    if not _checkpoint_matched(result):
        items.append(words["u_checkpoint"])
    rejected = sum(j.status is Status.REJECTED for j in result.receipts)
    if rejected:
        items.append(words["u_rejected"].format(count=rejected))
    progress = tensor_progress(result.contracts)
    if progress is None:
        items.append(words["u_gradients"])
    elif not progress.discharged:
        items.append(
            words["u_tensors"].format(
                aligned=progress.aligned, required=progress.required, detail=progress.detail
            )
        )
    return items


def not_claimed(result: AuditResult, words: dict[str, str]) -> str:
    items = []
    if result.formal_alignment_steps < result.required_steps or result.required_steps == 0:
        items.append(words["c_loss"])
    if not _checkpoint_matched(result):
        items.append(words["c_checkpoint"])
    if result.verdict != "pass":
        items.append(words["c_done"])
    if not items:
        return words["all_claimed"]
    separator = words["list_separator"]
    return words["not_claimed"].format(items=separator.join(items))


def _waivers(result: AuditResult, words: dict[str, str]) -> list[str]:
    if not result.waivers:
        return []
    return [
        "",
        words["waivers"],
        *(f"- {_cell(w.describe(result.today), 200)}" for w in result.waivers),
    ]


def _policy(result: AuditResult, words: dict[str, str]) -> list[str]:
    policy = result.policy
    if policy is None:
        return []
    if policy.protected:
        line = words["policy_protected"].format(
            ref=policy.ref, commit=policy.commit or "", origin=policy.origin
        )
    else:
        line = words["policy_unprotected"]
    anchors = policy.anchors
    names = words["list_separator"].join(
        s.name + (f" ({words['revoked']})" if s.revoked else "") for s in anchors.signers
    )
    signers = words["signers"].format(count=len(anchors.signers), origin=anchors.origin)
    signers += f"{words['colon']}{names}" if names else ""
    lines = ["", line, words["trust_anchors"].format(source=_cell(signers, 200))]
    if result.proposed_changes:
        lines += [words["proposed"], *(f"- {_cell(c, 200)}" for c in result.proposed_changes)]
    return lines


def render(result: AuditResult, lang: str = "en", *, outputs: Mapping[str, OutputFigures]) -> str:
    """The block, markers included, ending without a newline; ``outputs`` holds the figures
    of the receipts `shown_evidence` names, read by the caller."""
    words = messages(lang)
    title = words["title"].format(
        verdict=words[result.verdict],
        steps=result.formal_alignment_steps,
        required=result.required_steps,
    )
    lines = [START, f"### {title}"]
    if result.alignment.replay:
        power = words["replay_power"].format(**result.alignment.replay.fields())
        lines.append(f"`{power}`")
    progress = tensor_progress(result.contracts)
    if progress is not None:
        lines.append(f"`tensor_aligned_steps = {progress.aligned} / {progress.required}`")
    lines += ["", *_contract_rows(result, words)]
    lines += _blocked_by(result, words)
    lines += _policy(result, words)
    lines += _waivers(result, words)
    lines += _evidence(result, words, outputs)
    lines += ["", words["unverified"], *(f"- {item}" for item in unverified(result, words))]
    lines += ["", not_claimed(result, words)]
    lines += ["", f"<details><summary>{words['glossary']}</summary>", ""]
    lines += [f"- {entry}" for entry in words["glossary_entries"].split("\n")]
    lines += ["", "</details>", END]
    return "\n".join(lines)


def replace_block(body: str, block: str) -> str:
    """Put ``block`` between the markers of ``body`` (or append it); nothing else changes."""
    start = body.find(START)
    end = body.find(END, start) if start != -1 else -1
    if start == -1 or end == -1:
        separator = "" if not body else ("\n" if body.endswith("\n") else "\n\n")
        return f"{body}{separator}{block}\n"
    return body[:start] + block + body[end + len(END) :]
