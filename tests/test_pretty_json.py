"""`pretty_json` (and `pretty_json_bytes`) write exactly what `json.dumps(..., sort_keys=True,
indent=2, ensure_ascii=False, allow_nan=False)` writes, on random documents and odd values, and
`indented_json` what `json.dumps(..., indent=2)` writes with either key order and escaping;
orjson writes the documents it can write the same, and only those."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.core.canonical import _orjson_indented, indented_json, pretty_json, pretty_json_bytes

ATOMS: list[Any] = [
    0,
    -1,
    2**70,
    1.5,
    -0.0,
    1e300,
    5e-324,
    True,
    False,
    None,
    "",
    "plain",
    'quote " and \\ backslash',
    "tab\tnewline\n\x00\x1f\x7f",
    "unicode é 漢 \U0001f600 \u2028",
    "lone \ud800 surrogate",
]


def document(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 5 or roll < 0.4:
        return rng.choice(ATOMS)
    if roll < 0.7:
        return [document(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if roll < 0.75:
        return tuple(document(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    keys = ["b", "a", "é", "", "z\n", "10", "9"]
    return {rng.choice(keys): document(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def expected(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def assert_written_as_json_dumps_writes(value: Any) -> None:
    assert pretty_json(value) == expected(value)
    try:
        encoded = expected(value).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no bytes to write, as before
        with pytest.raises(UnicodeEncodeError):
            pretty_json_bytes(value)
    else:
        assert pretty_json_bytes(value) == encoded
    for sort_keys in (False, True):
        for ensure_ascii in (False, True):
            written = indented_json(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
            assert written == json.dumps(
                value, indent=2, sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=False
            )


@pytest.mark.slow
def test_random_documents_are_written_as_json_dumps_writes_them() -> None:
    rng = random.Random(5)  # noqa: S311 - reproducible test inputs
    for _ in range(3000):
        value = document(rng)
        assert_written_as_json_dumps_writes(value)


class Str(str):
    __slots__ = ()


@pytest.mark.parametrize(
    "value",
    [
        {1: "int key", 2.5: "float key"},
        {"x": Str("a str subclass")},
        [
            [
                [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            [
                                                                                                                                                                                                                [
                                                                                                                                                                                                                    [
                                                                                                                                                                                                                        [
                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                    []
                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                ]
                                                                                                                                                                                                            ]
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ]
            ]
        ],
    ],
)
def test_odd_values_are_left_to_json_dumps(value: Any) -> None:
    assert pretty_json(value) == expected(value)


@pytest.mark.parametrize("value", [{"a": float("nan")}, [float("inf")], {"a": object()}])
def test_what_json_dumps_refuses_is_refused(value: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        expected(value)
    with pytest.raises((ValueError, TypeError)):
        pretty_json(value)


def records(rng: random.Random) -> list[Any]:
    """A list of flat records (the shape of a survey's differences), sometimes spoiled."""
    strings = [a for a in ATOMS if isinstance(a, str)] + ["%s", "100%", "%(x)s", *LOOKALIKES]
    keys = rng.sample(["class", "reference", "%s", "é", "", "z\n", "b", "a"], rng.randint(1, 5))
    kinds = {key: rng.random() < 0.5 for key in keys}  # a list column or a string column

    def record() -> dict[str, Any]:
        return {
            key: rng.sample(strings, rng.randint(0, 3)) if kinds[key] else rng.choice(strings)
            for key in keys
        }

    rows = [record() for _ in range(rng.randint(1, 6))]
    spoil = rng.random()
    if spoil < 0.1:
        rows[-1] = dict(reversed(rows[-1].items()))  # the same keys in another order
    elif spoil < 0.2:
        rows[-1][keys[0]] = rng.choice([1, None, ("a",), Str("s"), [Str("s")], {"k": "v"}])
    elif spoil < 0.3:
        rows.append(rng.choice(["text", [], {}, {"other": "keys"}]))
    elif spoil < 0.35:  # as many keys, one of them another
        rows[-1] = {("other" if key == keys[0] else key): v for key, v in rows[-1].items()}
    elif spoil < 0.4:  # a key fewer or one more
        rows[-1] = dict(list(rows[-1].items())[1:]) if rng.random() < 0.5 else {**rows[-1], "x": ""}
    elif spoil < 0.45:
        rows[-1][keys[-1]] = rng.choice([[1], [None], [["a"]], [("a",)], ["a", 2]])
    return rows


#: strings that look like the writer's own layout (brackets, commas, indentation)
LOOKALIKES = [
    "]",
    "[",
    "],\n      [",
    '"],\n      ["',
    "],",
    '"]',
    '["',
    "\\",
    '\\"',
    "]\n[",
    "\n      ",
]


def nested(rng: random.Random, value: Any) -> Any:
    """``value`` at a random depth: the writer's indentation differs by level."""
    for _ in range(rng.randint(0, 3)):
        value = rng.choice([[value], {"differences": value, "format": "x"}, {"a": [value, "b"]}])
    return value


@pytest.mark.slow
def test_lists_of_records_are_written_as_json_dumps_writes_them() -> None:
    rng = random.Random(21)  # noqa: S311 - reproducible test inputs
    for _ in range(3000):
        value: Any = nested(rng, records(rng))
        assert_written_as_json_dumps_writes(value)


def survey_records(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Differences shaped as a survey writes them, with empty lists at either end."""
    names = ["model.layers.1.w", "lm_head.weight", "a]b", 'q"uote', "é", "\n", *LOOKALIKES]

    def listed() -> list[str]:
        return rng.sample(names, rng.choice([0, 1, 1, 2, 3]))

    return [
        {
            "class": rng.choice(["naming", "layout", "dtype", "structural"]),
            "reference": listed(),
            "candidate": listed(),
            "rules": listed(),
            "detail": rng.choice(names) + " -> " + rng.choice(names),
        }
        for _ in range(count)
    ]


def test_survey_differences_are_written_as_json_dumps_writes_them() -> None:
    """The fast lane's share of the record writer: survey-shaped lists, each key order and
    escaping, at several depths."""
    rng = random.Random(8)  # noqa: S311 - reproducible test inputs
    for _ in range(60):
        value = nested(rng, survey_records(rng, rng.randint(1, 40)))
        assert_written_as_json_dumps_writes(value)


#: JSON documents as Python builds them, with what orjson writes otherwise or refuses:
#: floats (exponents, NaN), ints beyond 64 bits, lone surrogates, non-string keys, tuples
ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None), max_size=6)
    | st.text(st.characters(categories=["Cs", "Cc", "Ll"]), max_size=4),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=4)
        | st.dictionaries(st.integers(-3, 3), inner, max_size=2)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(ANY_JSON)
def test_any_document_is_written_as_json_dumps_writes_it(value: Any) -> None:
    assert_written_as_json_dumps_writes(value)


@settings(max_examples=200, deadline=None)
@given(ANY_JSON)
def test_orjson_writes_only_what_json_dumps_writes(value: Any) -> None:
    for sort_keys in (False, True):
        written = _orjson_indented(value, sort_keys=sort_keys, newline=False)
        if written is not None:
            dumped = json.dumps(value, indent=2, sort_keys=sort_keys, ensure_ascii=False)
            assert written == dumped.encode("utf-8")


def test_orjson_writes_plain_documents() -> None:
    """The fast path is taken where it can be: survey-shaped documents and plain values at
    depth (else the tests above would pass on the slow writer alone)."""
    rng = random.Random(3)  # noqa: S311 - reproducible test inputs
    plain = [
        {"differences": survey_records(rng, 50), "counts": {"naming": 3}, "valid": True},
        [None, True, 2**64 - 1, -(2**63), "é\x7f\u2028", ("t", [])],
        nested(rng, [[[{"": {}}]]]),
    ]
    for value in plain:
        assert _orjson_indented(value, sort_keys=True, newline=True) == expected(value).encode()


cycle: list[Any] = []
cycle.append(cycle)
branching: list[Any] = []
branching += [branching, branching]


@pytest.mark.parametrize(
    "value",
    [
        {"loss": 1.5},
        [[1e-05]],
        {"a": [float("nan")]},
        2**64,
        [-(2**63) - 1],
        "lone \ud800",
        {1: "int key"},
        {"x": Str("a str subclass")},
        {"x": [True, Str("s")]},
        cycle,
        branching,
    ],
)
def test_orjson_leaves_the_rest_to_the_other_writer(value: Any) -> None:
    assert _orjson_indented(value, sort_keys=True, newline=True) is None


def test_a_cycle_is_refused_as_json_dumps_refuses_it() -> None:
    for value in (cycle, branching):
        with pytest.raises(ValueError, match="Circular"):
            pretty_json(value)
