"""`family`: a name's number parts become `{L}` after `layers`, `{E}` after `experts`, `{N}`
elsewhere; `by_family` counts and keeps the first name of each."""

from __future__ import annotations

import pytest

from gates.naming.families import by_family, families, family

PARTS = ["layers", "experts", "1", "12", "007", "x", "", "layers1", "xlayers", "\u00b2", "{L}"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "model.layers.12.mlp.experts.200.up_proj.weight",
            "model.layers.{L}.mlp.experts.{E}.up_proj.weight",
        ),
        ("model.layers.3.7.w", "model.layers.{L}.{N}.w"),
        ("m.1.2", "m.{N}.{N}"),
        ("m.layers1.3.w", "m.layers1.{N}.w"),  # a number inside a part is no number part
        ("m.fc1.weight", "m.fc1.weight"),
        ("m.layers.\u00b2.w", "m.layers.{L}.w"),  # str.isdigit, as the names say digits
        ("m..layers.", "m..layers."),
    ],
)
def test_a_name_s_family_has_its_number_parts_as_placeholders(name: str, expected: str) -> None:
    assert family(name) == expected
    assert families([name, name]) == [expected, expected]


def test_by_family_counts_and_keeps_the_first_name() -> None:
    names = ["m.layers.2.experts.7.w", "m.layers.10.experts.3.w", "m.layers.1.norm", "m.1.2"]
    assert by_family(names) == [
        ("m.layers.{L}.experts.{E}.w", 2, "m.layers.2.experts.7.w"),
        ("m.layers.{L}.norm", 1, "m.layers.1.norm"),
        ("m.{N}.{N}", 1, "m.1.2"),
    ]
