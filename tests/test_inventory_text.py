"""The text report of `gates inventory diff` (`render_text`) counts families as a plain
report would: `family` of each name, grouped and counted by plain loops (`sections` here).
Held equal on seeded random surveys (rules, names and spoiled candidates), on surveys made to
catch a shortcut (two rule lists shown alike, a class outside the four, odd names) and on the
full-size GLM-5.2 key set with the shipped rules."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gates.checkpoints.survey import Difference, Found, Survey, classify, extras
from gates.commands.inventory import render_text
from gates.naming.families import family
from gates.naming.rules import Node, expect
from tests.naming_cases import Inventory
from tests.test_survey_classify import full_size_pair, random_surveys

DOCUMENT = {"reference": {"path": "r", "problems": []}, "candidate": {"path": "c", "problems": []}}


def _kinds(count: int) -> str:
    return f"famil{'y' if count == 1 else 'ies'}"


def _ranked(counts: Counter[str]) -> list[str]:
    return sorted(counts, key=lambda kin: (-counts[kin], kin))


def sections(found: Survey) -> list[str]:
    """The report's structural and explained sections, name by name."""
    lines: list[str] = []
    structural = [d for d in found.differences if d.klass == "structural"]
    details: dict[str, str] = {}
    for d in structural:
        details[(d.reference or d.candidate)[0]] = d.detail
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for name in details:
        counts[family(name)] += 1
        first.setdefault(family(name), name)
    if structural:
        lines.append(f"structural: {len(structural)} in {len(counts)} {_kinds(len(counts))}")
        for kin in _ranked(counts)[:10]:
            lines.append(f"  {counts[kin]:>6}  {kin}")
            lines.append(f"          e.g. {first[kin]}: {details[first[kin]]}")
        if len(counts) > 10:
            lines.append(f"  ... and {len(counts) - 10} more (the full list is in the JSON output)")
    groups: dict[str, Counter[str]] = {}
    for d in found.differences:
        if d.klass != "structural" and d.reference:
            label = f"{d.klass:<7} {', '.join(d.rules)}"
            groups.setdefault(label, Counter())[family(d.reference[0])] += 1
    if groups:
        lines.append("explained by rules:")
    for label in sorted(groups):
        counts = groups[label]
        total, kinds = sum(counts.values()), len(counts)
        lines.append(f"  {label}: {total} in {kinds} {_kinds(kinds)}")
        lines += [f"    {counts[kin]:>6}  {kin}" for kin in _ranked(counts)[:3]]
        if kinds > 3:
            lines.append(f"    ... and {kinds - 3} more {_kinds(kinds - 3)}")
    return lines


def assert_sections(found: Survey) -> None:
    """The report after its three lines of counts (no problems, no notes here)."""
    after = render_text(DOCUMENT, found).split("\n", 3)[3:]
    assert "\n".join(after) == "\n".join(sections(found))


def surveyed(reference: Inventory, found: Found, nodes: dict[str, Node]) -> Survey:
    """The survey of ``found`` against the expected ``nodes``, as `survey` makes it."""
    matched, differences = classify(nodes, found)
    differences += extras(found, set(nodes))
    return Survey(len(reference), len(found), matched, tuple(differences))


def test_the_report_counts_families_as_name_by_name_on_random_surveys() -> None:
    rng = random.Random(2029)  # noqa: S311 - reproducible test inputs
    explained = 0
    for reference, _, _, _, nodes, found in random_surveys(rng, 450):
        made = surveyed(reference, found, nodes)
        assert_sections(made)
        explained += any(d.klass != "structural" for d in made.differences)
    assert explained > 200, "most random surveys explain some differences"


@pytest.mark.parametrize(
    "odd",
    [
        ["m.layers.1.w.weight"],
        ["m.layers.1.w1.weight", "m.layers.2.w2.weight"],  # one shape, two families
        ["m.layers.1.#.weight"],
        ["m.layers.\u00b2.weight"],
        ["m.layers\n.1.w"],
    ],
)
def test_surveys_made_to_catch_a_shortcut(odd: list[str]) -> None:
    """Two lists of rules shown alike are one group; a class outside the four is shown; a
    difference with no reference name is left out; names with numbers inside a part, a
    non-ASCII digit, a newline and a `#`."""
    differences = [
        Difference("naming", (f"m.layers.{n}.w",), (f"p.{n}",), ("a, b",), "") for n in range(12)
    ]
    differences += [
        Difference("naming", ("m.layers.3.experts.4.w",), ("q",), ("a", "b"), ""),
        Difference("layout", ("m.layers.3.experts.4.w",), ("q",), ("a", "b"), ""),
        Difference("other", ("m.9.x.10",), ("x",), (), ""),
        Difference("layout", (), ("y",), ("t",), ""),
        *(Difference("dtype", (name,), ("z",), ("c",), "") for name in odd),
        Difference("structural", (odd[-1],), (), (), "missing"),
        Difference("structural", (), ("e.1.w",), (), "extra"),
    ]
    differences += [
        Difference("dtype", (f"m.layers.{n}.experts.{n}.{leaf}",), ("z",), ("c",), "")
        for n, leaf in enumerate("abcdee")
    ]
    assert_sections(Survey(30, 30, {}, tuple(differences)))


@pytest.mark.slow
def test_the_full_size_key_set_through_the_shipped_rules() -> None:
    reference, found, ruleset = full_size_pair()
    full = surveyed(reference, found, expect(reference, ruleset).nodes)
    assert len(full.differences) > 50_000
    assert_sections(full)
