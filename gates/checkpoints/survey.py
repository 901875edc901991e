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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import compress, repeat, starmap
from operator import eq, itemgetter, not_
from typing import NamedTuple, Protocol

from gates.checkpoints.layout import Checkpoint, kinds
from gates.core.rows import as_rows
from gates.naming.by_family import expect_by_family
from gates.naming.config_placeholders import resolve
from gates.naming.families import families, template_family
from gates.naming.grouped import Group, expect_grouped
from gates.naming.rules import Node, RuleSet

CLASSES = ("naming", "layout", "dtype", "structural")
_KLASS = itemgetter(0)  # Difference.klass
_RULES = itemgetter(3)  # Difference.rules


class Difference(NamedTuple):
    """A tuple, so that a survey makes its 60,000 in C (`_made`)."""

    klass: str
    reference: tuple[str, ...]
    candidate: tuple[str, ...]
    rules: tuple[str, ...]
    detail: str


def as_json(differences: Sequence[Difference]) -> list[dict[str, object]]:
    """Each difference as the document writes it (60,000 for GLM-5.2): one dict display per
    row, the tuple unpacked (faster than a method or a `dict(zip(...))` per row in C). The
    names stay tuples, which every JSON writer writes as arrays (a list each cost twice the
    rest of the row)."""
    return [
        {"class": k, "reference": r, "candidate": c, "rules": u, "detail": d}
        for k, r, c, u, d in differences
    ]


class Explained(NamedTuple):
    """Explained differences that the text report shows as one: their class, the rules that
    explain them and the family of their reference name."""

    klass: str
    rules: tuple[str, ...]
    family: str


def explained_tally(differences: Sequence[Difference]) -> dict[Explained, int]:
    """How many explained differences (not structural, with a reference name) are alike:
    the families of all their first reference names at once, counted with their classes and
    rules in C."""
    explained = [d for d in differences if d.klass != "structural" and d.reference]
    named = families([d.reference[0] for d in explained])
    alike = Counter(zip(map(_KLASS, explained), map(_RULES, explained), named, strict=True))
    return {Explained(*key): count for key, count in alike.items()}


@dataclass(frozen=True)
class Survey:
    """``matched`` (the expected tensors the candidate has as expected, by name) is made
    when first asked for: the inventory diff needs only their number. ``tally`` is
    `explained_tally` of the differences where the survey counted it as it went (a group
    at a time); else `explained` counts it from the differences."""

    reference_count: int
    candidate_count: int
    matched_count: int
    differences: tuple[Difference, ...]
    rule_problems: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())
    expected: Callable[[], dict[str, Node]] = field(default=dict, repr=False, compare=False)
    tally: dict[Explained, int] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def matched(self) -> dict[str, Node]:
        return self.expected()

    @cached_property
    def explained(self) -> dict[Explained, int]:
        return explained_tally(self.differences) if self.tally is None else self.tally

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    @cached_property
    def _counts(self) -> dict[str, int]:
        tally = Counter(map(_KLASS, self.differences))
        return {klass: tally.get(klass, 0) for klass in CLASSES}

    @cached_property
    def structural(self) -> list[Difference]:
        classes = map(_KLASS, self.differences)
        return list(compress(self.differences, map(eq, classes, repeat("structural"))))


def _describe(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype} {list(shape)}"


_NAMING = frozenset(("rename", "fuse", "split"))


class _Tree(Protocol):
    """A `Node` or a group's `Plan`: an operation over the trees it was made from."""

    @property
    def op(self) -> str: ...
    @property
    def children(self) -> Sequence[_Tree]: ...
    def ops(self) -> set[str]: ...


def _klass(node: _Tree) -> str:
    """naming when a rename, fuse or split is anywhere in the node's tree, else dtype when
    a cast is, else layout; decided by the node itself when it is a naming op or stands
    over leaves (a survey asks 60,000 nodes)."""
    op = node.op
    if op in _NAMING:
        return "naming"
    if all(child.op == "leaf" for child in node.children):
        return "dtype" if op == "cast" else "layout"
    ops = node.ops()
    if ops & _NAMING:
        return "naming"
    return "dtype" if "cast" in ops else "layout"


