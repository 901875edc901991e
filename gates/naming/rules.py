"""Naming rules: how reference (torch/HF) tensors become candidate (Paddle) tensors.

Rules apply in order to the reference inventory; each changes the tensors it
matches and records itself on them, so every difference can name the rules
behind it. Kinds:

- `rename`: `source` pattern -> `target` pattern;
- `transpose`: 2-D tensors matching `match` swap their axes (torch `[out, in]`
  against Paddle `[in, out]`);
- `fuse`: the tensors of `sources` (same placeholders) concatenated along
  `axis` into `target`, in the order given; shapes must add up;
- `split`: `source` cut along `axis` into `targets` (`sizes`, or equal parts);
- `cast`: tensors matching `match` change to `dtype` (a declared cast).

Patterns are tensor names with placeholders: `{layer}` and `{expert}` match
digits, `{rest}` and `{prefix}` match any text (dots included), any other
`{name}` one dot-free name part, and `{name:a|b|c}` one of the listed
words. `placeholders` fix some of them to constants (e.g. `mtp = "78"`, the
MTP layer index).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter

from pydantic import BaseModel, ConfigDict, Field

from gates.naming.aoa import parse_aoa
from gates.naming.rule_kinds import Cast, Fuse, Rename, Rule, RuleError, Split, Transpose

_ANY = {"rest", "prefix"}
_DIGITS = {"layer", "expert"}
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)(?::([^{}]+))?\}")


class RuleSet(BaseModel):
    """The `rules`, `aoa` and `placeholders` params of a tensor-inventory contract."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[Rule, ...] = ()
    aoa: tuple[str, ...] = ()
    placeholders: dict[str, str] = Field(default_factory=dict)

    def all_rules(self) -> list[Rule]:
        return [*self.rules, *parse_aoa(self.aoa)]


def label(rule: Rule, index: int) -> str:
    return rule.name or f"{rule.kind}#{index + 1}"


@dataclass(frozen=True)
class Pattern:
    text: str
    regex: re.Pattern[str]
    names: tuple[str, ...]
    template: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # `text` with each placeholder as a `str.format` field (the literal braces doubled):
        # filled by `format_map` in C, where a `re.sub` called Python once per placeholder
        pieces, position = [], 0
        for found in _PLACEHOLDER.finditer(self.text):
            literal = self.text[position : found.start()]
            pieces.append(literal.replace("{", "{{").replace("}", "}}"))
            pieces.append("{" + found.group(1) + "}")
            position = found.end()
        pieces.append(self.text[position:].replace("{", "{{").replace("}", "}}"))
        object.__setattr__(self, "template", "".join(pieces))

    def match(self, name: str) -> dict[str, str] | None:
        found = self.regex.fullmatch(name)
        return found.groupdict() if found else None

    def fill(self, values: dict[str, str]) -> str:
        missing = [n for n in self.names if n not in values]
        if missing:
            raise RuleError(f"pattern {self.text!r} uses {missing} which the source does not bind")
        return self.template.format_map(values)


def _body(name: str, alternatives: str | None) -> str:
    if alternatives:
        return "|".join(re.escape(choice) for choice in alternatives.split("|"))
    return ".+" if name in _ANY else r"\d+" if name in _DIGITS else r"[^.]+"


def compile_pattern(text: str, constants: dict[str, str]) -> Pattern:
    parts: list[str] = []
    names: list[str] = []
    position = 0
    for found in _PLACEHOLDER.finditer(text):
        parts.append(re.escape(text[position : found.start()]))
        name = found.group(1)
        if name in constants:
            parts.append(re.escape(constants[name]))
        elif name in names:
            parts.append(f"(?P={name})")
        else:
            names.append(name)
            parts.append(f"(?P<{name}>{_body(name, found.group(2))})")
        position = found.end()
    parts.append(re.escape(text[position:]))
    literal = _PLACEHOLDER.sub(lambda m: constants.get(m.group(1), m.group(0)), text)
    return Pattern(literal, re.compile("".join(parts)), tuple(names))


_OP, _LEAF = attrgetter("op"), {"leaf"}


