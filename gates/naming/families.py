"""Tensor families: a name with its layer and expert numbers as placeholders.

`model.layers.12.mlp.experts.200.up_proj.weight` is in the family
`model.layers.{L}.mlp.experts.{E}.up_proj.weight`, so 60,000 differences of
a full-size checkpoint read as a few dozen families with counts.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

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


def families(names: list[str]) -> list[str]:
    """`family` of each name: three substitutions over the names joined, where they are
    ASCII (`str.isdigit` and `[0-9]` agree there) and hold no newline."""
    joined = "." + ".\n.".join(names) + "."
    if not names or not joined.isascii() or joined.count("\n") != len(names) - 1:
        return list(map(family, names))
    for pattern, placeholder in _NUMBER_PARTS:
        joined = pattern.sub(placeholder, joined)
    return joined[1:-1].split(".\n.")


def by_family(names: Iterable[str]) -> list[tuple[str, int, str]]:
    """(family, count, first name) for each family, largest first, then by family."""
    listed = list(names)
    keys = families(listed)
    counts = Counter(keys)
    first = dict(zip(reversed(keys), reversed(listed), strict=True))  # the first one wins
    return [
        (key, n, first[key]) for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def grouped(items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Names grouped under a key (e.g. the rules that explain them), keys sorted."""
    groups: defaultdict[str, list[str]] = defaultdict(list)
    for key, name in items:
        groups[key].append(name)
    return dict(sorted(groups.items()))
