"""`pretty_json` writes exactly what `json.dumps(..., sort_keys=True, indent=2,
ensure_ascii=False, allow_nan=False)` writes, on random documents and odd values, and
`indented_json` what `json.dumps(..., indent=2)` writes with either key order and escaping."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from gates.canonical import indented_json, pretty_json

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