@dataclass(frozen=True)
class Node:
    """A tensor as the rules expect it on the candidate side, and how it came to be."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    op: str = "leaf"  # leaf | rename | transpose | fuse | split | cast
    children: tuple[Node, ...] = ()
    rules: tuple[str, ...] = ()
    axis: int = 0
    offset: int = 0

    def leaves(self) -> list[Node]:
        if self.op == "leaf":
            return [self]
        children = self.children
        if set(map(_OP, children)) == _LEAF:  # the usual depth: no recursion (a check in C)
            return list(children)
        return [leaf for child in children for leaf in child.leaves()]

    def ops(self) -> set[str]:
        found: set[str] = set()
        pending = [self]  # a loop, not a set per level: a survey asks 60,000 nodes
        while pending:
            node = pending.pop()
            if node.op != "leaf":
                found.add(node.op)
            pending.extend(node.children)
        return found


def _node(  # noqa: PLR0917  (Node's own fields, in its order)
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    op: str = "leaf",
    children: tuple[Node, ...] = (),
    rules: tuple[str, ...] = (),
    axis: int = 0,
    offset: int = 0,
) -> Node:
    """`Node(...)` without the frozen dataclass's `object.__setattr__` per field (most of
    the cost of the 120,000 nodes of a full-size survey); the same instance. One dict
    display given as the instance's dict: faster than `__dict__.update` of keywords."""
    made = _NEW(Node)
    _SET(
        made,
        "__dict__",
        {
            "name": name,
            "dtype": dtype,
            "shape": shape,
            "op": op,
            "children": children,
            "rules": rules,
            "axis": axis,
            "offset": offset,
        },
    )
    return made


_NEW, _SET = object.__new__, object.__setattr__


@dataclass
class Expectation:
    nodes: dict[str, Node]
    problems: list[str] = field(default_factory=list)


def _hits(pattern: Pattern, names: list[str]) -> list[tuple[int, re.Match[str]]]:
    """The positions and matches of the names ``pattern`` matches: the pattern runs over
    all names in C (60,000 for GLM-5.2), Python only over the names it matches."""
    found = list(map(pattern.regex.fullmatch, names))
    return list(zip(compress(range(len(names)), found), filter(None, found), strict=True))


