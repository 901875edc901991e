"""The structure-parity survey: every difference between two inventories, classified.

After the rules map the reference inventory, each reference tensor whose
name, dtype or shape is not the same on the candidate side is one difference,
and so is each candidate tensor nothing explains:

- `naming`: explained by a rename, fuse or split (the rules are named);
- `dtype`: only a declared cast;
- `layout`: only a transpose;
- `structural`: missing, extra, or a dtype or shape change no rule declares.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from gates.checkpoints.layout import Checkpoint, kinds
from gates.naming.config_placeholders import resolve
from gates.naming.families import families
from gates.naming.rules import Node, RuleSet, expect

CLASSES = ("naming", "layout", "dtype", "structural")


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


_NAMING = frozenset(("rename", "fuse", "split"))


def _klass(node: Node) -> str:
    """naming when a rename, fuse or split is anywhere in the node's tree, else dtype when
    a cast is, else layout."""
    ops = node.ops()
    if ops & _NAMING:
        return "naming"
    return "dtype" if "cast" in ops else "layout"


def survey(
    reference: Checkpoint,
    candidate: Checkpoint,
    ruleset: RuleSet,
    labels: tuple[str, str] | None = None,
) -> Survey:
    """Map the reference through the rules and classify every difference with the candidate.

    Placeholders the contract leaves open come from the checkpoints' config.json
    (``labels`` name the two folders in notes; their paths by default).
    """
    folders = labels or (str(reference.folder), str(candidate.folder))
    resolved = resolve(ruleset, [(reference.folder, folders[0]), (candidate.folder, folders[1])])
    found = kinds(candidate)
    expectation = expect(kinds(reference), resolved.ruleset)
    matched, differences = classify(expectation.nodes, found)
    differences += extras(found, set(expectation.nodes))
    return Survey(
        reference_count=len(reference.shard_of),
        candidate_count=len(candidate.shard_of),
        matched=matched,
        differences=tuple(differences),
        rule_problems=(*resolved.problems, *expectation.problems),
        notes=resolved.notes,
    )


Found = dict[str, tuple[str, tuple[int, ...]]]


def extras(found: Found, expected: set[str]) -> list[Difference]:
    """A structural difference for each candidate tensor no expected name accounts for, in
    name order."""
    return [
        Difference("structural", (), (name,), (), f"extra on the candidate side: {name}")
        for name in sorted(set(found) - expected)
    ]


def _structural(
    name: str, node: Node, leaf: Node, actual: tuple[str, tuple[int, ...]] | None
) -> Difference:
    if actual is None:
        detail = f"missing on the candidate side (expected as {name})"
        return Difference("structural", (leaf.name,), (), node.rules, detail)
    detail = f"{name}: expected {_describe(node.dtype, node.shape)}, found {_describe(*actual)}"
    return Difference("structural", (leaf.name,), (name,), node.rules, detail)


def classify(nodes: dict[str, Node], found: Found) -> tuple[dict[str, Node], list[Difference]]:
    """The expected tensors the candidate has as expected (by name), and a difference per
    reference tensor that is not as expected or that the rules change (by its name); a
    reference tensor under several expected ones (a split's) collects their names."""
    matched: dict[str, Node] = {}
    by_leaf: dict[str, Difference] = {}
    for name in sorted(nodes):
        node = nodes[name]
        actual = found.get(name)
        if actual != (node.dtype, node.shape):
            for leaf in node.leaves():
                by_leaf[leaf.name] = _structural(name, node, leaf, actual)
            continue
        matched[name] = node
        if node.op == "leaf":
            continue
        klass = _klass(node)
        for leaf in node.leaves():
            previous = by_leaf.get(leaf.name)
            targets = (name,) if previous is None else (*previous.candidate, name)
            detail = f"{leaf.name} -> {', '.join(targets)}"
            by_leaf[leaf.name] = Difference(klass, (leaf.name,), targets, node.rules, detail)
    return matched, [by_leaf[name] for name in sorted(by_leaf)]
