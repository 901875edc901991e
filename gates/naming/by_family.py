"""The naming rules applied a family at a time: the same `Expectation` as `expect`, faster.

A family is the names that differ only in their number parts
(`model.layers.{L}.mlp.experts.{E}.up_proj.weight`, 256 x 75 names of GLM-5.2).
A rule whose pattern cannot tell one number from another matches all of a
family or none of it, and binds the same parts of each: the pattern then runs
once per family, on its first name, and the candidate names come from one
`str.format` template per family, filled with each member's numbers in C.

A pattern cannot tell numbers apart when (`binds_numbers_alike`) each of its
placeholders is a whole dot-separated part (or, for `{rest}` and `{prefix}`,
a run of whole parts), none repeats, and its literal text, constants and
listed words hold no digit: a placeholder then accepts a number part whatever
its digits, and a literal never does, so the regex takes the same path through
every member. Anything else, and anything unusual on the way (a rule error,
two tensors onto one, a fusion that shares a tensor), is handed to the rule's
per-name function (gates/naming/rules.py), whose result and first error are
the reference; tests/test_naming_families.py holds the two paths equal.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import compress, repeat, starmap
from operator import add, attrgetter, call, eq, itemgetter, not_
from typing import Any

from gates.naming.families import ZEROED, digits_alone
from gates.naming.rule_kinds import Cast, Fuse, Rename, Rule, RuleError, Transpose
from gates.naming.rules import (
    _APPLY,
    _PLACEHOLDER,
    Expectation,
    Node,
    Pattern,
    RuleSet,
    _node,
    compile_pattern,
    label,
)

# a number part: digits between two dots, each name put between dots (a pattern that starts
# with a literal is searched in C); marked `{}` in a family's key, which no name holds (a
# name with a brace has no family)
_NUMBER_PART = re.compile(r"\.[0-9]+(?=\.)")
_NUMBER = re.compile(r"\.([0-9]+)(?=\.)")
_dtype, _shape, _rules = attrgetter("dtype"), attrgetter("shape"), attrgetter("rules")


@dataclass(frozen=True)
class Family:
    """Names that differ only in their number parts: `template` (a `str.format` template,
    each number part a positional field) filled with each member's `numbers`."""

    template: str
    names: list[str]
    numbers: list[tuple[str, ...]]


Nodes = dict[str, Node]
Families = list[Family]


def nodes_of(columns: Iterable[Iterable[Any]]) -> list[Node]:
    """`Node`s from columns in `Node`'s field order (faster than a dict per row in C)."""
    return list(map(_node, *columns))


def index(names: list[str]) -> Families | None:
    """The families of ``names``; None when a name is not plain ASCII without braces (the
    templates are `str.format` templates) or a newline (`families` joins by newlines)."""
    joined = "\n".join(names)
    if not joined.isascii() or "{" in joined or "}" in joined:
        return None
    if joined.count("\n") != max(len(names) - 1, 0):
        return None
    if not names:
        return []
    shapes = joined.translate(ZEROED).split("\n")
    kinds = {shape: _ShapeKind.of(shape) for shape in dict.fromkeys(shapes)}
    if None in kinds.values():
        return _by_substitution(names)
    return _by_shape(names, shapes, kinds)  # type: ignore[arg-type]


def _by_substitution(names: list[str]) -> Families:
    """`index` of plain names by the number parts' substitution over them all: the
    reference, and the way for names with a digit inside a part (`fc1`)."""
    grouped: defaultdict[str, list[str]] = defaultdict(list)
    dotted = "." + ".\n.".join(names) + "."
    keys = _NUMBER_PART.sub(".{}", dotted).split("\n")
    for key, name in zip(keys, names, strict=True):
        grouped[key].append(name)
    return [_family(key, members) for key, members in grouped.items()]