def _rename(
    rule: Rename, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> dict[str, Node]:
    source, target = (
        compile_pattern(rule.source, constants),
        compile_pattern(rule.target, constants),
    )
    names = list(nodes)
    renamed = {}
    for index, found in _hits(source, names):
        new = target.fill(found.groupdict())
        if new != names[index]:
            renamed[index] = new
    if not renamed:
        return nodes
    kept = list(nodes.values())
    for index, new in renamed.items():
        node = kept[index]
        names[index] = new
        kept[index] = _node(new, node.dtype, node.shape, "rename", (node,), (*node.rules, tag))
    result = dict(zip(names, kept, strict=True))
    if len(result) != len(names):
        raise RuleError(f"rule {tag} maps two tensors onto {_first_repeat(names)}")
    return result


def _first_repeat(names: list[str]) -> str:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    raise ValueError("no name repeats")


def _transpose(
    rule: Transpose, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> dict[str, Node]:
    names = list(nodes)
    result = dict(nodes)
    for index, _ in _hits(compile_pattern(rule.match, constants), names):
        name = names[index]
        node = result[name]
        if len(node.shape) != 2:
            raise RuleError(
                f"rule {tag} matches {name}, which has {len(node.shape)} dimensions, not 2"
            )
        shape = (node.shape[1], node.shape[0])
        result[name] = _node(name, node.dtype, shape, "transpose", (node,), (*node.rules, tag))
    return result


def _cast(
    rule: Cast, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> dict[str, Node]:
    names = list(nodes)
    result = dict(nodes)
    for index, _ in _hits(compile_pattern(rule.match, constants), names):
        node = result[names[index]]
        if node.dtype != rule.dtype:
            name = names[index]
            result[name] = _node(name, rule.dtype, node.shape, "cast", (node,), (*node.rules, tag))
    return result


def _fuse(
    rule: Fuse, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> dict[str, Node]:
    sources = [compile_pattern(text, constants) for text in rule.sources]
    target = compile_pattern(rule.target, constants)
    result = dict(nodes)
    ordered = sorted(nodes)
    # every match binds the first source's placeholders: when they cover the other
    # sources' (and the target's), those fill without `fill`'s check per match (else
    # `fill` raises its error)
    bound = set(sources[0].names)
    fills = [
        pattern.template.format_map if bound >= set(pattern.names) else pattern.fill
        for pattern in (*sources, target)
    ]
    axis = rule.axis
    for index, found in _hits(sources[0], ordered):
        if ordered[index] not in result:
            continue
        values = found.groupdict()
        *names, fused = [fill(values) for fill in fills]
        if len(set(names)) != len(names):
            twice = next(part for part in names if names.count(part) > 1)
            raise RuleError(f"rule {tag}: the sources name {twice} twice; fuse distinct tensors")
        if not all(map(result.__contains__, names)):
            continue
        parts = tuple(map(result.__getitem__, names))
        shape = _fused_shape(parts, axis, tag)
        for part in names:
            del result[part]
        rules = (*dict.fromkeys(r for part in parts for r in part.rules), tag)
        result[fused] = _node(fused, parts[0].dtype, shape, "fuse", parts, rules, axis)
    return result


def _fused_shape(parts: tuple[Node, ...], axis: int, tag: str) -> tuple[int, ...]:
    first = parts[0]
    dtype, shape = first.dtype, first.shape
    if not 0 <= axis < len(shape):
        raise RuleError(f"rule {tag}: axis {axis} out of range for {list(shape)}")
    rest, total = shape[:axis] + shape[axis + 1 :], shape[axis]
    for part in parts[1:]:
        other = part.shape
        if part.dtype != dtype or len(other) != len(shape):
            names = ", ".join(p.name for p in parts)
            raise RuleError(f"rule {tag}: {names} differ in dtype or rank")
        if other[:axis] + other[axis + 1 :] != rest:
            listed = ", ".join(str(list(p.shape)) for p in parts)
            raise RuleError(f"rule {tag}: shapes {listed} do not add up along axis {axis}")
        total += other[axis]
    return (*shape[:axis], total, *shape[axis + 1 :])


def _split(
    rule: Split, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> dict[str, Node]:
    source = compile_pattern(rule.source, constants)
    targets = [compile_pattern(text, constants) for text in rule.targets]
    result: dict[str, Node] = {}
    for name, node in nodes.items():
        values = source.match(name)
        if values is None:
            result[name] = node
            continue
        if not 0 <= rule.axis < len(node.shape):
            raise RuleError(f"rule {tag}: axis {rule.axis} out of range for {name}")
        total = node.shape[rule.axis]
        sizes = rule.sizes or tuple(total // len(targets) for _ in targets)
        if sum(sizes) != total or len(sizes) != len(targets):
            raise RuleError(f"rule {tag}: sizes {list(sizes)} do not split {total} of {name}")
        offset = 0
        for pattern, size in zip(targets, sizes, strict=True):
            new = pattern.fill(values)
            shape = tuple(size if i == rule.axis else d for i, d in enumerate(node.shape))
            result[new] = _node(
                new, node.dtype, shape, "split", (node,), (*node.rules, tag), rule.axis, offset
            )
            offset += size
    return result


_APPLY = {"rename": _rename, "transpose": _transpose, "cast": _cast, "fuse": _fuse, "split": _split}


def expect(reference: dict[str, tuple[str, tuple[int, ...]]], ruleset: RuleSet) -> Expectation:
    """The candidate inventory the rules predict from the reference (name -> (dtype, shape))."""
    nodes = {name: _node(name, dtype, shape) for name, (dtype, shape) in reference.items()}
    expectation = Expectation(nodes)
    try:
        rules = ruleset.all_rules()
    except RuleError as exc:
        expectation.problems.append(str(exc))
        return expectation
    for index, rule in enumerate(rules):
        try:
            nodes = _APPLY[rule.kind](rule, label(rule, index), nodes, ruleset.placeholders)  # type: ignore[operator]
        except RuleError as exc:
            expectation.problems.append(str(exc))
    expectation.nodes = nodes
    return expectation
