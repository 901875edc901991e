"""`families` (all names at once) gives each name the family `family` gives it, on names
built from the parts that decide it: numbers after `layers` and `experts`, numbers after
numbers, empty parts, look-alike words, a non-ASCII digit and a newline. `template_family`
gives the family of every name its template makes, or declines."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.naming.families import by_family, families, family, template_family

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


def test_families_by_shape_are_each_names_family() -> None:
    """Many names a call, their numbers mostly whole parts (the families of their shapes) and
    now and then a number inside a part (one shape, two families), a `#`, a non-ASCII digit
    or a newline: every way gives each name the family `family` gives it."""
    rng = random.Random(22)  # noqa: S311 - reproducible test inputs
    words, numbers = ["model", "layers", "experts", "mlp", "w", "", "{N}"], ["0", "7", "12", "007"]
    odd = ["w1", "w2", "1x", "2x", "#", "1#", "\u00b2", "a\nb"]
    whole = 0
    for _ in range(2000):
        names = [
            ".".join(rng.choice(words + numbers) for _ in range(rng.randint(1, 7)))
            for _ in range(rng.randint(0, 30))
        ]
        for _ in range(rng.randint(0, 3) if rng.random() < 0.3 else 0):
            names.insert(rng.randint(0, len(names)), f"m.{rng.choice(odd)}.3.w")
        whole += not any(part in odd for name in names for part in name.split("."))
        assert families(names) == [family(name) for name in names]
    assert whole > 1000, "most calls find every number a whole part"


def test_families_of_many_names_are_each_names_family() -> None:
    """Tens of thousands of names, as a full-size survey has, with stretches of names no
    shape decides (a number inside a part, a non-ASCII digit, a newline) among them."""
    rng = random.Random(23)  # noqa: S311 - reproducible test inputs
    names = [
        f"model.layers.{layer}.mlp.experts.{expert}.{leaf}.weight"
        for layer in range(40)
        for expert in range(256)
        for leaf in ("up_proj", "down_proj")
    ]
    for odd in ("w{}", "\u00b2{}", "a\nb{}"):
        start = rng.randrange(len(names))
        names[start : start + 50] = [f"model.layers.3.{odd.format(n % 3)}.{n}" for n in range(50)]
    assert families(names) == [family(name) for name in names]


#: a template's parts: words, digits, a field alone, and fields a part shares (inside a word,
#: next to another field, with a format spec or conversion), and braces that are text
WHOLE = st.sampled_from(["model", "layers", "experts", "mlp", "w1", "", "0", "12", "{{L}}"])
FIELD = st.sampled_from(["{0}", "{1}", "{2}"])
SHARED = st.sampled_from(["fc{0}", "{1}x", "{0}{1}", "{0:3}", "{1!s}", "{0}}}}", "{{{0}"])
DIGITS = st.text(st.sampled_from("0123456789"), min_size=1, max_size=4)


@pytest.mark.parametrize("template", ["a.{", "a.}", "a.{0", "{0}.{1", "{0[}.x"])
def test_a_template_str_format_cannot_parse_has_no_family(template: str) -> None:
    assert template_family(template) is None


@given(
    st.lists(st.one_of(WHOLE, FIELD, SHARED), min_size=1, max_size=7),
    st.lists(st.tuples(DIGITS, DIGITS, DIGITS), min_size=1, max_size=5),
)
def test_a_template_s_family_is_the_family_of_every_name_it_makes(
    parts: list[str], numbers: list[tuple[str, str, str]]
) -> None:
    template = ".".join(parts)
    decided = template_family(template)
    if all(part in ("{0}", "{1}", "{2}") or "{" not in part.replace("{{", "") for part in parts):
        assert decided is not None, "every field stands alone between dots"
    if decided is not None:
        assert {family(template.format(*each)) for each in numbers} == {decided}
