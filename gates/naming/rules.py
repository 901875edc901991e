"""Naming rules: how reference (torch/HF) tensors become candidate (Paddle) tensors.

Rules apply in order to the reference inventory; each changes the tensors it
matches and records itself on them, so every difference can name the rules
behind it. Kinds:

- `rename`: `source` pattern -> `target` pattern;
- `transpose`: tensors matching `match` permute their axes (`axes`, numpy's order; a
  2-D tensor without `axes` swaps them: torch `[out, in]` against Paddle `[in, out]`);
- `fuse`: the tensors of `sources` (same placeholders) concatenated along
  `axis` into `target`, in the order given; shapes must add up;
- `split`: `source` cut along `axis` into `targets` (`sizes`, or equal parts);
- `stack`: the tensors matching `source` that differ only in the placeholder `index`
  (0, 1, ... none missing) stacked along a new axis `axis` into `target`;
- `unstack`: the inverse, one tensor per position along `axis`, its position the
  placeholder `index` of `target`;
- `reshape`: tensors matching `match` take `shape` (one -1 allowed), elements in order;
- `cast`: tensors matching `match` change to `dtype` (a declared cast).

Patterns are tensor names with placeholders: `{layer}` and `{expert}` match
digits, `{rest}` and `{prefix}` match any text (dots included), any other
`{name}` one dot-free name part, and `{name:a|b|c}` one of the listed
words. `placeholders` fix some of them to constants (e.g. `mtp = "78"`, the
MTP layer index).

A rule that cannot apply to a tensor (a transpose of a 3-D tensor without `axes`, a
fusion whose shapes do not add up, two tensors renamed onto one name) is a problem of
that tensor alone: the tensor keeps what it was, is marked with the problem and the rule,
and the rule applies to every other tensor it matches. A rule that matched a tensor, with
or without a problem, is one that matched (`Expectation.applied`).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gates.naming.aoa import parse_statement
from gates.naming.rule_kinds import (
    CandidateOnly,
    Cast,
    Fuse,
    NotComparable,
    Rename,
    Reshape,
    Rule,
    RuleError,
    Split,
    Stack,
    Transpose,
    Unstack,
)

_ANY = {"rest", "prefix"}
_DIGITS = {"layer", "expert"}
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)(?::([^{}]+))?\}")


class RuleSet(BaseModel):
    """The naming rules of a contract (`rules`, `aoa`, `placeholders`) and the declarations
    beside them (`candidate_only`, `not_comparable`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[Rule, ...] = ()
    aoa: tuple[str, ...] = ()
    placeholders: dict[str, str] = Field(default_factory=dict)
    candidate_only: tuple[CandidateOnly, ...] = ()
    not_comparable: tuple[NotComparable, ...] = ()

    def labelled(self) -> tuple[list[tuple[str, Rule]], list[str]]:
        """Each rule with its label, in order (the contract's rules, then each AOA
        statement's), and a problem for each AOA statement that does not parse (the
        others still apply)."""
        found = [(label(rule, index), rule) for index, rule in enumerate(self.rules)]
        problems = []
        for number, statement in enumerate(self.aoa, 1):
            try:
                found += [(label(rule, 0), rule) for rule in parse_statement(statement, number)]
            except RuleError as exc:
                problems.append(str(exc))
        return found, problems


def label(rule: Rule, index: int) -> str:
    return rule.name or f"{rule.kind}#{index + 1}"


@dataclass(frozen=True)
class Pattern:
    text: str
    regex: re.Pattern[str]
    names: tuple[str, ...]
    template: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # `text` with each placeholder as a `str.format` field (the literal braces doubled)
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

    def unbound(self, bound: set[str]) -> list[str]:
        """The placeholders of this pattern that ``bound`` does not bind."""
        return [name for name in self.names if name not in bound]

    def fill(self, values: dict[str, str]) -> str:
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


#: the steps of a rule tree: those that change names, those that change the layout only
NAMING_OPS = frozenset(("rename", "fuse", "split", "stack", "unstack"))
LAYOUT_ONLY_OPS = frozenset(("transpose", "reshape"))


@dataclass(frozen=True)
class Node:
    """A tensor as the rules expect it on the candidate side, and how it came to be:
    ``op`` is the last step (leaf | rename | transpose | fuse | split | stack | unstack |
    reshape | cast) over ``children``; ``axis`` and ``offset`` place a fusion, split,
    stack or unstack (an unstack's ``offset`` is its position), ``axes`` is a
    transpose's permutation. ``problem`` names why a rule could not apply to it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    op: str = "leaf"
    children: tuple[Node, ...] = ()
    rules: tuple[str, ...] = ()
    axis: int = 0
    offset: int = 0
    axes: tuple[int, ...] = ()
    problem: str = ""

    def leaves(self) -> list[Node]:
        if self.op == "leaf":
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]

    def ops(self) -> set[str]:
        found: set[str] = set()
        pending = [self]
        while pending:
            node = pending.pop()
            if node.op != "leaf":
                found.add(node.op)
            pending.extend(node.children)
        return found


_NEW, _SET = object.__new__, object.__setattr__


def _leaf(name: str, dtype: str, shape: tuple[int, ...]) -> Node:
    """A reference tensor's `Node`: its other fields are the class's defaults (a frozen
    dataclass keeps them as class attributes), so its dict holds three entries."""
    made = _NEW(Node)
    _SET(made, "__dict__", {"name": name, "dtype": dtype, "shape": shape})
    return made


def _node(  # noqa: PLR0917  (Node's own fields, in its order)
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    op: str = "leaf",
    children: tuple[Node, ...] = (),
    rules: tuple[str, ...] = (),
    axis: int = 0,
    offset: int = 0,
    axes: tuple[int, ...] = (),
    problem: str = "",
) -> Node:
    """`Node(...)` without the frozen dataclass's `object.__setattr__` per field (most of
    the cost of the 120,000 nodes of a full-size survey); the same instance."""
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
            "axes": axes,
            "problem": problem,
        },
    )
    return made


def _step(
    name: str,
    op: str,
    parts: tuple[Node, ...],
    tag: str,
    *,
    shape: tuple[int, ...],
    dtype: str | None = None,
    axis: int = 0,
    offset: int = 0,
    axes: tuple[int, ...] = (),
) -> Node:
    """One rule step over ``parts``: their rules and the first problem carried on."""
    if len(parts) == 1:
        part = parts[0]
        rules, problem = (*part.rules, tag), part.problem
    else:
        rules = (*dict.fromkeys(r for part in parts for r in part.rules), tag)
        problem = next((part.problem for part in parts if part.problem), "")
    kind = parts[0].dtype if dtype is None else dtype
    return _node(name, kind, shape, op, parts, rules, axis, offset, axes, problem)


def _flagged(node: Node, tag: str, problem: str) -> Node:
    """``node`` as it was, marked with the rule that could not apply to it and why."""
    rules = node.rules if tag in node.rules else (*node.rules, tag)
    return _node(
        node.name,
        node.dtype,
        node.shape,
        node.op,
        node.children,
        rules,
        node.axis,
        node.offset,
        node.axes,
        node.problem or problem,
    )


@dataclass
class Expectation:
    """The expected candidate tensors by name, every problem, and the labels of the rules
    that matched a tensor."""

    nodes: dict[str, Node]
    problems: list[str] = field(default_factory=list)
    applied: set[str] = field(default_factory=set)


class _Applied:
    """What applying one rule gave: the nodes, its problems, whether it matched a tensor."""

    def __init__(self, nodes: dict[str, Node]) -> None:
        self.nodes = nodes
        self.problems: list[str] = []
        self.matched = False

    def flag(self, names: list[str], tag: str, problem: str) -> None:
        self.problems.append(problem)
        for name in names:
            self.nodes[name] = _flagged(self.nodes[name], tag, problem)


def _hits(pattern: Pattern, names: list[str]) -> list[tuple[int, re.Match[str]]]:
    """The positions and matches of the names ``pattern`` matches: the pattern runs over
    all names in C (60,000 for GLM-5.2), Python only over the names it matches."""
    found = list(map(pattern.regex.fullmatch, names))
    return list(zip(compress(range(len(names)), found), filter(None, found), strict=True))


def _unbound(tag: str, target: Pattern, bound: set[str]) -> str | None:
    missing = target.unbound(bound)
    if not missing:
        return None
    return f"rule {tag}: pattern {target.text!r} uses {missing}, which the source does not bind"


def _rename(rule: Rename, tag: str, nodes: dict[str, Node], constants: dict[str, str]) -> _Applied:
    source, target = (
        compile_pattern(rule.source, constants),
        compile_pattern(rule.target, constants),
    )
    names = list(nodes)
    hits = _hits(source, names)
    done = _Applied(nodes)
    if not hits:
        return done
    done.matched = True
    problem = _unbound(tag, target, set(source.names))
    if problem:
        done.nodes = dict(nodes)
        done.flag([names[index] for index, _ in hits], tag, problem)
        return done
    new_names = list(names)
    for index, found in hits:
        new_names[index] = target.fill(found.groupdict())
    counts = Counter(new_names)
    colliding = {name for name, count in counts.items() if count > 1}
    clashes: defaultdict[str, list[str]] = defaultdict(list)
    for index, new in enumerate(new_names):
        if new in colliding:
            clashes[new].append(names[index])
            new_names[index] = names[index]  # a tensor of a clash keeps its name
    kept = list(nodes.values())
    for index, _ in hits:
        new = new_names[index]
        if new != names[index]:
            node = kept[index]
            kept[index] = _node(new, node.dtype, node.shape, "rename", (node,), (*node.rules, tag))
    result = dict(zip(new_names, kept, strict=True))
    done.nodes = result
    if len(result) != len(new_names):  # a kept name met a renamed one: leave the rule out
        done.nodes = dict(nodes)
        clashes = defaultdict(list, {name: [name] for name in _repeats(new_names)})
    for onto, sources in sorted(clashes.items()):
        done.flag(sources, tag, f"rule {tag} maps {', '.join(sources)} onto {onto}")
    return done


def _repeats(names: list[str]) -> list[str]:
    return [name for name, count in Counter(names).items() if count > 1]


def _transpose(
    rule: Transpose, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> _Applied:
    names = list(nodes)
    done = _Applied(dict(nodes))
    result = done.nodes
    for index, _ in _hits(compile_pattern(rule.match, constants), names):
        done.matched = True
        name = names[index]
        node = result[name]
        rank = len(node.shape)
        axes = rule.axes if rule.axes is not None else (1, 0)
        if rule.axes is None and rank != 2:
            done.flag(
                [name],
                tag,
                f"rule {tag} matches {name}, which has {rank} dimensions, not 2 "
                "(give `axes` to permute more)",
            )
            continue
        if sorted(axes) != list(range(rank)):
            done.flag(
                [name],
                tag,
                f"rule {tag}: axes {list(axes)} are no permutation of the {rank} dimensions "
                f"of {name} {list(node.shape)}",
            )
            continue
        shape = tuple(node.shape[axis] for axis in axes)
        rules = (*node.rules, tag)
        result[name] = _node(
            name, node.dtype, shape, "transpose", (node,), rules, 0, 0, tuple(axes), node.problem
        )
    return done


def _cast(rule: Cast, tag: str, nodes: dict[str, Node], constants: dict[str, str]) -> _Applied:
    names = list(nodes)
    done = _Applied(dict(nodes))
    result = done.nodes
    for index, _ in _hits(compile_pattern(rule.match, constants), names):
        done.matched = True
        node = result[names[index]]
        if node.dtype != rule.dtype:
            name = names[index]
            result[name] = _step(name, "cast", (node,), tag, shape=node.shape, dtype=rule.dtype)
    return done


def _reshape(
    rule: Reshape, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> _Applied:
    names = list(nodes)
    done = _Applied(dict(nodes))
    result = done.nodes
    for index, _ in _hits(compile_pattern(rule.match, constants), names):
        done.matched = True
        name = names[index]
        node = result[name]
        shape = _reshaped(node.shape, rule.shape)
        if shape is None:
            done.flag(
                [name],
                tag,
                f"rule {tag}: {name} {list(node.shape)} cannot take the shape {list(rule.shape)}",
            )
            continue
        result[name] = _step(name, "reshape", (node,), tag, shape=shape)
    return done


def _reshaped(shape: tuple[int, ...], wanted: tuple[int, ...]) -> tuple[int, ...] | None:
    """``wanted`` with its one -1 filled, when it holds the elements of ``shape``."""
    elements = math.prod(shape)
    unknown = [i for i, dim in enumerate(wanted) if dim == -1]
    if len(unknown) > 1 or any(dim < -1 for dim in wanted):
        return None
    if unknown:
        known = math.prod(dim for dim in wanted if dim != -1)
        if known == 0 or elements % known:
            return None
        filled = list(wanted)
        filled[unknown[0]] = elements // known
        return tuple(filled)
    return wanted if math.prod(wanted) == elements else None


def _fuse(rule: Fuse, tag: str, nodes: dict[str, Node], constants: dict[str, str]) -> _Applied:
    sources = [compile_pattern(text, constants) for text in rule.sources]
    target = compile_pattern(rule.target, constants)
    done = _Applied(dict(nodes))
    result = done.nodes
    ordered = sorted(nodes)
    bound = set(sources[0].names)
    unbound = next(
        (text for pattern in (*sources[1:], target) if (text := _unbound(tag, pattern, bound))),
        None,
    )
    axis = rule.axis
    for index, found in _hits(sources[0], ordered):
        name = ordered[index]
        if name not in result:
            continue
        done.matched = True
        if unbound:
            done.flag([name], tag, unbound)
            continue
        values = found.groupdict()
        parts_named = [pattern.fill(values) for pattern in sources]
        if len(set(parts_named)) != len(parts_named):
            twice = next(part for part in parts_named if parts_named.count(part) > 1)
            done.flag(
                [twice], tag, f"rule {tag}: the sources name {twice} twice; fuse distinct tensors"
            )
            continue
        if not all(map(result.__contains__, parts_named)):
            continue
        fused = target.fill(values)
        parts = tuple(map(result.__getitem__, parts_named))
        problem = _fusion_problem(parts, axis, tag)
        if problem is None and fused in result and fused not in parts_named:
            problem = f"rule {tag} fuses {', '.join(parts_named)} onto {fused}, already a tensor"
        if problem is not None:
            done.flag(parts_named, tag, problem)
            continue
        shape = parts[0].shape
        total = sum(part.shape[axis] for part in parts)
        for part in parts_named:
            del result[part]
        result[fused] = _step(
            fused, "fuse", parts, tag, shape=(*shape[:axis], total, *shape[axis + 1 :]), axis=axis
        )
    return done


def _fusion_problem(parts: tuple[Node, ...], axis: int, tag: str) -> str | None:
    """Why ``parts`` cannot be concatenated along ``axis`` (None when they can)."""
    first = parts[0]
    dtype, shape = first.dtype, first.shape
    if not 0 <= axis < len(shape):
        return f"rule {tag}: axis {axis} out of range for {first.name} {list(shape)}"
    rest = shape[:axis] + shape[axis + 1 :]
    for part in parts[1:]:
        other = part.shape
        if part.dtype != dtype or len(other) != len(shape):
            return f"rule {tag}: {', '.join(p.name for p in parts)} differ in dtype or rank"
        if other[:axis] + other[axis + 1 :] != rest:
            listed = ", ".join(str(list(p.shape)) for p in parts)
            return f"rule {tag}: shapes {listed} do not add up along axis {axis}"
    return None


def _split(rule: Split, tag: str, nodes: dict[str, Node], constants: dict[str, str]) -> _Applied:
    source = compile_pattern(rule.source, constants)
    targets = [compile_pattern(text, constants) for text in rule.targets]
    unbound = next(
        (text for pattern in targets if (text := _unbound(tag, pattern, set(source.names)))),
        None,
    )
    done = _Applied(dict(nodes))
    result = done.nodes
    names = list(nodes)
    for index, found in _hits(source, names):
        done.matched = True
        name = names[index]
        node = result[name]
        problem = unbound or _split_problem(rule, tag, node, len(targets))
        new = [] if problem else [pattern.fill(found.groupdict()) for pattern in targets]
        taken = [n for n in new if n in result and n != name]
        if not problem and (taken or len(set(new)) != len(new)):
            problem = f"rule {tag} splits {name} onto {', '.join(taken or new)}, already tensors"
        if problem:
            done.flag([name], tag, problem)
            continue
        total = node.shape[rule.axis]
        sizes = rule.sizes or tuple(total // len(targets) for _ in targets)
        del result[name]
        offset = 0
        for made, size in zip(new, sizes, strict=True):
            shape = (*node.shape[: rule.axis], size, *node.shape[rule.axis + 1 :])
            result[made] = _step(
                made, "split", (node,), tag, shape=shape, axis=rule.axis, offset=offset
            )
            offset += size
    return done


def _split_problem(rule: Split, tag: str, node: Node, count: int) -> str | None:
    if not 0 <= rule.axis < len(node.shape):
        return f"rule {tag}: axis {rule.axis} out of range for {node.name} {list(node.shape)}"
    total = node.shape[rule.axis]
    sizes = rule.sizes or tuple(total // count for _ in range(count))
    if sum(sizes) != total or len(sizes) != count or any(size < 0 for size in sizes):
        return f"rule {tag}: sizes {list(sizes)} do not split {total} of {node.name}"
    return None


def _stack(rule: Stack, tag: str, nodes: dict[str, Node], constants: dict[str, str]) -> _Applied:
    source = compile_pattern(rule.source, constants)
    target = compile_pattern(rule.target, constants)
    done = _Applied(dict(nodes))
    result = done.nodes
    names = list(nodes)
    groups: defaultdict[str, list[tuple[str, str]]] = defaultdict(list)  # target -> (index, name)
    hits = _hits(source, names)
    done.matched = bool(hits)
    static = _stack_problem(rule, tag, source, target, unstack=False)
    if static:
        if hits:
            done.flag([names[index] for index, _ in hits], tag, static)
        return done
    for index, found in hits:
        values = found.groupdict()
        groups[target.fill(values)].append((values[rule.index], names[index]))
    for fused, members in sorted(groups.items()):
        members.sort(key=lambda member: _position(member[0]))
        member_names = [name for _, name in members]
        parts = tuple(result[name] for name in member_names)
        problem = _stacked_problem(rule, tag, fused, members, parts)
        if problem is None and fused in result and fused not in member_names:
            problem = f"rule {tag} stacks onto {fused}, already a tensor"
        if problem is not None:
            done.flag(member_names, tag, problem)
            continue
        shape = parts[0].shape
        for name in member_names:
            del result[name]
        result[fused] = _step(
            fused,
            "stack",
            parts,
            tag,
            shape=(*shape[: rule.axis], len(parts), *shape[rule.axis :]),
            axis=rule.axis,
        )
    return done


def _position(text: str) -> tuple[int, str]:
    return (int(text), text) if text.isdigit() else (-1, text)


def _stack_problem(
    rule: Stack | Unstack, tag: str, source: Pattern, target: Pattern, *, unstack: bool
) -> str | None:
    """Why the rule cannot apply to any tensor as written (None when it can)."""
    indexed, other = (target, source) if unstack else (source, target)
    if rule.index not in indexed.names:
        return f"rule {tag}: {indexed.text!r} does not use the index {{{rule.index}}}"
    if rule.index in other.names:
        return f"rule {tag}: {other.text!r} uses the index {{{rule.index}}} too"
    bound = set(source.names) | ({rule.index} if unstack else set())
    return _unbound(tag, target, bound)


def _stacked_problem(
    rule: Stack, tag: str, fused: str, members: list[tuple[str, str]], parts: tuple[Node, ...]
) -> str | None:
    positions = [position for position, _ in members]
    if positions != [str(i) for i in range(len(positions))]:
        listed = ", ".join(positions)
        return f"rule {tag}: {fused} from positions {listed}, not 0 to {len(positions) - 1}"
    first = parts[0]
    if any(part.dtype != first.dtype or part.shape != first.shape for part in parts):
        kinds = sorted({f"{part.dtype} {list(part.shape)}" for part in parts})
        return f"rule {tag}: the parts of {fused} differ: {', '.join(kinds)}"
    if not 0 <= rule.axis <= len(first.shape):
        return f"rule {tag}: axis {rule.axis} out of range for {fused} {list(first.shape)}"
    return None


def _unstack(
    rule: Unstack, tag: str, nodes: dict[str, Node], constants: dict[str, str]
) -> _Applied:
    source = compile_pattern(rule.source, constants)
    target = compile_pattern(rule.target, constants)
    done = _Applied(dict(nodes))
    result = done.nodes
    names = list(nodes)
    hits = _hits(source, names)
    done.matched = bool(hits)
    static = _stack_problem(rule, tag, source, target, unstack=True)
    for index, found in hits:
        name = names[index]
        node = result[name]
        problem = static
        if problem is None and not 0 <= rule.axis < len(node.shape):
            problem = f"rule {tag}: axis {rule.axis} out of range for {name} {list(node.shape)}"
        count = 0 if problem else node.shape[rule.axis]
        values = found.groupdict()
        new = [target.fill({**values, rule.index: str(i)}) for i in range(count)]
        taken = [n for n in new if n in result and n != name]
        if not problem and taken:
            problem = f"rule {tag} unstacks {name} onto {', '.join(taken[:3])}, already tensors"
        if problem:
            done.flag([name], tag, problem)
            continue
        del result[name]
        shape = (*node.shape[: rule.axis], *node.shape[rule.axis + 1 :])
        for position, made in enumerate(new):
            result[made] = _step(
                made, "unstack", (node,), tag, shape=shape, axis=rule.axis, offset=position
            )
    return done


_APPLY: dict[str, Any] = {
    "rename": _rename,
    "transpose": _transpose,
    "cast": _cast,
    "fuse": _fuse,
    "split": _split,
    "stack": _stack,
    "unstack": _unstack,
    "reshape": _reshape,
}


def expect(reference: dict[str, tuple[str, tuple[int, ...]]], ruleset: RuleSet) -> Expectation:
    """The candidate inventory the rules predict from the reference (name -> (dtype, shape))."""
    nodes = {name: _leaf(name, dtype, shape) for name, (dtype, shape) in reference.items()}
    rules, problems = ruleset.labelled()
    expectation = Expectation(nodes, problems)
    for tag, rule in rules:
        done: _Applied = _APPLY[rule.kind](rule, tag, nodes, ruleset.placeholders)
        nodes = done.nodes
        expectation.problems += done.problems
        if done.matched:
            expectation.applied.add(tag)
    expectation.nodes = nodes
    return expectation


def declared_only(ruleset: RuleSet, names: list[str]) -> tuple[dict[str, str], list[str]]:
    """The candidate tensors of ``names`` a `candidate_only` declaration accounts for (name ->
    its reason), and a problem for each declaration that matches no tensor."""
    found: dict[str, str] = {}
    problems = []
    for declared in ruleset.candidate_only:
        hits = _hits(compile_pattern(declared.match, ruleset.placeholders), names)
        if not hits:
            problems.append(
                f"candidate_only {declared.match!r} matches no candidate tensor "
                "(remove it, or fix its pattern)"
            )
        for index, _ in hits:
            found.setdefault(names[index], declared.reason)
    return found, problems


def saved_as_reference(
    nodes: dict[str, Node],
) -> tuple[dict[str, Node], dict[str, tuple[int, ...]]]:
    """The expected tensors of a checkpoint saved in the reference's layout: a tensor under
    its reference tensor's own name keeps that tensor's shape, whatever the layout rules
    (transpose, reshape) say, and keeps its declared cast. Returns the nodes and, for each
    tensor held so, the shape the layout rules gave it (the candidate's in-memory layout)."""
    held: dict[str, Node] = {}
    in_memory: dict[str, tuple[int, ...]] = {}
    for name, node in nodes.items():
        leaves = node.leaves()
        ops = node.ops()
        if (
            node.problem
            or len(leaves) != 1
            or leaves[0].name != name
            or not ops & LAYOUT_ONLY_OPS
            or not ops <= {*LAYOUT_ONLY_OPS, "cast"}
        ):
            held[name] = node
            continue
        leaf = leaves[0]
        in_memory[name] = node.shape
        held[name] = (
            leaf
            if node.dtype == leaf.dtype
            else _node(name, node.dtype, leaf.shape, "cast", (leaf,), node.rules)
        )
    return held, in_memory


class Declarations:
    """A rule set's declarations compiled once: which candidate tensor a `candidate_only`
    declaration accounts for, which pair a `not_comparable` one names (each answer with
    the declaration's position, for "matches nothing", and its reason)."""

    def __init__(self, ruleset: RuleSet) -> None:
        constants = ruleset.placeholders
        self._only = [
            (compile_pattern(d.match, constants), d.reason) for d in ruleset.candidate_only
        ]
        self._pairs = [
            (compile_pattern(d.reference, constants), compile_pattern(d.candidate, constants), d)
            for d in ruleset.not_comparable
        ]

    def only(self, candidate: str) -> tuple[int, str] | None:
        for index, (pattern, reason) in enumerate(self._only):
            if pattern.regex.fullmatch(candidate):
                return index, reason
        return None

    def pair(self, candidate: str, references: list[str]) -> tuple[int, str] | None:
        for index, (reference, target, declared) in enumerate(self._pairs):
            if target.regex.fullmatch(candidate) and any(
                reference.regex.fullmatch(name) for name in references
            ):
                return index, declared.reason
        return None
