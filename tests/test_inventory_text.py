"""The text report of `gates inventory diff` (`render_text`) counts families as a plain
report would: `family` of each name, grouped and counted by plain loops (`sections` here).
Held equal on seeded random surveys (rules, names and spoiled candidates; through the `Node`
path and, where it decides, the grouped path with the tally it counts a group at a time),
on surveys made to catch a shortcut (two rule lists shown alike, a class outside the four,
names no shape decides) and on the full-size GLM-5.2 key set with the shipped rules."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gates.checkpoints.survey import (
    Difference,
    Explained,
    Found,
    Survey,
    classify,
    classify_grouped,
)
from gates.commands.inventory import render_text
from gates.naming.families import family
from gates.naming.grouped import expect_grouped
from gates.naming.rules import RuleSet
from tests.test_naming_families import Inventory
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


def surveyed(
    reference: Inventory,
    found: Found,
    differences: list[Difference],
    names: set[str],
    count: int,
    *,
    tally: dict[Explained, int] | None = None,
) -> Survey:
    extra = [
        Difference("structural", (), (name,), (), f"extra on the candidate side: {name}")
        for name in sorted(set(found) - names)
    ]
    return Survey(len(reference), len(found), count, (*differences, *extra), tally=tally)


def test_the_report_counts_families_as_name_by_name_on_random_surveys() -> None:
    rng = random.Random(2029)  # noqa: S311 - reproducible test inputs
    grouped = explained = tallied = 0
    for reference, _, _, ruleset, nodes, found in random_surveys(rng, 450):
        matched, differences = classify(nodes, found)
        by_nodes = surveyed(reference, found, differences, set(nodes), len(matched))
        assert_sections(by_nodes)
        explained += any(d.klass != "structural" for d in differences)
        groups = expect_grouped(reference, ruleset)
        if groups is not None:
            classified = classify_grouped(groups.groups, found)
            count, _, differences, names, tally = classified
            by_groups = surveyed(reference, found, differences, names, count, tally=tally)
            assert_sections(by_groups)
            assert render_text(DOCUMENT, by_groups) == render_text(DOCUMENT, by_nodes)
            grouped += 1
            tallied += tally is not None and any(d.klass != "structural" for d in differences)
    assert explained > 200, "most random surveys explain some differences"
    assert grouped > 80, "and many take the grouped path too"
    assert tallied > 60, "most of them with the tally counted a group at a time"


@pytest.mark.parametrize(
    "odd",
    [
        ["m.layers.1.w.weight"],  # one its shape decides, like all the others
        ["m.layers.1.w1.weight", "m.layers.2.w2.weight"],  # one shape, two families
        ["m.layers.1.#.weight"],
        ["m.layers.\u00b2.weight"],
        ["m.layers\n.1.w"],
    ],
)
def test_surveys_made_to_catch_a_shortcut(odd: list[str]) -> None:
    """Two lists of rules shown alike are one group; a class outside the four is shown; a
    difference with no reference name is left out; names no shape decides (numbers inside a
    part, a non-ASCII digit, a newline) among many that one does, and a `#`."""
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
    assert_sections(Survey(30, 30, 0, tuple(differences)))


@pytest.mark.slow
def test_the_full_size_key_set_through_the_shipped_rules() -> None:
    reference, found, ruleset = full_size_pair()
    groups = expect_grouped(reference, ruleset)
    assert groups is not None, "the shipped rules take the grouped path"
    count, _, differences, names, tally = classify_grouped(groups.groups, found)
    assert tally is not None, "every difference of the full-size set is made once"
    full = surveyed(reference, found, differences, names, count, tally=tally)
    assert len(full.differences) > 50_000
    assert_sections(full)


def test_a_tensor_classified_twice_leaves_the_count_to_the_differences() -> None:
    """Where one reference tensor's difference is made twice (here a group handed over twice;
    the grouped path's own groups never share a tensor), the later replaces the earlier, so
    the survey cannot count a group at a time: it says so and the report counts the
    differences it hands over."""
    reference = {f"model.layers.{n}.w": ("BF16", (4, 2)) for n in range(4)}
    ruleset = RuleSet.model_validate({"rules": [{"kind": "transpose", "match": "{prefix}.w"}]})
    groups = expect_grouped(reference, ruleset)
    assert groups is not None
    found: Found = dict.fromkeys(reference, ("BF16", (2, 4)))
    once = classify_grouped(groups.groups, found)
    twice = classify_grouped(groups.groups * 2, found)
    assert once.tally == {Explained("layout", ("transpose#1",), "model.layers.{L}.w"): 4}
    assert twice.differences == once.differences
    assert twice.tally is None
    survey = surveyed(reference, found, twice.differences, twice.names, twice.matched_count)
    assert survey.explained == once.tally
    assert_sections(survey)
