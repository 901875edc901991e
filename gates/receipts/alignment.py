"""formal_alignment_steps: the bit-identical prefix of the formal reference and candidate
losses of the same profile, and why it is what it is.

It can only be raised by receipts that count (formal, of the contract's
profile). When one side holds several formal loss receipts of a profile, the
smallest prefix over all pairs is taken: picking the best-looking pair could
inflate the number.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gates.core.detection import DetectionPower
from gates.core.paths import is_under
from gates.losses.compare import bit_identical_prefix
from gates.losses.series import LossFileError, LossSeries, read_losses
from gates.receipts.evidence import Evidence
from gates.receipts.model import ArtifactKind, Framework, Receipt
from gates.receipts.verify import Judgement
from gates.workspace.repository import Workspace

LOSS_KINDS = (ArtifactKind.LOSS, ArtifactKind.RAW_LOSS)


@dataclass(frozen=True)
class Pair:
    reference: Judgement
    candidate: Judgement
    reference_series: LossSeries
    candidate_series: LossSeries
    prefix: int


@dataclass(frozen=True)
class Alignment:
    steps: int
    required: int
    why: str
    pairs: tuple[Pair, ...] = field(default=())
    #: the detection power of the replay the policy requires, if it requires one
    replay: DetectionPower | None = None
    #: the sides ("reference", "candidate") with no counting loss receipt, as `why` says
    unformal_sides: tuple[str, ...] = ()
    #: the workspace files `why` is about (receipts and their loss files), for reports
    files: tuple[str, ...] = ()

    @property
    def chosen(self) -> Pair | None:
        """The pair that sets the number (the smallest prefix), if any."""
        return min(self.pairs, key=lambda pair: pair.prefix) if self.pairs else None


def _profile_key(receipt: Receipt) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(receipt.provenance.profile.items()))


def _profile_text(key: tuple[tuple[str, str], ...]) -> str:
    return " ".join(f"{k}={v}" for k, v in key) or "(no profile)"


def _unformal(evidence: tuple[Evidence, ...], sides: dict[str, Side]) -> tuple[str, ...]:
    """The sides none of whose loss receipts counts."""
    return tuple(
        name
        for name, side in sides.items()
        if not any(
            e.counts
            for e in evidence
            if e.judgement.receipt
            and e.judgement.receipt.kind in LOSS_KINDS
            and side.owns(e.judgement.receipt)
        )
    )


def _why_zero(
    evidence: tuple[Evidence, ...], sides: dict[str, Side]
) -> tuple[str, tuple[str, ...]]:
    """Why no pair counts, and the receipts (with their files) of the sides none counts of."""
    reasons = []
    files: list[str] = []
    for name, side in sides.items():
        mine = [
            e
            for e in evidence
            if e.judgement.receipt
            and e.judgement.receipt.kind in LOSS_KINDS
            and side.owns(e.judgement.receipt)
        ]
        if not mine:
            reasons.append(f"no {name} loss receipt ({side.framework.value}, under {side.folder}/)")
        elif not any(e.counts for e in mine):
            judgement = mine[0].judgement
            reasons.append(f"no formal {name} loss: {judgement.path}: {mine[0].reason}")
            subjects = judgement.receipt.subjects if judgement.receipt else ()
            files += [judgement.path, *(subject.path for subject in subjects)]
    why = "; ".join(reasons) or "no formal reference and candidate losses of the same profile"
    return why, tuple(dict.fromkeys(files))


def _series(workspace: Workspace, judgement: Judgement) -> LossSeries:
    if judgement.receipt is None:  # unreachable: only counting receipts are paired
        raise LossFileError("receipt could not be read", file=judgement.path)
    relpath = judgement.receipt.subjects[0].path
    return read_losses(workspace.root / relpath, relpath)


@dataclass(frozen=True)
class Side:
    """Where one side's result losses live and which framework made them."""

    folder: str
    framework: Framework

    def owns(self, receipt: Receipt) -> bool:
        return receipt.framework == self.framework and is_under(
            receipt.subjects[0].path, (self.folder,)
        )


