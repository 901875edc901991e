"""The survey's classes: a reference tensor under two expected ones (a split's) is one
difference that names both."""

from __future__ import annotations

from gates.checkpoints.survey import classify
from gates.naming.rules import RuleSet, expect


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
