"""The grouped survey (gates/naming/grouped.py, `classify_grouped`) equals the `Node` path
(`expect` and `classify`): the same matched tensors, the same differences in the same order
and the same expected names, on seeded random rules, names and spoiled candidates, on rules
that fix a number, and on the full-size GLM-5.2 key set with the shipped rules. Where the
grouped path cannot decide, it says so (None) and the survey takes the `Node` path."""

from __future__ import annotations

import random

import pytest

from gates.checkpoints.survey import Difference, Found, classify, classify_grouped
from gates.naming.grouped import expect_grouped
from gates.naming.rules import Node, RuleSet, expect
from tests.test_naming_families import Inventory
from tests.test_survey_classify import full_size_pair, random_surveys

Outcome = tuple[int, dict[str, Node], list[Difference], set[str]]


def by_nodes(reference: Inventory, ruleset: RuleSet, found: Found) -> Outcome | None:
    expectation = expect(reference, ruleset)
    if expectation.problems:
        return None
    matched, differences = classify(expectation.nodes, found)
    return len(matched), matched, differences, set(expectation.nodes)


def by_groups(reference: Inventory, ruleset: RuleSet, found: Found) -> Outcome | None:
    grouped = expect_grouped(reference, ruleset)
    if grouped is None:
        return None
    count, matched, differences, names, _ = classify_grouped(grouped.groups, found)
    return count, matched(), differences, names


def test_the_grouped_path_equals_the_node_path_on_random_rules_and_candidates() -> None:
    rng = random.Random(2028)  # noqa: S311 - reproducible test inputs
    decided = explained = 0
    for reference, rules, placeholders, ruleset, _, found in random_surveys(rng, 1500):
        grouped = by_groups(reference, ruleset, found)
        if grouped is None:
            continue
        decided += 1
        assert grouped == by_nodes(reference, ruleset, found), (rules, placeholders, sorted(found))
        explained += sum(d.klass != "structural" for d in grouped[2])
    assert decided > 300, "the grouped path decides most rule sets without a problem or a split"
    assert explained > 1000, "and they explain many differences"


def test_a_rule_that_fixes_a_number_changes_only_that_member() -> None:
    reference = {
        f"model.layers.{layer}.mlp.experts.{expert}.up_proj.weight": ("BF16", (4, 2))
        for layer in range(3)
        for expert in range(2)
    }
    ruleset = RuleSet.model_validate(
        {
            "rules": [
                {"kind": "rename", "source": "model.layers.{mtp}.{rest}", "target": "mtp.{rest}"},
                {"kind": "transpose", "match": "{prefix}.up_proj.weight"},
            ],
            "placeholders": {"mtp": "2"},
        }
    )
    found = dict(expect(reference, ruleset).nodes.items())
    candidate = {name: (node.dtype, node.shape) for name, node in found.items()}
    grouped = by_groups(reference, ruleset, candidate)
    assert grouped is not None
    assert grouped == by_nodes(reference, ruleset, candidate)
    assert {d.klass for d in grouped[2]} == {"naming", "layout"}
    assert sum(d.candidate[0].startswith("mtp.") for d in grouped[2]) == 2


@pytest.mark.parametrize(
    "rules",
    [
        [{"kind": "split", "source": "m.{n}.w", "targets": ["m.{n}.a", "m.{n}.b"]}],
        [{"kind": "rename", "source": "m.{n}.w", "target": "m.w"}],  # two tensors onto one
        [{"kind": "fuse", "sources": ["m.{n}.w", "m.{n}.w"], "target": "m.{n}.f"}],
    ],
)
def test_what_the_grouped_path_cannot_decide_goes_to_the_node_path(
    rules: list[dict[str, object]],
) -> None:
    reference = {f"m.{n}.w": ("F32", (4, 2)) for n in range(3)}
    assert expect_grouped(reference, RuleSet.model_validate({"rules": rules})) is None


SQUARE = ("F32", (2, 2))


