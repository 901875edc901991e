"""What the HTML report shows, gathered from the audit's typed results: the summary, the
contracts, the loss pair, the tensor map, the inventory findings and the evidence."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from gates.contracts import tensor_alignment
from gates.contracts.model import ContractResult
from gates.engine.audit import AuditResult
from gates.engine.summary import AuditSummary, summarize
from gates.receipts.model import Receipt
from gates.tensors.compare import Comparison
from gates.tensors.layout import PHASES
from gates.tensors.progress import TensorFigures

INVENTORY_CHECK = "tensor_inventory"
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
#: Source dtypes the per-step ULP difference is measured in (the run profile's `dtype`).
ULP_DTYPES = ("bfloat16", "float16", "float32", "float64")


@dataclass(frozen=True)
class LossSide:
    label: str  # the receipt's path
    values: tuple[float, ...]  # NaN where the file holds NaN or no number
    formal: bool
    problem: str = ""  # why this file is not evidence as read (NaN, unreadable)


@dataclass(frozen=True)
class LossSides:
    """The two loss series to draw, as the command read them, and the dtype of their ULPs."""

    reference: LossSide | None
    candidate: LossSide | None
    dtype: str


@dataclass(frozen=True)
class CandidateOrder:
    """The candidate dump's order files over the compared steps, as the command read them:
    (phase, tensor name) per entry, or why they could not be read."""

    entries: tuple[tuple[str, str], ...] = ()
    problem: str = ""


@dataclass(frozen=True)
class LossCurves:
    reference: LossSide | None
    candidate: LossSide | None
    dtype: str
    first_diverging_step: int | None
    ulps: tuple[float, ...]  # per step; NaN where either side has no finite value


@dataclass(frozen=True)
class TensorMap:
    layers: tuple[str, ...]
    phases: tuple[str, ...]
    total: tuple[tuple[int, ...], ...]  # [layer][phase] tensors compared
    unequal: tuple[tuple[int, ...], ...]  # [layer][phase] tensors that differ
    first: tuple[str, str] | None  # (layer, phase) of the first differing tensor
    first_detail: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvidenceRow:
    contract: str
    path: str
    kind: str
    framework: str
    counts: bool
    why: str


@dataclass(frozen=True)
class InventoryGroup:
    contract: str
    criterion: str
    findings: tuple[str, ...]


@dataclass(frozen=True)
class HistoryPoint:
    commit: str
    formal_alignment_steps: int
    trusted: bool


@dataclass(frozen=True)
class ReportData:
    summary: AuditSummary
    blockers: tuple[str, ...]
    contracts: tuple[ContractResult, ...]
    losses: LossCurves | None
    tensors: TensorMap | None
    inventory: tuple[InventoryGroup, ...]
    evidence: tuple[EvidenceRow, ...]
    policy: str
    history: tuple[HistoryPoint, ...] = field(default=())


# -- losses ------------------------------------------------------------------------------
def dtype_of(receipt: Receipt | None) -> str:
    """The dtype the ULPs are counted in: the run profile's `dtype`, else float32."""
    dtype = receipt.provenance.profile.get("dtype", "") if receipt else ""
    return dtype if dtype in ULP_DTYPES else "float32"