@dataclass(frozen=True)
class _ShapeKind:
    """What the names of one shape (`gates.naming.families.ZEROED`: each digit a zero)
    share when each of their digits stands in a part of digits alone: the family's key and
    template, and where their numbers are, the same characters in each name."""

    key: str
    template: str
    numbers: Callable[[str], Any]  # a name -> its number parts (one, or a tuple of them)
    count: int

    @staticmethod
    def of(shape: str) -> _ShapeKind | None:
        if not digits_alone(shape):
            return None  # `fc1`, `w2`: a digit inside a part, for the substitution to judge
        dotted = "." + shape + "."
        spans = [found.span(1) for found in _NUMBER.finditer(dotted)]
        slices = [slice(start - 1, end - 1) for start, end in spans]  # in the name, undotted
        key = _NUMBER_PART.sub(".{}", dotted)
        fields = iter(range(len(slices)))
        parts = [("{" + str(next(fields)) + "}" if p == "{}" else p) for p in key[1:-1].split(".")]
        getter = itemgetter(*slices) if slices else itemgetter(slice(0, 0))
        return _ShapeKind(key, ".".join(parts), getter, len(slices))


def _by_shape(names: list[str], shapes: list[str], kinds: dict[str, _ShapeKind]) -> Families:
    """`index` where each shape's digits stand alone: a name's family is its shape's, and
    its numbers are the characters its shape's digits are at (read in C, no regex pass)."""
    of_name = list(map(kinds.__getitem__, shapes))
    numbers = list(map(call, map(_NUMBERS_OF, of_name), names))
    members: defaultdict[str, list[int]] = defaultdict(list)
    for key, at in zip(map(_KEY_OF, of_name), range(len(names)), strict=True):
        members[key].append(at)
    families = []
    for positions in members.values():
        kind = of_name[positions[0]]
        picked = list(map(names.__getitem__, positions))
        found = list(map(numbers.__getitem__, positions))
        if kind.count == 0:
            found = [()] * len(positions)
        elif kind.count == 1:
            found = list(zip(found))
        families.append(Family(kind.template, picked, found))
    return families


_NUMBERS_OF, _KEY_OF = attrgetter("numbers"), attrgetter("key")


def _family(dotted: str, names: list[str]) -> Family:
    parts = dotted[1:-1].split(".")
    positions = [i for i, part in enumerate(parts) if part == "{}"]
    for field, position in enumerate(positions):
        parts[position] = "{" + str(field) + "}"
    if not positions:
        return Family(dotted[1:-1], names, [()] * len(names))
    # each member's number parts, in order: one search over the members joined
    numbers = _NUMBER.findall("." + ".\n.".join(names) + ".")
    return Family(".".join(parts), names, list(zip(*[iter(numbers)] * len(positions), strict=True)))


def _tokens(text: str, constants: dict[str, str]) -> list[tuple[str, str]] | None:
    """``text`` as (literal, "") and (placeholder name, words) tokens, constants as literals,
    adjacent literals joined; None when a constant holds a brace."""
    tokens: list[tuple[str, str]] = []
    position = 0
    for found in _PLACEHOLDER.finditer(text):
        tokens.append((text[position : found.start()], ""))
        name = found.group(1)
        if name in constants:
            if "{" in constants[name] or "}" in constants[name]:
                return None
            tokens.append((constants[name], ""))
        else:
            tokens.append(("{" + name, found.group(2) or ""))
        position = found.end()
    tokens.append((text[position:], ""))
    joined: list[tuple[str, str]] = []
    for token in tokens:
        if not token[0]:
            continue  # an empty literal: the placeholders around it are adjacent
        if joined and not token[0].startswith("{") and not joined[-1][0].startswith("{"):
            joined[-1] = (joined[-1][0] + token[0], "")
        else:
            joined.append(token)
    return joined


def _whole_parts(tokens: list[tuple[str, str]]) -> bool:
    """Every placeholder is bounded by the pattern's ends or by dots, every literal holds
    no brace."""
    for i, (text, _) in enumerate(tokens):
        if not text.startswith("{"):
            if "{" in text or "}" in text:
                return False
            continue
        before = tokens[i - 1][0] if i else ""
        after = tokens[i + 1][0] if i + 1 < len(tokens) else ""
        if before.startswith("{") or after.startswith("{"):
            return False
        if (before and not before.endswith(".")) or (after and not after.startswith(".")):
            return False
    return True


def binds_numbers_alike(text: str, constants: dict[str, str]) -> bool:
    """The pattern matches all of a family or none, binding the same parts of each."""
    tokens = _tokens(text, constants)
    if tokens is None or not _whole_parts(tokens):
        return False
    names = [t for t, _ in tokens if t.startswith("{")]
    if len(set(names)) != len(names):
        return False  # a repeated placeholder compares two numbers
    for literal, words in tokens:
        listed = words.split("|") if words else []
        if any(not word or "." in word or _digit(word) for word in listed):
            return False
        if not literal.startswith("{") and _digit(literal):
            return False
    return True


