"""Checking the figures a PR description claims against the workspace's evidence.

Claims found in the text, each with its line number:
- `name=value` figures (`consistent_steps=0`, `max_diff=1.58...`, also with
  spaces around `=`); a trailing `...`/`…` makes the value a prefix;
- floats with 6 or more significant digits as written (`12.416634559631348`);
- tensor counts (`187 vs 182`, `torch 187 vs paddle 182`);
- commit ids and digest prefixes (7 to 40 hex digits, letters and digits).

A claim is backed when an accepted (not rejected) receipt's files or a
checker output hold it: loss values, numbers and `key: value` leaves of JSON
outputs, survey and checkpoint tensor counts, git heads, pins and revisions;
`name=value` figures may also be backed by the current audit itself
(`verdict=blocked`, `formal_alignment_steps = 0`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gates.engine.audit import AuditResult
from gates.receipts.model import ArtifactKind
from gates.receipts.verify import Status
from gates.reporters.json_report import audit_object
from gates.reporters.status_md import END, START

# A value ends at whitespace or punctuation, fullwidth CJK punctuation included.
_VALUE_END = "\\s,;)\\]" + "\uff0c\u3002\u3001\uff09"
# `name=value` written tight, or `name = 12` with spaces (a number: not code).
_NAMED = re.compile(
    rf"\b([a-z][a-z0-9_]*)(?:=([^{_VALUE_END}]+)|\s+=\s+(-?\d[\d.eE+-]*(?:\s*/\s*\d+)?))"
)
# a full stop right after a number ends the sentence (`max_diff=3.57e-07.`)
_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w]|\.\d)")
_SENTENCE_END = ".:!?"
_COUNTS = re.compile(r"\b(\d+)\s+vs\.?\s+(?:[A-Za-z_]+\s+)?(\d+)\b")
_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
_ELLIPSIS = ("...", "…")
MIN_DIGITS = 6


@dataclass(frozen=True)
class Claim:
    line: int
    kind: str  # named | float | counts | commit
    text: str
    backed: bool
    source: str


@dataclass
class Evidence:
    """Every value the workspace can back a claim with, and where it came from."""

    floats: dict[float, str] = field(default_factory=dict)
    named: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    counts: dict[tuple[int, int], str] = field(default_factory=dict)
    hexes: dict[str, str] = field(default_factory=dict)

    def add_leaves(self, value: Any, source: str, key: str | None = None) -> None:
        if isinstance(value, dict):
            for child_key, child in value.items():
                self.add_leaves(child, source, child_key)
        elif isinstance(value, list):
            for child in value:
                self.add_leaves(child, source, key)
        else:
            self._add_leaf(value, source, key)

    def _add_leaf(self, value: Any, source: str, key: str | None) -> None:
        if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
            self.floats.setdefault(float(value), source)
        if isinstance(value, str) and re.fullmatch(r"(sha256:)?[0-9a-f]{7,64}", value):
            self.hexes.setdefault(value.removeprefix("sha256:"), source)
        if key is not None:
            self.named[key].setdefault(
                _normal(json.dumps(value) if not isinstance(value, str) else value), source
            )


def _normal(text: str) -> str:
    return text.strip().strip("\"'`").lower()


def _digits(literal: str) -> int:
    mantissa = literal.lstrip("-").split("e")[0].split("E")[0].replace(".", "")
    return len(mantissa.lstrip("0"))


@dataclass(frozen=True)
class SubjectData:
    """One subject of an accepted receipt as the command read it: a loss file's values, or
    a JSON output's document; ``readable`` false when it could not be read (backs nothing)."""

    readable: bool
    losses: tuple[float, ...] = ()
    document: Any = None


#: Each read subject by (the kind of the receipt that binds it, its workspace path).
Subjects = Mapping[tuple[ArtifactKind, str], SubjectData]