def formal_alignment(
    workspace: Workspace,
    evidence: tuple[Evidence, ...],
    required: int,
    reference: Side,
    candidate: Side,
) -> Alignment:
    """Pair the counting loss receipts of both sides by profile and measure the prefix.

    A side's losses are the loss receipts of its framework whose subject lies
    in its results folder; repeats kept elsewhere (experiments/) never pair.
    """
    sides = {"reference": reference, "candidate": candidate}
    grouped: dict[tuple[tuple[str, str], ...], dict[str, list[Judgement]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for item in evidence:
        receipt = item.judgement.receipt
        if not item.counts or receipt is None or receipt.kind not in LOSS_KINDS:
            continue
        for name, side in sides.items():
            if side.owns(receipt):
                grouped[_profile_key(receipt)][name].append(item.judgement)
    candidates: list[tuple[int, str, tuple[Pair, ...], tuple[str, ...]]] = []
    for profile, by_side in sorted(grouped.items()):
        if not by_side["reference"] or not by_side["candidate"]:
            continue
        try:
            pairs = tuple(
                _pair(workspace, ref, cand)
                for ref in by_side["reference"]
                for cand in by_side["candidate"]
            )
        except LossFileError as exc:
            why = f"profile {_profile_text(profile)}: {exc.one_line()}"
            candidates.append((0, why, (), (exc.file,) if exc.file else ()))
            continue
        candidates.append(_measure(profile, _distinct(pairs)))
    if not candidates:
        why, files = _why_zero(evidence, sides)
        return Alignment(0, required, why, unformal_sides=_unformal(evidence, sides), files=files)
    steps, why, pairs, files = max(candidates, key=lambda item: item[0])
    if 0 < required < steps:
        # the figure reads as a share of what the contract asks: never over 100 %
        why += f"; the contract asks {required}, so {required} / {required} are counted"
        steps = required
    return Alignment(steps, required, why, pairs, files=files)


def _distinct(pairs: tuple[Pair, ...]) -> tuple[Pair, ...]:
    """One pair per (reference series, candidate series): loss.json and raw_loss.jsonl of
    one run hold the same series."""
    seen: dict[tuple[str, str], Pair] = {}
    for pair in pairs:
        key = (pair.reference_series.digest(), pair.candidate_series.digest())
        seen.setdefault(key, pair)
    return tuple(seen.values())


def _pair(workspace: Workspace, reference: Judgement, candidate: Judgement) -> Pair:
    ref_series, cand_series = _series(workspace, reference), _series(workspace, candidate)
    prefix = bit_identical_prefix(ref_series.values, cand_series.values)
    return Pair(reference, candidate, ref_series, cand_series, prefix)


def _measure(
    profile: tuple[tuple[str, str], ...], pairs: tuple[Pair, ...]
) -> tuple[int, str, tuple[Pair, ...], tuple[str, ...]]:
    """The smallest prefix of the pairs, why, the pairs and the files the why names."""
    worst = min(pairs, key=lambda pair: pair.prefix)
    label = (
        f"{worst.reference.path} against {worst.candidate.path} (profile {_profile_text(profile)})"
    )
    named = (worst.reference.path, worst.candidate.path)
    rounded = [p.path for p in (worst.reference_series, worst.candidate_series) if p.rounded]
    if rounded:
        why = f"{label}: rounded losses are not bit-comparable: {', '.join(rounded)}"
        return 0, why, pairs, (*named, *rounded)
    common = min(len(worst.reference_series), len(worst.candidate_series))
    if worst.prefix == common:
        detail = f"bit-identical for all {common} common steps"
    else:
        detail = (
            f"bit-identical for {worst.prefix} step(s); first divergence at step {worst.prefix + 1}"
        )
    if len(pairs) > 1:
        detail += f" (smallest of {len(pairs)} formal pairs)"
    return worst.prefix, f"{label}: {detail}", pairs, named
