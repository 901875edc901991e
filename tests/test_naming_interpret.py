"""The one interpreter of rule trees: building a tree bottom up and pushing it down to views
of the built tensor must agree, through the rules the contracts use."""

from __future__ import annotations

import numpy as np
import pytest

from gates.naming.interpret import Arrays, Interpreter, leaf_views
from gates.naming.rules import Node, RuleSet, expect
from gates.safetensors.dtypes import DtypeError, cast, common_dtype, raw_dtype, widen

RULES = RuleSet.model_validate(
    {
        "rules": [
            {"kind": "transpose", "match": "model.{block}.{kind}_proj.weight"},
            {
                "kind": "fuse",
                "axis": 1,
                "target": "model.{block}.up_gate_proj.weight",
                "sources": ["model.{block}.gate_proj.weight", "model.{block}.up_proj.weight"],
            },
            {"kind": "rename", "source": "model.{rest}", "target": "paddle.{rest}"},
        ]
    }
)


class _Leaves(Arrays):
    def __init__(self, values: dict[str, np.ndarray]) -> None:
        self.values = values

    def leaf(self, node: Node) -> np.ndarray:
        return self.values[node.name]


class _Names(Interpreter[str]):
    """A second meaning of the same walk: the tree as text."""

    def leaf(self, node: Node) -> str:
        return node.name

    def transpose(self, node: Node, value: str) -> str:
        return f"T({value})"

    def fuse(self, node: Node, values: list[str]) -> str:
        return f"cat{node.axis}({', '.join(values)})"


def test_built_tensor_and_leaf_views_agree() -> None:
    rng = np.random.default_rng(0)
    shapes = {"model.l.gate_proj.weight": (3, 5), "model.l.up_proj.weight": (3, 5)}
    shapes["model.l.down_proj.weight"] = (5, 3)
    reference = {name: ("F32", shape) for name, shape in shapes.items()}
    values = {name: rng.integers(0, 2**32, shape, dtype="<u4") for name, shape in shapes.items()}
    expectation = expect(reference, RULES)
    assert sorted(expectation.nodes) == [
        "paddle.l.down_proj.weight",
        "paddle.l.up_gate_proj.weight",
    ]
    fused = expectation.nodes["paddle.l.up_gate_proj.weight"]
    assert _Names().run(fused) == "cat1(T(model.l.gate_proj.weight), T(model.l.up_proj.weight))"
    for node in expectation.nodes.values():
        built = _Leaves(values).run(node)
        assert built.shape == node.shape and built.flags.c_contiguous
        views = list(leaf_views(node, built))
        assert [leaf.name for leaf, _ in views] == [leaf.name for leaf in node.leaves()]
        for leaf, view in views:
            assert np.array_equal(view, values[leaf.name])
    assert np.array_equal(
        _Leaves(values).run(fused),
        np.concatenate(
            [values["model.l.gate_proj.weight"].T, values["model.l.up_proj.weight"].T], 1
        ),
    )


def test_a_split_is_no_view_of_the_candidate() -> None:
    node = Node("b", "F32", (2,), "split", (Node("a", "F32", (4,)),), axis=0, offset=2)
    built = _Leaves({"a": np.arange(4, dtype="<u4")}).run(node)
    assert built.tolist() == [2, 3]
    with pytest.raises(ValueError, match="a split step is no view"):
        list(leaf_views(node, built))


def test_dtypes_cast_round_and_widen_exactly() -> None:
    one_and_a_bit = np.array([0x3F808000, 0x3F818000], "<u4")  # ties: to even
    assert cast(one_and_a_bit, "F32", "BF16").tolist() == [0x3F80, 0x3F82]
    bf16 = np.array([0x3F80, 0x8000], "<u2")  # 1.0, -0.0
    assert widen(bf16, "BF16", "F32").tolist() == [0x3F800000, 0x80000000]
    assert widen(bf16, "BF16", "F64").view("<f8").tolist() == [1.0, -0.0]
    assert common_dtype("F16", "BF16") == "F32"
    with pytest.raises(DtypeError, match="cannot widen F32 to BF16 exactly"):
        widen(one_and_a_bit, "F32", "BF16")
    with pytest.raises(DtypeError, match="cannot compare F4 tensors"):
        raw_dtype("F4", "compare")


def _problems(names: list[str], rules: list[dict[str, object]]) -> list[str]:
    reference = dict.fromkeys(names, ("F32", (2, 2)))
    return expect(reference, RuleSet.model_validate({"rules": rules})).problems


def test_rule_problems_name_the_tensors_they_concern() -> None:
    """A rule that cannot apply to some tensors names them; the others take the rule."""
    onto = {"kind": "rename", "name": "onto", "source": "{x}.w", "target": "same"}
    assert _problems(["a.w", "b.w", "c.v"], [onto]) == ["rule onto maps a.w, b.w onto same"]
    unbound = {"kind": "rename", "name": "u", "source": "{x}.w", "target": "{x}.{y}"}
    assert _problems(["a.w"], [unbound]) == [
        "rule u: pattern '{x}.{y}' uses ['y'], which the source does not bind"
    ]
    kept = {"kind": "rename", "name": "k", "source": "a.{x}", "target": "b.{x}"}
    assert _problems(["a.w", "b.w"], [kept]) == ["rule k maps a.w, b.w onto b.w"]
    assert _problems(["b.w", "a.w"], [kept]) == ["rule k maps b.w, a.w onto b.w"]
    flat = {"kind": "transpose", "name": "t", "match": "{x}"}
    reference = {"v": ("F32", (4,)), "m": ("F32", (2, 3))}
    found = expect(reference, RuleSet.model_validate({"rules": [flat]}))
    assert found.problems == [
        "rule t matches v, which has 1 dimensions, not 2 (give `axes` to permute more)"
    ]
    assert found.nodes["m"].shape == (3, 2) and not found.nodes["m"].problem
    assert found.nodes["v"].problem and found.nodes["v"].shape == (4,)
    assert found.applied == {"t"}
    renamed = expect(
        {"a.w": ("F32", (2, 3)), "c": ("F32", (1,))}, RuleSet.model_validate({"rules": [kept]})
    )
    assert list(renamed.nodes) == ["b.w", "c"]
    assert renamed.nodes["b.w"].rules == ("k",)