def _fillable(text: str, constants: dict[str, str]) -> bool:
    """Filled with a family's parts, the pattern gives a family template again."""
    tokens = _tokens(text, constants)
    return tokens is not None and _whole_parts(tokens)


def _digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def _bound(pattern: Pattern, family: Family) -> dict[str, str] | None:
    """What ``pattern`` binds in each member of ``family``, as template text (its
    placeholders cover whole parts, so a binding is a run of the template's parts)."""
    first = family.names[0]
    found = pattern.regex.fullmatch(first)
    if found is None:
        return None
    parts = family.template.split(".")
    bound = {}
    for name in pattern.names:
        start, end = found.span(name)
        bound[name] = ".".join(parts[first.count(".", 0, start) : first.count(".", 0, end) + 1])
    return bound


def _filled(pattern: Pattern, bound: dict[str, str]) -> str | None:
    """The family template ``pattern`` fills from ``bound``; None when it uses a placeholder
    that ``bound`` lacks (`fill` raises the error then)."""
    if not set(pattern.names) <= bound.keys():
        return None
    return pattern.template.format_map(bound)


def _members(template: str, numbers: list[tuple[str, ...]]) -> list[str]:
    return list(starmap(template.format, numbers))


Bulk = tuple[Nodes, Families] | None


def _rename(
    rule: Rename, tag: str, nodes: Nodes, found: Families, constants: dict[str, str]
) -> Bulk:
    if not (binds_numbers_alike(rule.source, constants) and _fillable(rule.target, constants)):
        return None
    source = compile_pattern(rule.source, constants)
    target = compile_pattern(rule.target, constants)
    renamed: dict[str, str] = {}
    kept: Families = []
    for family in found:
        bound = _bound(source, family)
        template = None if bound is None else _filled(target, bound)
        if bound is None:
            kept.append(family)
            continue
        if template is None:
            return None
        names = _members(template, family.numbers)
        renamed.update(zip(family.names, names, strict=True))
        kept.append(Family(template, names, family.numbers))
    if not renamed:
        return nodes, kept
    result = _renamed(nodes, renamed, tag)
    return None if result is None else (result, kept)


def _renamed(nodes: Nodes, renamed: dict[str, str], tag: str) -> Nodes | None:
    """``nodes`` with ``renamed``'s names (old -> new) in their places; None when two
    tensors would have one name (the per-name path names the first)."""
    targets = set(renamed.values())
    if len(targets) != len(renamed):
        return None
    if not all(map(renamed.__contains__, filter(nodes.__contains__, targets))):
        return None  # onto a tensor the rule leaves where it is
    changed = [old for old, new in renamed.items() if old != new]
    before = list(map(nodes.__getitem__, changed))
    made = nodes_of(
        (
            map(renamed.__getitem__, changed),
            map(_dtype, before),
            map(_shape, before),
            repeat("rename"),
            zip(before),
            map(add, map(_rules, before), repeat((tag,))),
            repeat(0),
            repeat(0),
        )
    )
    replaced = dict(zip(changed, made, strict=True))
    names = map(renamed.get, nodes, nodes)
    return dict(zip(names, map(replaced.get, nodes, nodes.values()), strict=True))


def _matched(text: str, found: Families, constants: dict[str, str]) -> list[str] | None:
    """The names of the families ``text`` matches; None when it can tell numbers apart."""
    if not binds_numbers_alike(text, constants):
        return None
    regex = compile_pattern(text, constants).regex
    return [name for family in found if regex.fullmatch(family.names[0]) for name in family.names]


def _transpose(
    rule: Transpose, tag: str, nodes: Nodes, found: Families, constants: dict[str, str]
) -> Bulk:
    names = _matched(rule.match, found, constants)
    if names is None:
        return None
    before = list(map(nodes.__getitem__, names))
    if set(map(len, map(_shape, before))) - {2}:
        return None  # the per-name path names the first tensor that is not 2-D
    made = nodes_of(
        (
            names,
            map(_dtype, before),
            map(itemgetter(1, 0), map(_shape, before)),
            repeat("transpose"),
            zip(before),
            map(add, map(_rules, before), repeat((tag,))),
            repeat(0),
            repeat(0),
        )
    )
    result = dict(nodes)
    result.update(zip(names, made, strict=True))
    return result, found