@pytest.mark.parametrize(
    ("reference", "rules"),
    [
        # the parts of a fusion carry their numbers in another order than the fused tensor
        (
            {"m.1.x.2.w": SQUARE, "m.3.x.4.w": SQUARE, "n.2.x.1.v": SQUARE, "n.4.x.3.v": SQUARE},
            [
                {"kind": "rename", "source": "m.{p}.x.{q}.w", "target": "n.{q}.x.{p}.w"},
                {
                    "kind": "fuse",
                    "sources": ["n.{p}.x.{q}.w", "n.{p}.x.{q}.v"],
                    "target": "n.{p}.x.{q}.f",
                },
            ],
        ),
        # a rename onto a tensor the rule leaves where it is (a rule problem)
        (
            {"m.1.w": SQUARE, "n.1.w": SQUARE},
            [{"kind": "rename", "source": "m.{n}.w", "target": "n.{n}.w"}],
        ),
        # a new template that still gives one member its own name
        (
            {"1.1": SQUARE, "1.2": SQUARE},
            [{"kind": "rename", "source": "{a}.{b}", "target": "{b}.{a}"}],
        ),
    ],
)
def test_numbers_out_of_line_and_renames_onto_names_are_never_answered_wrongly(
    reference: Inventory, rules: list[dict[str, object]]
) -> None:
    ruleset = RuleSet.model_validate({"rules": rules})
    found = {
        name: (node.dtype, node.shape) for name, node in expect(reference, ruleset).nodes.items()
    }
    grouped = by_groups(reference, ruleset, found)
    assert grouped is None or grouped == by_nodes(reference, ruleset, found)


@pytest.mark.parametrize(
    ("names", "sources", "target"),
    [
        (["m.1.w", "m.2.w", "m.x.w"], ["m.{q}.w", "m.x.w"], "m.{q}.f"),  # m.x.w in three
        (["m.1.g", "m.1.u", "m.1.f"], ["m.{n}.g", "m.{n}.u"], "m.{n}.f"),  # onto a tensor
        (["m.1.g", "m.1.u", "m.2.g"], ["m.{n}.g", "m.{n}.u"], "m.{n}.u"),  # onto a part
        (["m.1.g", "m.1.u", "m.2.g", "m.2.u"], ["m.{n}.g", "m.{n}.u"], "m.f"),  # two onto one
        (["m.1.g", "m.1.u", "m.2.g"], ["m.{n}.g", "m.{n}.u"], "m.{n}.f"),  # m.2.u missing
    ],
)
def test_fusions_that_share_a_tensor_are_never_answered_wrongly(
    names: list[str], sources: list[str], target: str
) -> None:
    reference = dict.fromkeys(names, ("BF16", (2, 3)))
    rule = {"kind": "fuse", "sources": sources, "target": target, "axis": 1}
    ruleset = RuleSet.model_validate({"rules": [rule]})
    nodes = expect(reference, ruleset).nodes
    found = {name: (node.dtype, node.shape) for name, node in nodes.items()}
    grouped = by_groups(reference, ruleset, found)
    assert grouped is None or grouped == by_nodes(reference, ruleset, found)


@pytest.mark.slow
def test_the_full_size_key_set_through_the_shipped_rules() -> None:
    reference, found, ruleset = full_size_pair()
    grouped = by_groups(reference, ruleset, found)
    assert grouped is not None, "the shipped rules take the grouped path"
    assert {d.klass for d in grouped[2]} == {"naming", "layout", "dtype", "structural"}
    assert grouped == by_nodes(reference, ruleset, found)


def test_many_small_families_take_the_node_path() -> None:
    """A group costs about what three nodes cost: 2,000 names in 2,000 families are left to
    the Node path (the grouped one took 2.4x its time on such names), 2,000 in two are not."""
    alone = {f"model.w_{i:05d}.weight": ("BF16", (4, 2)) for i in range(2000)}
    together = {f"model.w.{i}.weight": ("BF16", (4, 2)) for i in range(2000)}
    ruleset = RuleSet.model_validate({"rules": [{"kind": "transpose", "match": "{prefix}.weight"}]})
    assert expect_grouped(alone, ruleset) is None
    assert expect_grouped(together, ruleset) is not None
