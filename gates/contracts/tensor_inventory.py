"""Check `tensor_inventory`: both checkpoints valid and clean, no structural difference after
the naming rules, and content equal through them where the contract asks for it."""

from __future__ import annotations

import fnmatch
import json
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    StrictBool,
    StringConstraints,
    ValidationError,
    field_validator,
)

from gates.checkpoints.check import CheckpointReport, check_checkpoint, compare_pair
from gates.contracts.model import EvaluationContext, EvaluationError
from gates.core.criteria import Criterion
from gates.core.errors import ConfigError, UnsafePathError
from gates.core.hashing import StatCache
from gates.core.paths import check_relpath, resolve_inside
from gates.core.progress import Progress
from gates.core.validation import first_error
from gates.naming.rulefile import RULE_KEYS, ruleset_from_params
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Judgement, Status
from gates.tensors.probe_format import PROBE_FORMAT
from gates.workspace.external import ExternalRoots, is_external, split_external
from gates.workspace.repository import roots_of

if TYPE_CHECKING:
    from gates.checkpoints.content import ContentComparison
    from gates.checkpoints.survey import Survey

CHECK = "tensor_inventory"


class ExpectedAbsent(BaseModel):
    """A reference tensor the candidate leaves out on purpose, and why. Explained only by a
    formal consumption probe of the reference's forward: one that found it not consumed,
    or, with ``reference_builds = false``, one that probed every tensor of the reference's
    model and found it never built (transformers skips the MTP layer on load)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(min_length=1)]
    justification: Annotated[str, StringConstraints(min_length=1)]
    reference_builds: StrictBool = True


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
_OPERAND = r"[A-Za-z_][A-Za-z0-9_]*|-?[0-9]+(?:\.[0-9]+)?"
_CONDITION = re.compile(rf"^\s*({_OPERAND})\s*(>=|<=|==|!=|>|<)\s*({_OPERAND})\s*$")


class ProbeRequirement(BaseModel):
    """The configuration under which a consumption probe can explain some tensors: a probe
    whose recorded configuration fails ``condition`` explains none of ``tensors`` (a DSA
    indexer selects every key while the sequence is not longer than its top-k, so a probe
    of such a sequence cannot see it consumed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensors: Annotated[str, StringConstraints(min_length=1)]  # a glob over reference names
    condition: str  # `NAME OP NAME-or-NUMBER`, names from the probe's configuration
    why: Annotated[str, StringConstraints(min_length=1)]

    @field_validator("condition")
    @classmethod
    def _parses(cls, value: str) -> str:
        if _CONDITION.match(value) is None:
            raise ValueError(
                f"{value!r}: expected NAME OP NAME or NAME OP NUMBER, OP one of "
                + " ".join(_OPERATORS)
            )
        return value

    def unmet(self, configuration: Mapping[str, object]) -> str | None:
        """Why a probe run with ``configuration`` does not meet the condition (None: met)."""
        found = _CONDITION.match(self.condition)
        if found is None:  # validated at load; never met otherwise
            return f"{self.why}: {self.condition!r} is not a condition"
        left, op, right = found.groups()
        values: list[object] = []
        for operand in (left, right):
            if re.fullmatch(r"-?[0-9.]+", operand):
                values.append(float(operand))
            elif operand in configuration:
                values.append(configuration[operand])
            else:
                return f"{self.why}: the probe recorded no {operand} (needs {self.condition})"
        try:
            met = _OPERATORS[op](values[0], values[1])
        except TypeError:
            met = False
        if met:
            return None
        ran = ", ".join(
            f"{name}={json.dumps(configuration[name])}"
            for name in (left, right)
            if name in configuration
        )
        return f"{self.why}: the probe ran with {ran} (needs {self.condition})"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str = "results/torch/checkpoint"
    candidate: str = "results/paddle/checkpoint"
    require_hash_match: StrictBool = False
    expected_absent: tuple[ExpectedAbsent, ...] = ()
    consumption_probe: str = "outputs/consumption_probe.json"
    probe_requires: tuple[ProbeRequirement, ...] = ()
    #: "reference": the candidate saves its checkpoints in the reference's layout (its
    #: `save_pretrained` converts back), so a tensor under a reference name keeps that
    #: tensor's shape whatever the layout rules say
    saved_layout: Literal["candidate", "reference"] = "candidate"


def parse_params(raw: dict[str, Any]) -> Params:
    """The contract's params (the naming rules aside); EvaluationError naming the key."""
    return _parse(raw)


def _parse(raw: dict[str, Any]) -> Params:
    try:
        params = Params.model_validate({k: v for k, v in raw.items() if k not in RULE_KEYS})
        for key, value in (("reference", params.reference), ("candidate", params.candidate)):
            if is_external(value):
                split_external(value, what=f"params.{key}")
            else:
                check_relpath(value, what=f"params.{key}")
        check_relpath(params.consumption_probe, what="params.consumption_probe")
    except ValidationError as exc:
        first = first_error(exc)
        raise EvaluationError(f"params.{first.key}: {first.message}") from None
    except UnsafePathError as exc:
        raise EvaluationError(exc.message) from None
    return params


def _side_criteria(side: str, report: CheckpointReport) -> list[Criterion]:
    problems = report.checkpoint.problems
    findings = [f"{report.path}/{f.line()}" for f in report.hygiene]
    if not report.checkpoint.folder.is_dir():
        findings = [f"{report.path}: no checkpoint folder to inspect"]
    invalid = [f"{report.path}: {p}" for p in problems]
    # an external checkpoint's files are not the workspace's
    files = () if is_external(report.path) else [f"{report.path}/{f.file}" for f in report.hygiene]
    return [
        Criterion(
            f"{side}_valid",
            not problems,
            "; ".join(invalid[:5])
            or f"{report.path}: {len(report.checkpoint.shard_of)} tensors, valid",
            tuple(invalid),
            key=side,
        ),
        Criterion(
            f"{side}_hygiene",
            not findings,
            "; ".join(findings[:5]) or "regular files only",
            tuple(findings),
            files=tuple(dict.fromkeys(files[:5])),
            key=side,
        ),
    ]


@dataclass(frozen=True)
class ProbeFinding:
    """What a formal consumption probe (`gates probe consumed`) of the reference's forward
    says: the tensors it found not consumed, where that came from, the configuration it ran
    with, every tensor it probed and whether that was every tensor its entry's model holds
    (``usable``: a formal, repeatable probe was found)."""

    unconsumed: set[str]
    source: str
    configuration: dict[str, object] = field(default_factory=dict)
    probed: set[str] = field(default_factory=set)
    every_tensor: bool = False
    usable: bool = False

    def why_not(self, name: str) -> str:
        """Why the probe does not explain ``name`` (it found it consumed, or never probed
        it, or there is no usable formal probe)."""
        if name in self.probed and name not in self.unconsumed:
            return f"the reference forward consumes it ({self.source})"
        if self.probed and name not in self.probed:
            return f"not probed ({self.source})"
        return self.source


def probe_finding(context: EvaluationContext, relpath: str) -> ProbeFinding:
    """The formal consumption probe (`gates probe consumed`) bound at ``relpath``."""
    return probe_evidence(context.receipts, context.workspace.root, relpath)


def probe_evidence(judgements: Iterable[Judgement], root: Path, relpath: str) -> ProbeFinding:
    """The formal consumption probe that binds ``relpath`` among ``judgements``."""
    for judgement in judgements:
        receipt = judgement.receipt
        if (
            judgement.status is not Status.FORMAL
            or receipt is None
            or receipt.kind is not ArtifactKind.TENSOR_CHECK
            or not any(subject.path == relpath for subject in receipt.subjects)
        ):
            continue
        try:
            document = json.loads((root / relpath).read_bytes())
        except (OSError, ValueError):
            return ProbeFinding(set(), f"{relpath}: unreadable")
        if not isinstance(document, dict) or document.get("format") != PROBE_FORMAT:
            return ProbeFinding(set(), f"{relpath}: not a consumption probe")
        if document.get("repeatable") is not True:
            return ProbeFinding(set(), f"{relpath}: the probe's forward was not repeatable")
        items = [item for item in document.get("tensors", []) if isinstance(item, dict)]
        configuration = document.get("configuration")
        return ProbeFinding(
            {str(item.get("name")) for item in items if item.get("consumed") is False},
            f"formal probe {judgement.path}",
            dict(configuration) if isinstance(configuration, dict) else {},
            {str(item.get("name")) for item in items},
            every_tensor=document.get("every_tensor") is True,
            usable=True,
        )
    return ProbeFinding(
        set(), f"no formal consumption probe binds {relpath} (gates probe consumed)"
    )


def _probe_unmet(
    name: str, requirements: tuple[ProbeRequirement, ...], configuration: Mapping[str, object]
) -> str | None:
    """Why the probe cannot explain ``name`` under its configuration (None: it can)."""
    for requirement in requirements:
        if fnmatch.fnmatchcase(name, requirement.tensors):
            unmet = requirement.unmet(configuration)
            if unmet is not None:
                return unmet
    return None


@dataclass(frozen=True)
class Absence:
    """The contract's `expected_absent` judged against the probe: the names it explains
    (name -> the reason shown) and the names it does not (name -> why not)."""

    explained: dict[str, str] = field(default_factory=dict)
    unexplained: dict[str, str] = field(default_factory=dict)
    #: name -> "not consumed" or "never built by the reference", for each explained name
    how: dict[str, str] = field(default_factory=dict)
    source: str = ""


def judge_absent(params: Params, probe: ProbeFinding) -> Absence:
    """Each `expected_absent` tensor explained by the probe or not, and why: found not
    consumed under a configuration that meets `probe_requires`, or (`reference_builds =
    false`) never built by the reference's model, which the probe probed whole."""
    absence = Absence(source=probe.source)
    for item in params.expected_absent:
        name = item.name
        unmet = _probe_unmet(name, params.probe_requires, probe.configuration)
        if not probe.usable:
            absence.unexplained[name] = probe.source
        elif not item.reference_builds:
            _never_built(absence, item, probe)
        elif name in probe.unconsumed and unmet is None:
            absence.how[name] = "not consumed"
            absence.explained[name] = (
                f"expected absent: {item.justification} (not consumed by the reference's "
                f"forward: {probe.source})"
            )
        else:
            absence.unexplained[name] = (
                unmet if name in probe.unconsumed and unmet else probe.why_not(name)
            )
    return absence


def _never_built(absence: Absence, item: ExpectedAbsent, probe: ProbeFinding) -> None:
    if item.name in probe.probed:
        absence.unexplained[item.name] = (
            f"declared never built by the reference, but {probe.source} probed it"
        )
    elif probe.every_tensor:
        absence.how[item.name] = "never built by the reference"
        absence.explained[item.name] = (
            f"expected absent: {item.justification} (the reference's model never builds "
            f"it: {probe.source} probed every tensor it holds)"
        )
    else:
        absence.unexplained[item.name] = (
            f"{probe.source} probed only some tensors: run it without --tensor to show the "
            "reference's model never builds it"
        )


def _structure(found: Survey, absence: Absence) -> Criterion:
    counted = found.counts().items()
    counts = ", ".join(f"{n} {klass}" for klass, n in counted if klass in _SHOWN)
    summary = f"{len(found.differences)} differences: {counts}"
    if absence.explained:
        kinds = " or ".join(sorted(set(absence.how.values())))
        summary += f"; {len(absence.explained)} expected_absent, {kinds} ({absence.source})"
    only = [d for d in found.differences if d.klass == "candidate_only"]
    if only:
        summary += f"; {len(only)} candidate_only ({only[0].candidate[0]}: {only[0].detail})"
    problems = [*found.rule_problems]
    shown = set(found.rule_problems)
    for difference in found.structural:
        if difference.detail in shown:
            continue  # a rule problem of this tensor, named above
        name = difference.reference[0] if difference.reference else ""
        line = f"{name} {difference.detail}" if name else difference.detail
        missing = bool(difference.reference) and not difference.candidate
        if missing and name in absence.unexplained:
            line += f" (expected_absent, unexplained: {absence.unexplained[name]})"
        problems.append(line)
    declared = [
        f"{(d.reference or d.candidate)[0]}: {d.detail}"
        for d in found.differences
        if d.klass in ("candidate_only", "expected_absent")
    ]
    notes = "".join(f"; note: {note}" for note in found.notes)
    listed_declared = tuple(f"declared: {line}" for line in declared)
    if not problems:
        detail = f"{found.reference_count} vs {found.candidate_count} tensors; {summary}{notes}"
        return Criterion("no_structural_difference", True, detail, listed_declared)
    detail = "; ".join(problems[:5]) + f" ({summary}){notes}"
    listed = (*problems, summary, *listed_declared, *(f"note: {note}" for note in found.notes))
    return Criterion("no_structural_difference", False, detail, listed)


#: the classes the summary counts (the declared ones it names with their reasons)
_SHOWN = frozenset(("naming", "layout", "dtype", "structural"))


def _hash_match(content: ContentComparison | None) -> Criterion:
    key = "require_hash_match"
    if content is not None and content.hash_match:
        return Criterion("hash_match", True, "content equal through the naming rules", key=key)
    if content is None:
        detail = "not comparable: the checkpoints were not hashed"
        return Criterion("hash_match", False, detail, key=key)
    problems = [*content.problems, *(f"{name} differs" for name in content.unequal)]
    detail = "; ".join(problems[:5]) or (
        "tensors are missing on one side (explained or not): the content cannot match as a whole"
    )
    return Criterion("hash_match", False, detail, tuple(problems), key=key)


def evaluate(context: EvaluationContext, raw: dict[str, Any]) -> list[Criterion]:
    params = _parse(raw)
    try:
        ruleset = ruleset_from_params(raw, "tensor-inventory contract")
    except ConfigError as exc:
        raise EvaluationError(exc.message) from None
    roots = roots_of(context.workspace)
    cache = context.stat_cache()
    hashing = params.require_hash_match
    sides = {
        side: _side_report(roots, path, cache, hashing, context.progress)
        for side, path in (("reference", params.reference), ("candidate", params.candidate))
    }
    cache.save()
    paths = {"reference": params.reference, "candidate": params.candidate}
    unusable = [
        Criterion(f"{side}_valid", False, f"{paths[side]}: {found}", key=side)
        for side, found in sides.items()
        if isinstance(found, str)
    ]
    reference, candidate = sides["reference"], sides["candidate"]
    if not isinstance(reference, CheckpointReport) or not isinstance(candidate, CheckpointReport):
        not_comparable = "not comparable until both checkpoints can be read"
        unusable.append(Criterion("no_structural_difference", False, not_comparable))
        return unusable
    criteria = _side_criteria("reference", reference) + _side_criteria("candidate", candidate)
    if not (reference.valid and candidate.valid):
        not_comparable = "not comparable until both checkpoints are valid"
        criteria.append(Criterion("no_structural_difference", False, not_comparable))
        if hashing:
            criteria.append(
                Criterion("hash_match", False, not_comparable, key="require_hash_match")
            )
        return criteria
    absence = Absence()
    if params.expected_absent:
        absence = judge_absent(params, probe_finding(context, params.consumption_probe))
    pair = compare_pair(
        reference,
        candidate,
        ruleset,
        absent=absence.explained,
        saved_layout=params.saved_layout == "reference",
    )
    criteria.append(_structure(pair.survey, absence))
    if hashing:
        criteria.append(_hash_match(pair.content))
    return criteria


def _side_report(
    roots: ExternalRoots, path: str, cache: StatCache, hashing: bool, progress: Progress
) -> CheckpointReport | str:
    """The checkpoint at a workspace path or ``external:<root>/...``; a root that cannot be
    used on this machine is the reason, naming the root."""
    if not is_external(path):
        return check_checkpoint(
            roots.workspace, path, cache=cache, hash_contents=hashing, progress=progress
        )
    try:
        name, relpath = split_external(path)
        base = roots.root(name)
        if relpath:
            resolve_inside(base, relpath, what="checkpoint")
    except UnsafePathError as exc:
        return exc.message
    return check_checkpoint(
        base, relpath, cache=cache, hash_contents=hashing, label=path, progress=progress
    )