#: a `Difference` from a tuple of its fields, without a Python call
_made: Callable[[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], str]], Difference]
_made = partial(tuple.__new__, Difference)


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
    found, listed = kinds(candidate), kinds(reference)
    grouped = expect_grouped(listed, resolved.ruleset)
    problems: list[str] = []
    tally = None
    if grouped is not None:
        count, expected, differences, names, tally = classify_grouped(grouped.groups, found)
    else:
        expectation = expect_by_family(listed, resolved.ruleset)
        matched, differences = classify(expectation.nodes, found)
        count, expected, names = len(matched), (lambda: matched), set(expectation.nodes)
        problems = expectation.problems
    differences += extras(found, names)
    return Survey(
        reference_count=len(reference.shard_of),
        candidate_count=len(candidate.shard_of),
        matched_count=count,
        differences=tuple(differences),
        rule_problems=(*resolved.problems, *problems),
        notes=resolved.notes,
        expected=expected,
        tally=tally,
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


def _leaves(children: tuple[Node, ...]) -> list[Node]:
    """`Node.leaves` of a node over ``children``, a child over one leaf (a fusion's
    transposes) without the call."""
    leaves: list[Node] = []
    for child in children:
        below = child.children
        if child.op == "leaf":
            leaves.append(child)
        elif len(below) == 1 and below[0].op == "leaf":
            leaves.append(below[0])
        else:
            leaves += child.leaves()
    return leaves


def classify(nodes: dict[str, Node], found: Found) -> tuple[dict[str, Node], list[Difference]]:
    """The expected tensors the candidate has as expected (by name), and a difference per
    reference tensor that is not (by its name); a reference tensor under several expected
    ones (a split's) collects their names. A loop, not a pass of C-level maps per class:
    that was slower (docs/performance.md), the cost being the objects, not the branches.
    `_klass`, `_difference` and `Node.leaves` (to a depth of two) are inlined: the same
    results (tests/test_survey_classify.py holds them to the plain loop)."""
    matched: dict[str, Node] = {}
    by_leaf: dict[str, Difference] = {}
    get, previous_of = found.get, by_leaf.get
    for name in sorted(nodes):
        node = nodes[name]
        actual = get(name)
        op = node.op
        if actual is None or actual != (node.dtype, node.shape):
            for leaf in node.leaves():
                by_leaf[leaf.name] = _structural(name, node, leaf, actual)
            continue
        matched[name] = node
        if op == "leaf":
            continue  # the usual case first: a tensor the rules leave as it is
        children = node.children
        if len(children) == 1 and children[0].op == "leaf":
            leaves: Sequence[Node] = children  # `Node.leaves` and `_klass` without the calls
            klass = "naming" if op in _NAMING else "dtype" if op == "cast" else "layout"
        else:
            leaves = _leaves(children)
            klass = "naming" if op in _NAMING else _klass(node)
        rules = node.rules
        for leaf in leaves:
            source = leaf.name
            previous = previous_of(source)
            targets: tuple[str, ...]
            if previous is None:
                targets, detail = (name,), source + " -> " + name
            else:
                targets = (*previous.candidate, name)
                detail = f"{source} -> {', '.join(targets)}"
            by_leaf[source] = _made((klass, (source,), targets, rules, detail))
    return matched, list(map(by_leaf.__getitem__, sorted(by_leaf)))


class Classified(NamedTuple):
    """What `classify_grouped` found: the number of matched tensors, a function that makes
    them, the differences in `classify`'s order, every expected name, and the explained
    differences' `explained_tally` (None where a reference tensor's difference was made
    twice, one replacing the other: then only the differences tell)."""

    matched_count: int
    expected: Callable[[], dict[str, Node]]
    differences: list[Difference]
    names: set[str]
    tally: dict[Explained, int] | None


def classify_grouped(groups: list[Group], found: Found) -> Classified:
    """`classify` a group at a time. A group's members share their tree of operations, so
    its class, rules and leaves are worked out once, and so is the family of each leaf's
    names where its template decides it (`template_family`)."""
    by_leaf: dict[str, Difference] = {}
    matched: list[tuple[Group, list[bool]]] = []
    count = made_count = 0
    names: set[str] = set()
    tally: Counter[Explained] = Counter()
    for group in groups:
        family, plan = group.family, group.plan
        names.update(family.names)
        actual = list(map(found.get, family.names))
        same = list(map(eq, zip(plan.dtypes, plan.shapes, strict=True), actual))
        matched.append((group, same))
        count += sum(same)
        if not all(same):
            made_count += _unmatched(group, same, actual, by_leaf)
        if plan.op == "leaf" or not any(same):
            continue
        numbers = list(compress(family.numbers, same))
        targets = list(compress(family.names, same))
        klass, rules = _klass(plan), plan.rules
        for leaf in plan.leaves():
            sources = list(starmap(leaf.template.format, numbers))
            details = map(" -> ".join, zip(sources, targets, strict=True))
            rows = zip(repeat(klass), zip(sources), zip(targets), repeat(rules), details)
            made = as_rows(Difference, rows)
            by_leaf.update(zip(sources, made, strict=True))
            made_count += len(sources)
            kin = template_family(leaf.template)
            if kin is not None:
                tally[Explained(klass, rules, kin)] += len(sources)
            else:
                for kin, alike in Counter(families(sources)).items():
                    tally[Explained(klass, rules, kin)] += alike
    differences = list(map(by_leaf.__getitem__, sorted(by_leaf)))
    counted = dict(tally) if made_count == len(by_leaf) else None
    return Classified(count, lambda: _matched_nodes(matched), differences, names, counted)


def _unmatched(
    group: Group,
    same: list[bool],
    actual: list[tuple[str, tuple[int, ...]] | None],
    by_leaf: dict[str, Difference],
) -> int:
    """A structural difference per leaf of each member the candidate lacks or has otherwise;
    how many were made."""
    different = list(map(not_, same))
    chosen = group.kept(different)
    nodes = chosen.plan.nodes(chosen.family.numbers)
    made = 0
    for node, seen in zip(nodes, compress(actual, different), strict=True):
        leaves = node.leaves()
        made += len(leaves)
        for leaf in leaves:
            by_leaf[leaf.name] = _structural(node.name, node, leaf, seen)
    return made


def _matched_nodes(matched: list[tuple[Group, list[bool]]]) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    for group, same in matched:
        chosen = group.kept(same)
        made = chosen.plan.nodes(chosen.family.numbers)
        nodes.update(zip(chosen.family.names, made, strict=True))
    return dict(sorted(nodes.items()))
