"""The survey's classes: a reference tensor under two expected ones (a split's) is one
difference that names both; every difference is written as its fields; the full-size key set
has every class."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from bench.glm52_keyset import load_config, paddle_keyset, reference_keyset
from gates.checkpoints.survey import Found, as_json, classify
from gates.naming.rules import Node, RuleSet, expect
from tests.naming_cases import (
    Inventory,
    random_case,
    random_inventory,
    random_rule,
    shipped_rules,
)


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


class RandomSurvey(NamedTuple):
    reference: Inventory
    rules: list[dict[str, object]]
    placeholders: dict[str, str]
    ruleset: RuleSet
    nodes: dict[str, Node]
    found: Found


def full_size_pair() -> tuple[Inventory, Found, RuleSet]:
    """The GLM-5.2 key set, the candidate Paddle makes of it (the MTP indexer left out)
    and the shipped rules."""
    config = load_config()
    mtp = config["num_hidden_layers"]
    reference = reference_keyset(config)
    found = paddle_keyset(reference, mtp, drop_mtp_indexer=True)
    return reference, found, shipped_rules(str(mtp))


def random_surveys(rng: random.Random, cases: int) -> Iterator[RandomSurvey]:
    """Of ``cases`` random cases, each whose rules validate and apply: its expected nodes
    and a candidate spoiled from them."""
    for _ in range(cases):
        reference, rules, placeholders, ruleset = random_case(rng)
        if ruleset is None:
            continue
        try:
            nodes = expect(reference, ruleset).nodes
        except ValueError:
            continue
        found = _spoiled(rng, nodes)
        yield RandomSurvey(reference, rules, placeholders, ruleset, nodes, found)


def _spoiled(rng: random.Random, nodes: dict[str, Node]) -> Found:
    """The candidate the rules expect, with some tensors dropped, changed or added."""
    found: Found = {}
    for name, node in nodes.items():
        roll = rng.random()
        if roll < 0.1:
            continue
        if roll < 0.2:
            found[name] = ("F64", node.shape)
        elif roll < 0.25:
            found[name] = (node.dtype, (*node.shape, 1))
        else:
            found[name] = (node.dtype, node.shape)
    if rng.random() < 0.3:
        found["extra.weight"] = ("BF16", (1,))
    return found


def test_every_difference_is_written_as_its_fields_on_random_rules_and_candidates() -> None:
    rng = random.Random(2027)  # noqa: S311 - reproducible test inputs
    explained = 0
    for _ in range(200):
        reference = random_inventory(rng)
        rules = [random_rule(rng, list(reference)) for _ in range(rng.randint(1, 5))]
        try:
            ruleset = RuleSet.model_validate({"rules": rules})
            nodes = expect(reference, ruleset).nodes
        except ValueError:
            continue
        found = _spoiled(rng, nodes)
        matched, differences = classify(nodes, found)
        assert set(matched) == {
            n
            for n, node in nodes.items()
            if found.get(n) == (node.dtype, node.shape) and not node.problem
        }
        written = [
            {
                "class": d.klass,
                "reference": list(d.reference),
                "candidate": list(d.candidate),
                "rules": list(d.rules),
                "detail": d.detail,
            }
            for d in differences
        ]
        assert json.dumps(as_json(differences)) == json.dumps(written)
        explained += sum(d.klass != "structural" for d in differences)
    assert explained > 250, "the random rules explain many differences"


@pytest.mark.slow
def test_the_full_size_key_set_has_every_class_and_only_the_indexer_is_structural() -> None:
    config = load_config()
    mtp = config["num_hidden_layers"]
    reference = reference_keyset(config)
    nodes = expect(reference, shipped_rules(str(mtp))).nodes
    found = paddle_keyset(reference, mtp, drop_mtp_indexer=True)
    matched, differences = classify(nodes, found)
    assert {d.klass for d in differences} == {"naming", "layout", "dtype", "structural"}
    structural = [d.reference[0] for d in differences if d.klass == "structural"]
    assert len(structural) == 5
    assert all(f"layers.{mtp}.self_attn.indexer." in name for name in structural)
    assert len(matched) == len(found)


def test_a_fusion_over_transposes_of_renamed_tensors_names_both_sources() -> None:
    reference: Found = {"m.0.up.weight": ("BF16", (2, 4)), "m.0.gate.weight": ("BF16", (2, 4))}
    ruleset = RuleSet.model_validate(
        {
            "rules": [
                {"kind": "rename", "source": "m.{n}.up.weight", "target": "m.{n}.u.weight"},
                {"kind": "transpose", "match": "m.{n}.{w}.weight"},
                {
                    "kind": "fuse",
                    "sources": ["m.{n}.u.weight", "m.{n}.gate.weight"],
                    "target": "m.{n}.ug.weight",
                    "axis": 1,
                },
            ]
        }
    )
    nodes = expect(reference, ruleset).nodes
    assert [child.children[0].op for child in nodes["m.0.ug.weight"].children] == ["rename", "leaf"]
    found: Found = {"m.0.ug.weight": ("BF16", (4, 4))}
    _, differences = classify(nodes, found)
    assert [(d.klass, d.reference, d.candidate) for d in differences] == [
        ("naming", ("m.0.gate.weight",), ("m.0.ug.weight",)),
        ("naming", ("m.0.up.weight",), ("m.0.ug.weight",)),
    ]
