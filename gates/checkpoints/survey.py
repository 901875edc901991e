"""The structure-parity survey: every difference between two inventories, classified.

After the rules map the reference inventory, each reference tensor whose
name, dtype or shape is not the same on the candidate side is one difference,
and so is each candidate tensor nothing explains:

- `naming`: explained by a rename, fuse, split, stack or unstack (the rules are named);
- `dtype`: only a declared cast;
- `layout`: only a transpose or a reshape;
- `candidate_only`: a candidate tensor a `candidate_only` declaration accounts for (its
  reason is the detail);
- `expected_absent`: a reference tensor the candidate leaves out on purpose, the contract's
  evidence explaining it (its reason is the detail);
- `structural`: missing, extra, a dtype or shape change no rule declares, or a tensor a
  rule could not apply to (its problem is the detail).

A checkpoint saved in the reference's layout (`saved_layout`) is held to it: a tensor under
its reference tensor's own name must have that tensor's shape, whatever the layout rules
say; saved in the candidate's in-memory layout, it is structural.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from gates.checkpoints.layout import Checkpoint, kinds
from gates.naming.config_placeholders import resolve
from gates.naming.families import families
from gates.naming.rules import NAMING_OPS, Node, RuleSet, declared_only, expect, saved_as_reference

CLASSES = ("naming", "layout", "dtype", "structural", "candidate_only", "expected_absent")


class Difference(NamedTuple):
    """One difference: its class, the reference and candidate names it concerns, the rules
    behind it and a line for people."""

    klass: str
    reference: tuple[str, ...]
    candidate: tuple[str, ...]
    rules: tuple[str, ...]
    detail: str


def as_json(differences: Sequence[Difference]) -> list[dict[str, object]]:
    """Each difference as the document writes it."""
    return [
        {"class": k, "reference": list(r), "candidate": list(c), "rules": list(u), "detail": d}
        for k, r, c, u, d in differences
    ]


class Explained(NamedTuple):
    """Explained differences that the text report shows as one: their class, the rules that
    explain them and the family of their reference name."""

    klass: str
    rules: tuple[str, ...]
    family: str


def explained_tally(differences: Sequence[Difference]) -> dict[Explained, int]:
    """How many explained differences (not structural, with a reference name) are alike."""
    explained = [d for d in differences if d.klass != "structural" and d.reference]
    named = families([d.reference[0] for d in explained])
    alike = Counter(
        Explained(d.klass, d.rules, kin) for d, kin in zip(explained, named, strict=True)
    )
    return dict(alike)


@dataclass(frozen=True)
class Survey:
    """``matched``: the expected tensors the candidate has as expected, by name."""

    reference_count: int
    candidate_count: int
    matched: dict[str, Node]
    differences: tuple[Difference, ...]
    rule_problems: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())

    @property
    def matched_count(self) -> int:
        return len(self.matched)

    @cached_property
    def explained(self) -> dict[Explained, int]:
        return explained_tally(self.differences)

    def counts(self) -> dict[str, int]:
        tally = Counter(d.klass for d in self.differences)
        return {klass: tally.get(klass, 0) for klass in CLASSES}

    @cached_property
    def structural(self) -> list[Difference]:
        return [d for d in self.differences if d.klass == "structural"]


def _describe(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype} {list(shape)}"


_EXPLAINED = frozenset(("naming", "layout", "dtype"))


def _klass(node: Node) -> str:
    """naming when a naming step is anywhere in the node's tree, else dtype when a cast
    is, else layout."""
    ops = node.ops()
    if ops & NAMING_OPS:
        return "naming"
    return "dtype" if "cast" in ops else "layout"


def survey(
    reference: Checkpoint,
    candidate: Checkpoint,
    ruleset: RuleSet,
    labels: tuple[str, str] | None = None,
    *,
    absent: Mapping[str, str] | None = None,
    saved_layout: bool = False,
) -> Survey:
    """Map the reference through the rules and classify every difference with the candidate.

    Placeholders the contract leaves open come from the checkpoints' config.json
    (``labels`` name the two folders in notes; their paths by default). ``absent``: the
    reference tensors the contract's evidence explains as left out (name -> reason);
    ``saved_layout``: the candidate's checkpoint is saved in the reference's layout.
    """
    folders = labels or (str(reference.folder), str(candidate.folder))
    resolved = resolve(ruleset, [(reference.folder, folders[0]), (candidate.folder, folders[1])])
    found = kinds(candidate)
    expectation = expect(kinds(reference), resolved.ruleset)
    nodes = expectation.nodes
    in_memory: dict[str, tuple[int, ...]] = {}
    if saved_layout:
        nodes, in_memory = saved_as_reference(nodes)
    matched, differences = classify(nodes, found, in_memory)
    unaccounted = sorted(set(found) - set(nodes))
    declared, declared_problems = declared_only(resolved.ruleset, unaccounted)
    differences += extras(found, set(nodes), declared)
    if absent:
        differences = [_absent(d, absent) for d in differences]
    return Survey(
        reference_count=len(reference.shard_of),
        candidate_count=len(candidate.shard_of),
        matched=matched,
        differences=tuple(differences),
        rule_problems=(*resolved.problems, *expectation.problems, *declared_problems),
        notes=resolved.notes,
    )


def _absent(difference: Difference, absent: Mapping[str, str]) -> Difference:
    """A reference tensor missing on the candidate side that the contract's evidence
    explains becomes `expected_absent`, with its reason."""
    if difference.klass != "structural" or difference.candidate or not difference.reference:
        return difference
    reason = absent.get(difference.reference[0])
    if reason is None:
        return difference
    return Difference("expected_absent", difference.reference, (), (), reason)


Found = dict[str, tuple[str, tuple[int, ...]]]


def extras(
    found: Found, expected: set[str], declared: Mapping[str, str] | None = None
) -> list[Difference]:
    """A difference for each candidate tensor no expected name accounts for, in name order:
    `candidate_only` with its reason where a declaration accounts for it, else structural."""
    declared = declared or {}
    return [
        Difference(
            "candidate_only", (), (name,), (), f"only on the candidate side: {declared[name]}"
        )
        if name in declared
        else Difference("structural", (), (name,), (), f"extra on the candidate side: {name}")
        for name in sorted(set(found) - expected)
    ]


def _structural(
    name: str,
    node: Node,
    leaf: Node,
    actual: tuple[str, tuple[int, ...]] | None,
    in_memory: tuple[int, ...] | None,
) -> Difference:
    if node.problem:
        return Difference("structural", (leaf.name,), (name,), node.rules, node.problem)
    if actual is None:
        detail = f"missing on the candidate side (expected as {name})"
        return Difference("structural", (leaf.name,), (), node.rules, detail)
    if in_memory is not None and actual[1] == in_memory:
        detail = (
            f"{name}: saved in the candidate's in-memory layout {list(in_memory)} under the "
            f"reference's name; a checkpoint saved in the reference's layout keeps "
            f"{list(node.shape)}"
        )
        return Difference("structural", (leaf.name,), (name,), node.rules, detail)
    detail = f"{name}: expected {_describe(node.dtype, node.shape)}, found {_describe(*actual)}"
    return Difference("structural", (leaf.name,), (name,), node.rules, detail)


def classify(
    nodes: dict[str, Node], found: Found, in_memory: Mapping[str, tuple[int, ...]] | None = None
) -> tuple[dict[str, Node], list[Difference]]:
    """The expected tensors the candidate has as expected (by name), and a difference per
    reference tensor that is not as expected or that the rules change (by its name); a
    reference tensor under several expected ones (a split's) collects their names, and is
    structural when any of them is. ``in_memory``: the shapes the layout rules gave the
    tensors held to the reference's saved layout (`saved_as_reference`)."""
    matched: dict[str, Node] = {}
    by_leaf: dict[str, Difference] = {}
    in_memory = in_memory or {}
    for name in sorted(nodes):
        node = nodes[name]
        actual = found.get(name)
        if node.problem or actual != (node.dtype, node.shape):
            for leaf in node.leaves():
                by_leaf[leaf.name] = _structural(name, node, leaf, actual, in_memory.get(name))
            continue
        matched[name] = node
        if node.op == "leaf":
            continue
        klass = _klass(node)
        for leaf in node.leaves():
            previous = by_leaf.get(leaf.name)
            if previous is not None and previous.klass == "structural":
                continue
            targets = (name,) if previous is None else (*previous.candidate, name)
            detail = f"{leaf.name} -> {', '.join(targets)}"
            by_leaf[leaf.name] = Difference(klass, (leaf.name,), targets, node.rules, detail)
    return matched, [by_leaf[name] for name in sorted(by_leaf)]
