"""The survey's classes built a class at a time equal the classes built name by name: the
same matched tensors and the same differences, in order, over seeded random rules, names
and candidates (a split's tensors, under two expected ones, go name by name)."""

from __future__ import annotations

import random

from gates.checkpoints.survey import classify, classify_one_by_one
from gates.naming.rules import RuleSet, expect
from tests.test_naming_families import random_inventory, random_rule

Found = dict[str, tuple[str, tuple[int, ...]]]


def random_candidate(rng: random.Random, expected: Found, reference: Found) -> Found:
    """Mostly what the rules expect; some tensors dropped, reshaped, recast or as in the
    reference, and a few extra."""
    candidate: Found = {}
    for name, (dtype, shape) in expected.items():
        roll = rng.random()
        if roll >= 0.08:
            reshaped = (*shape, 2) if roll < 0.14 else shape
            candidate[name] = ("F16" if 0.14 <= roll < 0.2 else dtype, reshaped)
    for name, value in reference.items():
        if rng.random() < 0.1:
            candidate[name] = value
    candidate.update({f"extra.{i}": ("F32", (1,)) for i in range(rng.randint(0, 2))})
    return candidate


def test_classes_at_once_equal_classes_name_by_name() -> None:
    rng = random.Random(2027)  # noqa: S311 - reproducible test inputs
    explained = 0
    for _ in range(800):
        reference = random_inventory(rng)
        rules = [random_rule(rng, list(reference)) for _ in range(rng.randint(1, 4))]
        try:
            ruleset = RuleSet.model_validate({"rules": rules})
        except ValueError:
            continue
        try:
            nodes = expect(reference, ruleset).nodes
        except KeyError:
            continue  # a fusion whose sources name one tensor twice: a crash of its own
        expected = {name: (node.dtype, node.shape) for name, node in nodes.items()}
        found = random_candidate(rng, expected, reference)
        matched, differences = classify(nodes, found)
        assert (matched, differences) == classify_one_by_one(nodes, found), (rules, found)
        assert list(matched) == sorted(matched)
        explained += sum(d.klass != "structural" for d in differences)
    assert explained > 1000, "the random rules explain many differences"


def test_a_split_tensor_lists_both_of_its_parts() -> None:
    reference = {"m.w": ("F32", (4, 2)), "m.v": ("F32", (1,))}
    ruleset = RuleSet.model_validate(
        {"rules": [{"kind": "split", "source": "m.w", "targets": ["m.a", "m.b"]}]}
    )
    nodes = expect(reference, ruleset).nodes
    found = {"m.a": ("F32", (2, 2)), "m.b": ("F32", (2, 2)), "m.v": ("F32", (1,))}
    matched, differences = classify(nodes, found)
    assert sorted(matched) == ["m.a", "m.b", "m.v"]
    assert [(d.klass, d.reference, d.candidate, d.detail) for d in differences] == [
        ("naming", ("m.w",), ("m.a", "m.b"), "m.w -> m.a, m.b")
    ]
