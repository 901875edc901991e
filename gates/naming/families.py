"""Tensor families: a name with its layer and expert numbers as placeholders.

`model.layers.12.mlp.experts.200.up_proj.weight` is in the family
`model.layers.{L}.mlp.experts.{E}.up_proj.weight`, so 60,000 differences of
a full-size checkpoint read as a few dozen families with counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

_PLACEHOLDERS = {"layers": "{L}", "experts": "{E}"}


def family(name: str) -> str:
    parts = name.split(".")
    for index, part in enumerate(parts):
        if part.isdigit():
            before = parts[index - 1] if index else ""
            parts[index] = _PLACEHOLDERS.get(before, "{N}")
    return ".".join(parts)


def families(names: list[str]) -> list[str]:
    """`family` of each name."""
    return list(map(family, names))


def ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """(family, count) of each family, largest first, then by family."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def by_family(names: Iterable[str]) -> list[tuple[str, int, str]]:
    """(family, count, first name) for each family, largest first, then by family."""
    listed = list(names)
    keys = families(listed)
    first = dict(zip(reversed(keys), reversed(listed), strict=True))  # the first one wins
    return [(key, n, first[key]) for key, n in ranked(Counter(keys))]
