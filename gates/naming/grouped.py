"""The naming rules applied to groups of tensors, without an object per tensor.

`expect_by_family` still makes a `Node` per tensor (140,000 for GLM-5.2), and
that is most of a full-size survey's time. Here a group is a family of names
(gates/naming/by_family.py) together with one `Plan`: the tree of operations
the rules made of every member, its names as `str.format` templates filled
with each member's numbers, each node's dtypes and shapes as columns. A rule
applies to a group once, as by_family's family path applies it, and a survey
classifies a group at a time (gates/checkpoints/survey.py).

This path decides only what it can decide without a doubt; for anything else
`expect_grouped` returns None and the caller takes the `Node` path, which stays
the reference (tests/test_survey_grouped.py holds the two equal):

- a rule whose pattern can tell numbers apart (`{mtp}` = 78) goes name by name
  over the tensors it matches, taken out of their groups as nodes; it must be a
  rename, transpose or cast, and the names it makes must not meet any other;
- a split rule, a rule error, two tensors onto one, a fusion that shares a
  tensor, parts whose numbers do not line up: None;
- so are over `SMALL` names in families of under `MEMBERS` on average, where a
  group each costs more than the nodes it saves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain, compress, repeat, starmap
from operator import eq, itemgetter, not_
from typing import TypeVar

from gates.naming.by_family import (
    Family,
    _bound,
    _fillable,
    _filled,
    binds_numbers_alike,
    index,
    nodes_of,
)
from gates.naming.rule_kinds import Cast, Fuse, Rename, Rule, RuleError, Transpose
from gates.naming.rules import _APPLY, Node, Pattern, RuleSet, compile_pattern, label

Shape = tuple[int, ...]
T = TypeVar("T")
Numbers = tuple[str, ...]


def _pick(column: list[T], positions: list[int]) -> list[T]:
    return list(map(column.__getitem__, positions))


@dataclass(frozen=True)
class Plan:
    """What the rules made of every member of a group: `Node`'s fields, the name a
    template and the dtype and shape a column (one entry per member)."""

    template: str
    dtypes: list[str]
    shapes: list[Shape]
    op: str = "leaf"
    children: tuple[Plan, ...] = ()
    rules: tuple[str, ...] = ()
    axis: int = 0

    def taken(self, positions: list[int]) -> Plan:
        """The plan of the members at ``positions``, in that order."""
        return replace(
            self,
            dtypes=_pick(self.dtypes, positions),
            shapes=_pick(self.shapes, positions),
            children=tuple(child.taken(positions) for child in self.children),
        )

    def leaves(self) -> list[Plan]:
        if self.op == "leaf":
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]

    def ops(self) -> set[str]:
        found = {self.op} - {"leaf"}
        for child in self.children:
            found |= child.ops()
        return found

    def nodes(self, numbers: list[Numbers]) -> list[Node]:
        """Each member's `Node` (the per-name path's objects, made only when asked for)."""
        below = [child.nodes(numbers) for child in self.children]
        return nodes_of(
            (
                starmap(self.template.format, numbers),
                self.dtypes,
                self.shapes,
                repeat(self.op),
                zip(*below, strict=True) if below else repeat(()),
                repeat(self.rules),
                repeat(self.axis),
                repeat(0),
            )
        )


@dataclass(frozen=True)
class Group:
    """A family of names (its members' current names) and the plan they share."""

    family: Family
    plan: Plan

    def taken(self, positions: list[int]) -> Group:
        family = self.family
        picked = Family(
            family.template, _pick(family.names, positions), _pick(family.numbers, positions)
        )
        return Group(picked, self.plan.taken(positions))

    def kept(self, keep: list[bool]) -> Group:
        return self.taken(list(compress(range(len(keep)), keep)))


#: below SMALL names either path is quick; above it, the grouped path is taken only where
#: families have MEMBERS members on average (a group costs about what 3 `Node`s cost)
SMALL, MEMBERS = 1000, 8


class _Undecided(Exception):  # noqa: N818  (not an error: a hand-over)
    """The grouped path cannot decide this rule set; the `Node` path will."""


def _leaf_groups(reference: dict[str, tuple[str, Shape]], names: list[str]) -> list[Group]:
    families = index(names)
    if families is None:
        raise _Undecided
    if len(names) >= SMALL and len(families) * MEMBERS > len(names):
        raise _Undecided  # families too small to repay a group each (docs/performance.md)
    groups = []
    for family in families:
        values = list(map(reference.__getitem__, family.names))
        dtypes, shapes = list(map(itemgetter(0), values)), list(map(itemgetter(1), values))
        groups.append(Group(family, Plan(family.template, dtypes, shapes)))
    return groups


def _names(groups: list[Group]) -> Iterator[str]:
    return chain.from_iterable(group.family.names for group in groups)


def _wrapped(group: Group, template: str, op: str, tag: str) -> Group:
    """``group`` under one more operation, renamed to ``template``'s names."""
    plan = group.plan
    names = (
        group.family.names
        if template == group.family.template
        else list(starmap(template.format, group.family.numbers))
    )
    top = Plan(template, plan.dtypes, plan.shapes, op, (plan,), (*plan.rules, tag))
    return Group(Family(template, names, group.family.numbers), top)


def _rename(rule: Rename, tag: str, groups: list[Group], constants: dict[str, str]) -> list[Group]:
    if not (binds_numbers_alike(rule.source, constants) and _fillable(rule.target, constants)):
        return _by_name(rule, tag, groups, constants, rule.source)
    source, target = (
        compile_pattern(rule.source, constants),
        compile_pattern(rule.target, constants),
    )
    result: list[Group] = []
    moved: list[Group] = []
    for group in groups:
        bound = _bound(source, group.family)
        template = None if bound is None else _filled(target, bound)
        if bound is None or template == group.family.template:
            result.append(group)
            continue
        if template is None:
            raise _Undecided  # `fill` names the placeholder the source does not bind
        renamed = _wrapped(group, template, "rename", tag)
        if any(map(eq, renamed.family.names, group.family.names)):
            raise _Undecided  # another template that still gives some member its own name
        moved.append(renamed)
    made = set(_names(moved))
    if len(made) != sum(len(group.family.names) for group in moved):
        raise _Undecided  # two tensors onto one: the per-name path names the first
    if not made.isdisjoint(_names(result)):
        raise _Undecided  # onto a tensor the rule leaves where it is
    return [*result, *moved]


def _matching(text: str, groups: list[Group], constants: dict[str, str]) -> list[bool] | None:
    """Which groups ``text`` matches; None when it can tell numbers apart."""
    if not binds_numbers_alike(text, constants):
        return None
    regex = compile_pattern(text, constants).regex
    return [regex.fullmatch(group.family.names[0]) is not None for group in groups]


def _transpose(
    rule: Transpose, tag: str, groups: list[Group], constants: dict[str, str]
) -> list[Group]:
    matching = _matching(rule.match, groups, constants)
    if matching is None:
        return _by_name(rule, tag, groups, constants, rule.match)
    result = []
    for group, hit in zip(groups, matching, strict=True):
        if not hit:
            result.append(group)
            continue
        if set(map(len, group.plan.shapes)) - {2}:
            raise _Undecided  # the per-name path names the first tensor that is not 2-D
        moved = _wrapped(group, group.family.template, "transpose", tag)
        swapped = list(map(itemgetter(1, 0), group.plan.shapes))
        result.append(Group(moved.family, replace(moved.plan, shapes=swapped)))
    return result


def _cast(rule: Cast, tag: str, groups: list[Group], constants: dict[str, str]) -> list[Group]:
    matching = _matching(rule.match, groups, constants)
    if matching is None:
        return _by_name(rule, tag, groups, constants, rule.match)
    result = []
    for group, hit in zip(groups, matching, strict=True):
        changing = list(map(not_, map(eq, group.plan.dtypes, repeat(rule.dtype))))
        if not hit or not any(changing):
            result.append(group)
            continue
        casting = group
        if not all(changing):
            result.append(group.kept(list(map(not_, changing))))
            casting = group.kept(changing)
        moved = _wrapped(casting, casting.family.template, "cast", tag)
        dtypes = [rule.dtype] * len(casting.plan.dtypes)
        result.append(Group(moved.family, replace(moved.plan, dtypes=dtypes)))
    return result


Where = dict[str, tuple[int, int]]  # a name -> its group and its position there


def _fuse(rule: Fuse, tag: str, groups: list[Group], constants: dict[str, str]) -> list[Group]:
    """Each group the first source matches, fused with its parts' groups member by member;
    as by_family's `_fuse`, only where no tensor is in two fusions and every fused name is
    new (the per-name loop's order cannot matter then)."""
    if not binds_numbers_alike(rule.sources[0], constants):
        raise _Undecided
    if not all(_fillable(text, constants) for text in (*rule.sources[1:], rule.target)):
        raise _Undecided
    patterns = [compile_pattern(text, constants) for text in (*rule.sources, rule.target)]
    where = _where(groups)
    gone: list[list[int]] = [[] for _ in groups]  # per group, its members fused away
    fused: list[Group] = []
    candidates: list[str] = []
    for group in groups:
        templates = _templates(patterns, group)
        if templates is None:
            continue
        numbers = group.family.numbers
        columns = _columns(templates[:-1], group)
        candidates += chain.from_iterable(columns)
        located = [list(map(where.get, column)) for column in columns]
        present = list(map(all, zip(*located, strict=True)))
        if any(present):
            kept = list(compress(numbers, present))
            parts = [_part(groups, column, present, kept, gone) for column in located]
            fused.append(_fused(templates[-1], kept, parts, rule.axis, tag))
    if not fused:
        return groups
    made = list(_names(fused))
    if len(set(candidates)) != len(candidates) or len(set(made)) != len(made):
        raise _Undecided  # a tensor in two fusions, or two fusions onto one name
    if not set(made).isdisjoint(where) or not set(made).isdisjoint(candidates):
        raise _Undecided  # a fused name that is already a tensor
    result = []
    for group, positions in zip(groups, gone, strict=True):
        leaving = set(positions)
        if not leaving:
            result.append(group)
        elif len(leaving) < len(group.family.names):
            result.append(group.kept([p not in leaving for p in range(len(group.family.names))]))
    return [*result, *fused]


def _where(groups: list[Group]) -> Where:
    where: Where = {}
    for at, group in enumerate(groups):
        names = group.family.names
        where.update(zip(names, zip(repeat(at), range(len(names))), strict=True))
    return where


def _columns(templates: list[str], group: Group) -> list[list[str]]:
    """Each source's names for the members of ``group`` (the first source's are its own)."""
    family = group.family
    if templates[0] == family.template:
        return [family.names, *(list(starmap(t.format, family.numbers)) for t in templates[1:])]
    columns = [list(starmap(t.format, family.numbers)) for t in templates]
    if columns[0] != family.names:
        raise _Undecided
    return columns


def _templates(patterns: list[Pattern], group: Group) -> list[str] | None:
    """The family templates of the sources and the target for ``group``; None when the first
    source does not match it."""
    bound = _bound(patterns[0], group.family)
    if bound is None:
        return None
    templates = [_filled(pattern, bound) for pattern in patterns]
    if None in templates:
        raise _Undecided  # `fill` names the placeholder the first source does not bind
    return [str(template) for template in templates]


def _part(
    groups: list[Group],
    located: list[tuple[int, int] | None],
    present: list[bool],
    numbers: list[Numbers],
    gone: list[list[int]],
) -> Plan:
    """One source's plan for the fusions that are ``present``: its members must lie in one
    group and carry the fused tensors' numbers (else the per-name path decides)."""
    held = [place for place in compress(located, present) if place is not None]
    owners: set[int] = {at for at, _ in held}
    if len(owners) != 1:
        raise _Undecided
    owner = owners.pop()
    positions = [position for _, position in held]
    if _pick(groups[owner].family.numbers, positions) != numbers:
        raise _Undecided
    gone[owner] += positions
    return groups[owner].plan.taken(positions)


def _fused(template: str, numbers: list[Numbers], parts: list[Plan], axis: int, tag: str) -> Group:
    """The fused group: the parts' dtypes agree, their ranks agree, the axis is in range and
    the other dimensions agree (else the per-name path raises its error)."""
    dtypes = parts[0].dtypes
    if any(part.dtypes != dtypes for part in parts[1:]):
        raise _Undecided
    ranks = set(chain.from_iterable(map(len, part.shapes) for part in parts))
    if len(ranks) != 1 or not 0 <= axis < next(iter(ranks)):
        raise _Undecided
    rank = next(iter(ranks))
    others = [i for i in range(rank) if i != axis]
    if others:  # the other dimensions, a column at a time in C (19,500 pairs for GLM-5.2)
        rest = itemgetter(*others)
        first = list(map(rest, parts[0].shapes))
        if any(list(map(rest, part.shapes)) != first for part in parts[1:]):
            raise _Undecided
    totals = map(sum, zip(*(map(itemgetter(axis), part.shapes) for part in parts), strict=True))
    column = [map(itemgetter(i), parts[0].shapes) for i in range(rank)]
    shapes = list(zip(*column[:axis], totals, *column[axis + 1 :], strict=True))
    rules = (*dict.fromkeys(r for part in parts for r in part.rules), tag)
    plan = Plan(template, dtypes, shapes, "fuse", tuple(parts), rules, axis)
    names = list(starmap(template.format, numbers))
    return Group(Family(template, names, numbers), plan)


def _by_name(
    rule: Rule, tag: str, groups: list[Group], constants: dict[str, str], pattern: str
) -> list[Group]:
    """A rule that tells numbers apart, applied by the per-name function to the tensors its
    pattern matches, taken out of their groups; each result a group of its own."""
    regex = compile_pattern(pattern, constants).regex
    result: list[Group] = []
    taken: dict[str, Node] = {}
    for group in groups:
        hits = list(map(bool, map(regex.fullmatch, group.family.names)))
        if not any(hits):
            result.append(group)
            continue
        chosen = group.kept(hits)
        nodes = chosen.plan.nodes(chosen.family.numbers)
        taken.update(zip(chosen.family.names, nodes, strict=True))
        if not all(hits):
            result.append(group.kept(list(map(not_, hits))))
    if not taken:
        return groups
    try:
        applied = _APPLY[rule.kind](rule, tag, taken, constants)  # type: ignore[operator]
    except RuleError:
        raise _Undecided from None
    if not set(applied).isdisjoint(_names(result)):
        raise _Undecided  # onto a tensor the rule left alone: the per-name path decides
    return [*result, *_regrouped(list(applied.values()))]


def _regrouped(nodes: list[Node]) -> list[Group]:
    """The per-name function's nodes as groups again: a family of their names whose trees
    agree level by level (the same operations, each level's names one family with the same
    numbers) is one group; any other node a group of its own."""
    families = index([node.name for node in nodes])
    if families is None:
        raise _Undecided  # a name with a brace or a newline: the per-name path
    by_name = {node.name: node for node in nodes}
    groups = []
    for family in families:
        members = list(map(by_name.__getitem__, family.names))
        plan = _plan_of(members, family.numbers)
        if plan is not None:
            groups.append(Group(family, plan))
            continue
        for node in members:
            single = _plan_of([node], [()])
            if single is None:
                raise _Undecided
            groups.append(Group(Family(node.name, [node.name], [()]), single))
    return groups


def _plan_of(nodes: list[Node], numbers: list[Numbers]) -> Plan | None:
    """The plan of ``nodes`` (one family's members, in its order), or None when their trees
    differ or a level's names are not one family with the same numbers."""
    first = nodes[0]
    shape_of = (first.op, first.rules, first.axis, len(first.children))
    if first.offset or any((n.op, n.rules, n.axis, len(n.children)) != shape_of for n in nodes):
        return None  # trees that differ, or a split's part
    if numbers == [()]:
        if "{" in first.name or "}" in first.name:
            return None
        template = first.name
    else:
        families = index([node.name for node in nodes])
        if families is None or len(families) != 1 or families[0].numbers != numbers:
            return None
        template = families[0].template
    children = []
    for position in range(len(first.children)):
        child = _plan_of([node.children[position] for node in nodes], numbers)
        if child is None:
            return None
        children.append(child)
    dtypes, shapes = [node.dtype for node in nodes], [node.shape for node in nodes]
    return Plan(template, dtypes, shapes, first.op, tuple(children), first.rules, first.axis)


_GROUPED = {"rename": _rename, "transpose": _transpose, "cast": _cast, "fuse": _fuse}


@dataclass(frozen=True)
class GroupedExpectation:
    groups: list[Group]


def expect_grouped(
    reference: dict[str, tuple[str, Shape]], ruleset: RuleSet
) -> GroupedExpectation | None:
    """`expect`'s expectation as groups, or None when this path cannot decide it."""
    try:
        rules = ruleset.all_rules()
        groups = _leaf_groups(reference, list(reference))
        for position, rule in enumerate(rules):
            apply = _GROUPED.get(rule.kind)
            if apply is None:
                return None
            groups = apply(rule, label(rule, position), groups, ruleset.placeholders)  # type: ignore[operator]
    except (_Undecided, RuleError):
        return None
    return GroupedExpectation([group for group in groups if group.family.names])
