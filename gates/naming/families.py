"""Tensor families: a name with its layer and expert numbers as placeholders.

`model.layers.12.mlp.experts.200.up_proj.weight` is in the family
`model.layers.{L}.mlp.experts.{E}.up_proj.weight`, so 60,000 differences of
a full-size checkpoint read as a few dozen families with counts.
"""

from __future__ import annotations

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


def by_family(names: Iterable[str]) -> list[tuple[str, int, str]]:
    """(family, count, first name) for each family, largest first, then by family."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for name in names:
        key = family(name)
        counts[key] += 1
        first.setdefault(key, name)
    return [
        (key, n, first[key]) for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def grouped(items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Names grouped under a key (e.g. the rules that explain them), keys sorted."""
    groups: defaultdict[str, list[str]] = defaultdict(list)
    for key, name in items:
        groups[key].append(name)
    return dict(sorted(groups.items()))