def _ordered_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Each value rounded to the dtype, as an integer in numeric order (adjacent = 1 ULP)."""
    if dtype == "float64":
        bits = values.astype("<f8").view("<i8")
        return np.where(bits < 0, np.int64(-(2**63)) - bits, bits)
    if dtype == "float16":
        raw = values.astype("<f2").view("<u2").astype(np.int64)
        width = 16
    elif dtype == "bfloat16":
        u32 = values.astype("<f4").view("<u4").astype(np.int64)
        raw = (u32 + 0x7FFF + ((u32 >> 16) & 1)) >> 16  # round to nearest even
        width = 16
    else:
        raw = values.astype("<f4").view("<u4").astype(np.int64)
        width = 32
    sign = 1 << (width - 1)
    return np.where(raw >= sign, -(raw - sign), raw)


def ulp_differences(
    reference: tuple[float, ...], candidate: tuple[float, ...], dtype: str
) -> tuple[float, ...]:
    """Per step, |reference - candidate| in units in the last place of the dtype."""
    count = min(len(reference), len(candidate))
    a = np.asarray(reference[:count], dtype=np.float64)
    b = np.asarray(candidate[:count], dtype=np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(over="ignore", invalid="ignore"):
        distance = np.abs(
            _ordered_bits(np.where(finite, a, 0.0), dtype)
            - _ordered_bits(np.where(finite, b, 0.0), dtype)
        ).astype(np.float64)
    return tuple(np.where(finite, distance, np.nan).tolist())


def _first_diverging(reference: tuple[float, ...], candidate: tuple[float, ...]) -> int | None:
    """The first step (from 1) whose float64 bit patterns differ, NaN or missing included."""
    for index in range(max(len(reference), len(candidate))):
        if index >= len(reference) or index >= len(candidate):
            return index + 1
        a, b = reference[index], candidate[index]
        if math.isnan(a) or math.isnan(b) or np.float64(a).tobytes() != np.float64(b).tobytes():
            return index + 1
    return None


def loss_curves(sides: LossSides | None) -> LossCurves | None:
    """The two series as drawn: where they first diverge and their per-step ULP distance."""
    if sides is None:
        return None
    reference, candidate, dtype = sides.reference, sides.candidate, sides.dtype
    if reference is None or candidate is None:
        return LossCurves(reference, candidate, dtype, None, ())
    return LossCurves(
        reference,
        candidate,
        dtype,
        _first_diverging(reference.values, candidate.values),
        ulp_differences(reference.values, candidate.values, dtype),
    )


# -- tensors -----------------------------------------------------------------------------
def layer_of(name: str) -> str:
    found = _LAYER.search(name)
    return f"layer {int(found.group(1)):>3}" if found else "other"


def audited_comparison(contract: ContractResult) -> Comparison | None:
    """The comparison the audit made for the contract (its typed figures), if it got that far."""
    figures = contract.figures
    return figures.comparison if isinstance(figures, TensorFigures) else None


def tensor_contract(result: AuditResult) -> ContractResult | None:
    """The tensor-alignment contract of the audit, if the policy has one."""
    return next((c for c in result.contracts if c.spec.check == tensor_alignment.CHECK), None)


def tensor_map(result: AuditResult, order: CandidateOrder | None) -> TensorMap | None:
    """Layers by phases over the compared steps: how many tensors each cell holds (from the
    candidate's order files, which the comparison checked against its headers) and how many
    differ, the first differing tensor's cell marked."""
    contract = tensor_contract(result)
    if contract is None:
        return None
    comparison = audited_comparison(contract)
    if comparison is None:
        unmet = contract.first_unmet
        why = f"{unmet.name}: {unmet.detail}" if unmet else "no comparison"
        return TensorMap((), (), (), (), None, "", (why,))
    if order is None or order.problem:
        message = order.problem if order is not None else "the order files were not read"
        return TensorMap((), (), (), (), None, "", (f"not comparable: {message}",))
    cells: dict[tuple[str, str], list[int]] = {}
    for phase, name in order.entries:
        cells.setdefault((layer_of(name), phase), [0, 0])[0] += 1
    for tensor in comparison.unequal:
        cells.setdefault((layer_of(tensor.candidate), tensor.phase), [0, 0])[1] += 1
    phases = [p for p in PHASES if any(phase == p for _, phase in cells)]
    layers = tuple(sorted({layer for layer, _ in cells}))
    first = comparison.first
    return TensorMap(
        layers,
        tuple(phases),
        tuple(tuple(cells.get((row, p), [0, 0])[0] for p in phases) for row in layers),
        tuple(tuple(cells.get((row, p), [0, 0])[1] for p in phases) for row in layers),
        (layer_of(first.candidate), first.phase) if first else None,
        (
            f"step {first.step} {first.phase} {first.candidate}"
            + (f" (element {first.index})" if first.index is not None else f" ({first.reason})")
            if first
            else ""
        ),
        tuple(comparison.problems),
    )


# -- the rest ----------------------------------------------------------------------------
def inventory_groups(result: AuditResult) -> tuple[InventoryGroup, ...]:
    groups = []
    for contract in result.contracts:
        if contract.spec.check != INVENTORY_CHECK:
            continue
        for criterion in contract.criteria:
            if not criterion.met:
                findings = criterion.findings or (criterion.detail,)
                groups.append(InventoryGroup(contract.spec.id, criterion.name, findings))
    return tuple(groups)


def evidence_rows(result: AuditResult) -> tuple[EvidenceRow, ...]:
    rows = []
    for contract in result.contracts:
        for evidence in contract.evidence:
            receipt = evidence.judgement.receipt
            rows.append(
                EvidenceRow(
                    contract.spec.id,
                    evidence.judgement.path,
                    receipt.kind.value if receipt else "-",
                    receipt.framework.value if receipt and receipt.framework else "-",
                    evidence.counts,
                    evidence.reason or evidence.judgement.reason,
                )
            )
    return tuple(rows)


def report_data(
    result: AuditResult,
    losses: LossSides | None,
    order: CandidateOrder | None,
    history: tuple[HistoryPoint, ...] = (),
) -> ReportData:
    """What the page shows; ``losses`` and ``order``: what the command read for the plots
    (`gates.commands.report`), so that nothing here opens a file."""
    policy = result.policy
    return ReportData(
        summary=summarize(result),
        blockers=result.blockers,
        contracts=result.contracts,
        losses=loss_curves(losses),
        tensors=tensor_map(result, order),
        inventory=inventory_groups(result),
        evidence=evidence_rows(result),
        policy=policy.describe() if policy else "not resolved",
        history=history,
    )