def _cast(rule: Cast, tag: str, nodes: Nodes, found: Families, constants: dict[str, str]) -> Bulk:
    names = _matched(rule.match, found, constants)
    if names is None:
        return None
    before = list(map(nodes.__getitem__, names))
    changing = list(map(not_, map(eq, map(_dtype, before), repeat(rule.dtype))))
    before = list(compress(before, changing))
    made = nodes_of(
        (
            map(attrgetter("name"), before),
            repeat(rule.dtype),
            map(_shape, before),
            repeat("cast"),
            zip(before),
            map(add, map(_rules, before), repeat((tag,))),
            repeat(0),
            repeat(0),
        )
    )
    result = dict(nodes)
    result.update(zip(map(attrgetter("name"), made), made, strict=True))
    return result, found


@dataclass
class _Fusions:
    """The fusions of one rule, every family's together: per part (sources in order) the
    candidate names, and the fused names, the numbers and the new families."""

    parts: list[list[str]]
    fused: list[str]
    candidates: list[str]
    families: Families


def _fusions(
    rule: Fuse, nodes: Nodes, found: Families, constants: dict[str, str]
) -> _Fusions | None:
    filled = (*rule.sources[1:], rule.target)
    if not binds_numbers_alike(rule.sources[0], constants):
        return None
    if not all(_fillable(text, constants) for text in filled):
        return None
    sources = [compile_pattern(text, constants) for text in rule.sources]
    target = compile_pattern(rule.target, constants)
    fusions = _Fusions([[] for _ in sources], [], [], [])
    for family in found:
        bound = _bound(sources[0], family)
        if bound is None:
            continue
        templates = [_filled(pattern, bound) for pattern in (*sources, target)]
        if None in templates:
            return None
        names = [_members(t, family.numbers) for t in templates[:-1] if t is not None]
        if names[0] != family.names:
            return None
        for column in names:
            fusions.candidates += column
        held = [map(nodes.__contains__, column) for column in names]
        present = list(map(all, zip(*held, strict=True)))
        numbers = list(compress(family.numbers, present))
        for kept, column in zip(fusions.parts, names, strict=True):
            kept.extend(compress(column, present))
        fused = _members(str(templates[-1]), numbers)
        fusions.fused += fused
        fusions.families.append(Family(str(templates[-1]), fused, numbers))
    return fusions


def _fuse(rule: Fuse, tag: str, nodes: Nodes, found: Families, constants: dict[str, str]) -> Bulk:
    fusions = _fusions(rule, nodes, found, constants)
    if fusions is None:
        return None
    candidates, fused = fusions.candidates, fusions.fused
    if not fused:
        return dict(nodes), found
    # each tensor in one fusion at most and each fused name new: the per-name loop's order
    # cannot matter then (else it decides)
    if len(set(candidates)) != len(candidates) or len(set(fused)) != len(fused):
        return None
    if not set(fused).isdisjoint(nodes) or not set(fused).isdisjoint(candidates):
        return None
    parts = [list(map(nodes.__getitem__, column)) for column in fusions.parts]
    shapes = _fused_shapes(parts, rule.axis)
    if shapes is None:
        return None  # the per-name path names the first fusion whose shapes do not add up
    combined = {
        combo: (*dict.fromkeys(r for rules in combo for r in rules), tag)
        for combo in set(zip(*(map(_rules, column) for column in parts), strict=True))
    }
    made = nodes_of(
        (
            fused,
            map(_dtype, parts[0]),
            shapes,
            repeat("fuse"),
            zip(*parts, strict=True),
            map(combined.__getitem__, zip(*(map(_rules, c) for c in parts), strict=True)),
            repeat(rule.axis),
            repeat(0),
        )
    )
    gone = set().union(*fusions.parts)
    result = dict(compress(nodes.items(), map(not_, map(gone.__contains__, nodes))))
    # the per-name loop adds the fused tensors in the order of their first source's names
    order = sorted(range(len(fused)), key=fusions.parts[0].__getitem__)
    result.update(zip(map(fused.__getitem__, order), map(made.__getitem__, order), strict=True))
    kept = [_without(family, gone) for family in found]
    return result, [f for f in (*kept, *fusions.families) if f.names]


