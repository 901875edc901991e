"""Tensor families: a name with its layer and expert numbers as placeholders.

`model.layers.12.mlp.experts.200.up_proj.weight` is in the family
`model.layers.{L}.mlp.experts.{E}.up_proj.weight`, so 60,000 differences of
a full-size checkpoint read as a few dozen families with counts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from string import Formatter

_PLACEHOLDERS = {"layers": "{L}", "experts": "{E}"}


def family(name: str) -> str:
    parts = name.split(".")
    for index, part in enumerate(parts):
        if part.isdigit():
            before = parts[index - 1] if index else ""
            parts[index] = _PLACEHOLDERS.get(before, "{N}")
    return ".".join(parts)


# `family` for ASCII names, run over all of them at once, each name between dots: a number
# part after `layers`, then after `experts`, then any other (the earlier ones are
# placeholders by then, as in `family`, which looks at the part before as it has already
# been replaced). Each pattern starts with a literal dot, which the regex engine searches in
# C (a lookbehind first was tried at every character: three times slower)
_NUMBER_PARTS = (
    (re.compile(r"\.layers\.[0-9]+(?=\.)"), ".layers.{L}"),
    (re.compile(r"\.experts\.[0-9]+(?=\.)"), ".experts.{E}"),
    (re.compile(r"\.[0-9]+(?=\.)"), ".{N}"),
)


def _substituted(names: list[str]) -> list[str]:
    """`family` of each ASCII name without a newline, by the three substitutions."""
    joined = "." + ".\n.".join(names) + "."
    for pattern, placeholder in _NUMBER_PARTS:
        joined = pattern.sub(placeholder, joined)
    return joined[1:-1].split(".\n.")


# A name's shape: each of its digits a zero. Where every digit stands in a part of digits
# alone, the names of one shape are in its family (`family` tells a number part only by its
# being digits and by the part before it), and 60,000 names have a few dozen shapes.
ZEROED = str.maketrans("123456789", "0" * 9)


def digits_alone(shape: str) -> bool:
    """Every digit of the shape stands in a part of digits alone (`fc1` and `fc2`, one
    shape, are two families)."""
    return not any("0" in part and part.strip("0") for part in shape.split("."))


def _in_families(names: list[str]) -> list[str]:
    """`family` of each name, where the names are ASCII (`str.isdigit` and `[0-9]` agree
    there) and hold no newline: the family of each distinct shape where every digit stands
    alone (a translation, a split and a lookup per name, in C), else the substitutions."""
    joined = "\n".join(names)
    shapes = joined.translate(ZEROED).split("\n")
    if not joined.isascii() or len(shapes) != len(names):  # a newline in a name, or no name
        return list(map(family, names))
    distinct = dict.fromkeys(shapes)
    if all(map(digits_alone, distinct)):
        of_shape = {shape: family(shape) for shape in distinct}
        return list(map(of_shape.__getitem__, shapes))
    return _substituted(names)


#: names at a time: their text joined stays in the processor's cache (at 60,000 names, a fifth
#: less CPU than all at once)
_CHUNK = 4096


def families(names: list[str]) -> list[str]:
    """`family` of each name, `_CHUNK` names at a time."""
    found: list[str] = []
    for start in range(0, len(names), _CHUNK):
        found += _in_families(names[start : start + _CHUNK])
    return found


def template_family(template: str) -> str | None:
    """The family of every name ``template`` (a `str.format` template) makes from number parts
    (strings of digits), where each of its fields stands alone between dots, as a family's
    fields do (gates/naming/by_family.py); else None (`fc{0}` makes names of many families,
    and a field with a format spec or next to another is not a number part).

    `family` tells a number part by its being digits and by the part before it, so where
    every field is a part of its own, the parts it replaces are the same in every name."""
    made, after_field = "", False
    try:
        parsed = list(Formatter().parse(template))
    except ValueError:
        return None
    for literal, field, spec, conversion in parsed:
        if after_field and not literal.startswith("."):
            return None  # the field before ends inside a part, or meets the next field
        made += literal
        after_field = field is not None
        if not after_field:
            continue
        if not str(field).isdigit() or spec or conversion or made[-1:] not in ("", "."):
            return None
        made += "0"
    return family(made)


def ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """(family, count) of each family, largest first, then by family."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def by_family(names: Iterable[str]) -> list[tuple[str, int, str]]:
    """(family, count, first name) for each family, largest first, then by family."""
    listed = list(names)
    keys = families(listed)
    first = dict(zip(reversed(keys), reversed(listed), strict=True))  # the first one wins
    return [(key, n, first[key]) for key, n in ranked(Counter(keys))]
