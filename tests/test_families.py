"""`families` (all names at once) gives each name the family `family` gives it, on names
built from the parts that decide it: numbers after `layers` and `experts`, numbers after
numbers, empty parts, look-alike words, a non-ASCII digit and a newline."""

from __future__ import annotations

import random

from gates.naming.families import by_family, families, family

PARTS = ["layers", "experts", "1", "12", "007", "x", "", "layers1", "xlayers", "\u00b2", "{L}"]


def test_families_of_all_names_at_once_are_each_names_family() -> None:
    rng = random.Random(21)  # noqa: S311 - reproducible test inputs
    for _ in range(5000):
        names = [
            ".".join(rng.choice(PARTS) for _ in range(rng.randint(1, 6)))
            for _ in range(rng.randint(0, 5))
        ]
        if rng.random() < 0.05:
            names.append("model.layers.3\n.experts.4")
        assert families(names) == [family(name) for name in names]


def test_by_family_counts_and_keeps_the_first_name() -> None:
    names = ["m.layers.2.experts.7.w", "m.layers.10.experts.3.w", "m.layers.1.norm", "m.1.2"]
    assert by_family(names) == [
        ("m.layers.{L}.experts.{E}.w", 2, "m.layers.2.experts.7.w"),
        ("m.layers.{L}.norm", 1, "m.layers.1.norm"),
        ("m.{N}.{N}", 1, "m.1.2"),
    ]
