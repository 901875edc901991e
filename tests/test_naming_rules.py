"""The rule engine (gates/naming/rules.py) on the shapes of real naming: a rule that fixes
one number, a fusion that names one tensor twice, and the full-size GLM-5.2 key set through
the shipped rules, held to the Paddle key set bench/glm52_keyset.py builds without gates'
engine."""

from __future__ import annotations

import pytest

from bench.glm52_keyset import load_config, paddle_keyset, reference_keyset
from gates.naming.rules import RuleSet, expect
from tests.naming_cases import shipped_rules


def test_a_rule_that_fixes_a_number_changes_only_that_member() -> None:
    reference = {f"model.layers.{n}.mlp.up_proj.weight": ("BF16", (2, 3)) for n in range(5)}
    ruleset = RuleSet.model_validate(
        {
            "rules": [
                {"kind": "transpose", "match": "model.layers.3.{rest}"},
                {"kind": "rename", "source": "model.{rest}", "target": "paddle.{rest}"},
            ]
        }
    )
    found = expect(reference, ruleset)
    assert found.problems == []
    shapes = {name: node.shape for name, node in found.nodes.items()}
    assert shapes["paddle.layers.3.mlp.up_proj.weight"] == (3, 2)
    assert shapes["paddle.layers.4.mlp.up_proj.weight"] == (2, 3)


def test_a_fusion_that_names_one_tensor_twice_is_a_rule_problem_not_a_crash() -> None:
    reference = dict.fromkeys(["m.1.g", "m.1.u"], ("BF16", (2, 3)))
    ruleset = RuleSet.model_validate(
        {"rules": [{"kind": "fuse", "sources": ["m.{n}.g", "m.{n}.g"], "target": "m.{n}.f"}]}
    )
    assert expect(reference, ruleset).problems == [
        "rule fuse#1: the sources name m.1.g twice; fuse distinct tensors"
    ]


@pytest.mark.slow
def test_the_full_size_key_set_through_the_shipped_rules_is_paddle_s() -> None:
    config = load_config()
    mtp = config["num_hidden_layers"]
    reference = reference_keyset(config)
    found = expect(reference, shipped_rules(str(mtp)))
    assert found.problems == []
    expected = {name: (node.dtype, node.shape) for name, node in found.nodes.items()}
    assert expected == paddle_keyset(reference, mtp, drop_mtp_indexer=False)