def _without(family: Family, gone: set[str]) -> Family:
    keep = list(map(not_, map(gone.__contains__, family.names)))
    if all(keep):
        return family
    return Family(
        family.template, list(compress(family.names, keep)), list(compress(family.numbers, keep))
    )


def _fused_shapes(parts: list[list[Node]], axis: int) -> list[tuple[int, ...]] | None:
    """Each fusion's shape, or None when one fusion's parts differ in dtype or rank, the
    axis is out of range or the other dimensions differ (the per-name path raises)."""
    dtypes = list(map(_dtype, parts[0]))
    shapes = [list(map(_shape, column)) for column in parts]
    ranks = set().union(*(map(len, column) for column in shapes))
    if len(ranks) > 1 or any(list(map(_dtype, column)) != dtypes for column in parts[1:]):
        return None
    rank = ranks.pop() if ranks else 1
    if not 0 <= axis < rank:
        return None
    others = [i for i in range(rank) if i != axis]
    if others:
        rest = itemgetter(*others)
        first = list(map(rest, shapes[0]))
        if any(list(map(rest, column)) != first for column in shapes[1:]):
            return None
    totals = map(sum, zip(*(map(itemgetter(axis), column) for column in shapes), strict=True))
    before = [map(itemgetter(i), shapes[0]) for i in range(axis)]
    after = [map(itemgetter(i), shapes[0]) for i in range(axis + 1, rank)]
    return list(zip(*before, totals, *after, strict=True))


_BULK: dict[str, Callable[..., Bulk]] = {
    "rename": _rename,
    "transpose": _transpose,
    "cast": _cast,
    "fuse": _fuse,
}


def _reindex(found: Families | None, old: Nodes, new: Nodes) -> Families | None:
    """The families after a rule applied name by name: the names it removed leave their
    families, the names it added form families of their own."""
    if found is None:
        return None
    before, after = list(old), list(new)
    if len(before) == len(after):  # a rename or a cast: the same places
        changed = list(map(not_, map(eq, before, after)))
        gone, added = set(compress(before, changed)), list(compress(after, changed))
    else:
        gone = old.keys() - new.keys()
        added = list(compress(after, map(not_, map(old.__contains__, after))))
    if not gone and not added:
        return found
    fresh = index(added)
    if fresh is None:
        return None
    kept = [family if gone.isdisjoint(family.names) else _without(family, gone) for family in found]
    return [family for family in (*kept, *fresh) if family.names]


def _apply(
    rule: Rule, tag: str, nodes: Nodes, found: Families | None, constants: dict[str, str]
) -> tuple[Nodes, Families | None]:
    bulk = _BULK.get(rule.kind)
    done = None if found is None or bulk is None else bulk(rule, tag, nodes, found, constants)
    if done is not None:
        return done
    result: Nodes = _APPLY[rule.kind](rule, tag, nodes, constants)  # type: ignore[operator]
    return result, _reindex(found, nodes, result)


def expect_by_family(
    reference: dict[str, tuple[str, tuple[int, ...]]], ruleset: RuleSet
) -> Expectation:
    """`expect`, each rule applied a family at a time where that is sound (above)."""
    names = list(reference)
    values = reference.values()
    nodes = dict(
        zip(
            names,
            nodes_of(
                (
                    names,
                    map(itemgetter(0), values),
                    map(itemgetter(1), values),
                    repeat("leaf"),
                    repeat(()),
                    repeat(()),
                    repeat(0),
                    repeat(0),
                )
            ),
            strict=True,
        )
    )
    expectation = Expectation(nodes)
    try:
        rules = ruleset.all_rules()
    except RuleError as exc:
        expectation.problems.append(str(exc))
        return expectation
    found = index(names)
    for position, rule in enumerate(rules):
        try:
            nodes, found = _apply(rule, label(rule, position), nodes, found, ruleset.placeholders)
        except RuleError as exc:
            expectation.problems.append(str(exc))
    expectation.nodes = nodes
    return expectation