def gather(result: AuditResult, subjects: Subjects) -> Evidence:
    evidence = Evidence()
    evidence.add_leaves(audit_object(result), "the current audit")
    for judgement in result.receipts:
        receipt = judgement.receipt
        if receipt is None or judgement.status is Status.REJECTED:
            continue
        provenance = receipt.provenance
        for commit in (provenance.git_head, provenance.pin):
            if commit:
                evidence.hexes.setdefault(commit, judgement.path)
        for subject in receipt.subjects:
            data = subjects.get((receipt.kind, subject.path))
            if data is not None and data.readable:
                _gather_subject(evidence, receipt.kind, subject.path, judgement.path, data)
    return evidence


def _gather_subject(
    evidence: Evidence, kind: ArtifactKind, relpath: str, source: str, data: SubjectData
) -> None:
    if kind in (ArtifactKind.LOSS, ArtifactKind.RAW_LOSS):
        for value in data.losses:
            evidence.floats.setdefault(value, relpath)
        return
    document = data.document
    try:
        evidence.add_leaves(document, f"{relpath} ({source})")
    except RecursionError:  # too deep: backs nothing more
        return
    if kind is ArtifactKind.STRUCTURE_PARITY and isinstance(document, dict):
        pair = (document["reference"]["tensor_count"], document["candidate"]["tensor_count"])
        evidence.counts[pair] = relpath


def _named_claim(name: str, value: str, evidence: Evidence) -> str | None:
    known = evidence.named.get(name, {})
    wanted = _normal(value)
    prefix = next((wanted.removesuffix(e) for e in _ELLIPSIS if wanted.endswith(e)), None)
    for candidate, source in known.items():
        if prefix is not None and candidate.startswith(prefix):
            return source
        if candidate == wanted or _same_number(candidate, wanted):
            return source
    return None


def _same_number(left: str, right: str) -> bool:
    try:
        return float(left) == float(right)
    except ValueError:
        return False


def _line_claims(number: int, line: str, evidence: Evidence) -> list[Claim]:
    claims: list[Claim] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match[str]) -> bool:
        return not any(start < match.end() and match.start() < end for start, end in taken)

    for match in _NAMED.finditer(line):
        value = (match.group(2) or match.group(3)).split("/")[0]
        if not value.endswith(_ELLIPSIS):
            value = value.rstrip(_SENTENCE_END) or value
        source = _named_claim(match.group(1), value, evidence)
        claims.append(Claim(number, "named", match.group(0), source is not None, source or ""))
        taken.append(match.span())
    for match in _COUNTS.finditer(line):
        pair = (int(match.group(1)), int(match.group(2)))
        source = evidence.counts.get(pair) or evidence.counts.get(pair[::-1])
        claims.append(Claim(number, "counts", match.group(0), source is not None, source or ""))
        taken.append(match.span())
    for match in _FLOAT.finditer(line):
        if free(match) and _digits(match.group(0)) >= MIN_DIGITS:
            source = evidence.floats.get(float(match.group(0)))
            claims.append(Claim(number, "float", match.group(0), source is not None, source or ""))
    for match in _HEX.finditer(line):
        text = match.group(0)
        if free(match) and re.search(r"[a-f]", text) and re.search(r"\d", text):
            source = next((s for h, s in evidence.hexes.items() if h.startswith(text)), None)
            claims.append(Claim(number, "commit", text, source is not None, source or ""))
    return sorted(claims, key=lambda claim: line.find(claim.text))


def check_claims(text: str, result: AuditResult, subjects: Subjects) -> list[Claim]:
    """Every figure the text claims, except inside gates' own status block (which gates
    wrote from the evidence; `gates status --pr-body` refreshes it); ``subjects``: the
    accepted receipts' subjects as the command read them."""
    evidence = gather(result, subjects)
    claims: list[Claim] = []
    in_block = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() == START:
            in_block = True
        if not in_block:
            claims += _line_claims(number, line, evidence)
        if line.strip() == END:
            in_block = False
    return claims
