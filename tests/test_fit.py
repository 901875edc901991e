"""The quick check of a survey's differences in C (gates/outputs/_fit.c) against its Python
reference (`python_differences_fit`): the same answer on random valid and spoiled
differences (rows of other types, keys missing, added or renamed, keys of a str subclass,
values of every odd type, lists and tuples of them, subclasses of str, list, tuple and
dict), and False from both for a key that only compares equal to one of the five; a
full-size survey's 59,480 differences are vouched for; bad arguments are refused, a
frozenset subclass that could run Python code during the check among them."""

from __future__ import annotations

import copy
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from gates.checkpoints.survey import as_json, classify_grouped, extras
from gates.naming.grouped import expect_grouped
from gates.outputs import structure_parity
from gates.outputs.structure_parity import (
    CLASSES,
    DIFFERENCE_KEYS,
    Difference,
    python_differences_fit,
)
from tests.helpers import needs_compiler
from tests.test_output_quick_check import ODD, Str, differences, spoil_difference
from tests.test_survey_classify import full_size_pair

try:
    from gates.outputs import _fit as native
except ImportError:  # no C compiler at install: test_the_install_built_the_c_check says more
    native = None

needs_native = pytest.mark.skipif(
    native is None, reason="gates/outputs/_fit.c was not compiled at install (no C compiler)"
)
STRINGS = ("class", "detail")
LISTS = ("reference", "candidate", "rules")


class Listed(list[Any]):
    __slots__ = ()


class Tupled(tuple[Any, ...]):
    __slots__ = ()


class Mapped(dict[str, Any]):
    __slots__ = ()


class Choices(frozenset[str]):
    __slots__ = ()


class LooksLike:
    """A key that is no str but hashes and compares as ``text`` does."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return other == self.text


class Pretends(str):
    """A str key that compares equal to ``"detail"`` whatever its text."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash("detail")

    def __eq__(self, other: object) -> bool:
        return other == "detail"


def native_fit(rows: object) -> bool:
    assert native is not None
    return native.rows_fit(rows, STRINGS, LISTS, "class", CLASSES)


#: what a row, a value or a name may become beyond test_output_quick_check's ODD
STRANGE: list[Any] = [
    Listed(["a"]),
    Tupled(("a",)),
    Mapped({"class": "naming"}),
    OrderedDict(a="b"),
    ("a", 1),
    ["a", Str("b")],
    ("a", None),
    Str("other"),
]


def spoil_more(data: st.DataObject, row: object) -> object:
    """A row made stranger: its container, a key of a str subclass, one of STRANGE."""
    how = data.draw(st.sampled_from(["as", "str key", "value", "none"]))
    if type(row) is not dict or how == "none":
        return row
    if how == "as":
        return data.draw(st.sampled_from([Mapped, OrderedDict, tuple]))(row)
    key = data.draw(st.sampled_from(DIFFERENCE_KEYS))
    if how == "str key" and key in row:
        row[Str(key)] = row.pop(key)
    else:
        row[key] = data.draw(st.sampled_from([*STRANGE, *ODD]))
    return row


@needs_native
@settings(max_examples=400, deadline=None)
@given(differences, st.data())
def test_the_c_check_answers_as_the_python_check(
    listed: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows: Any = copy.deepcopy(listed)
    for _ in range(data.draw(st.integers(min_value=0, max_value=3)) if rows else 0):
        at = data.draw(st.integers(min_value=0, max_value=len(rows) - 1))
        rows[at] = spoil_more(data, spoil_difference(data, rows[at]))
    if data.draw(st.integers(0, 9)) == 0:
        rows = data.draw(st.sampled_from([tuple, Listed]))(rows)
    answer = native_fit(rows)
    assert answer == python_differences_fit(rows)
    assert structure_parity.differences_fit(rows) == answer, "the check takes the C one"


@needs_native
def test_every_spoil_of_one_valid_row_answers_as_python() -> None:
    row = {"class": "layout", "reference": ("a",), "candidate": ["b"], "rules": (), "detail": ""}
    assert native_fit([row]) and python_differences_fit([row])
    for key in DIFFERENCE_KEYS:
        for odd in [*ODD, *STRANGE]:
            spoiled = [row, {**row, key: odd}]
            assert native_fit(spoiled) == python_differences_fit(spoiled), (key, odd)
        missing = {name: value for name, value in row.items() if name != key}
        assert not native_fit([missing]) and not python_differences_fit([missing])
        renamed = {**missing, f"{key} ": row[key]}
        assert not native_fit([renamed]) and not python_differences_fit([renamed])
    assert not native_fit([{**row, "extra": ""}])
    assert native_fit([]) and not native_fit(()) and not native_fit(None)


@pytest.mark.parametrize("key", [LooksLike("detail"), Pretends("zzz")])
def test_a_key_that_only_compares_equal_is_left_to_the_model(key: object) -> None:
    """The model refuses both rows (a key that is no str; an extra key "zzz"), so neither
    check may vouch for them; Python's used to, looking the keys up by their __eq__."""
    row: dict[Any, Any] = {"class": "naming", "reference": [], "candidate": [], "rules": []}
    row[key] = "a -> b"
    with pytest.raises(ValidationError):
        TypeAdapter(list[Difference]).validate_python([row])
    assert not python_differences_fit([row])
    assert native is None or not native_fit([row])


@needs_native
@pytest.mark.slow
def test_a_full_size_survey_s_differences_are_vouched_for() -> None:
    reference, found, ruleset = full_size_pair()
    groups = expect_grouped(reference, ruleset)
    assert groups is not None
    classified = classify_grouped(groups.groups, found)
    rows = as_json([*classified.differences, *extras(found, classified.names)])
    assert len(rows) > 50_000
    assert native_fit(rows) and python_differences_fit(rows)
    rows[-1] = {**rows[-1], "rules": [*rows[-1]["rules"], 1]}
    assert not native_fit(rows) and not python_differences_fit(rows)


@needs_native
@pytest.mark.parametrize(
    "arguments",
    [
        (STRINGS, LISTS, "kind", CLASSES),  # chosen not among the strings' keys
        (STRINGS, LISTS, "rules", CLASSES),
        (("class", "class"), LISTS, "class", CLASSES),  # a key twice
        (("class", Str("detail")), LISTS, "class", CLASSES),
        (STRINGS, LISTS, "class", frozenset({"naming", Str("layout")})),
        (STRINGS, LISTS, "class", Choices(CLASSES)),  # its __iter__ could hide a member
        (STRINGS, tuple(map(str, range(40))), "class", CLASSES),  # more keys than a mask
    ],
)
def test_bad_arguments_are_refused(arguments: tuple[Any, ...]) -> None:
    assert native is not None
    with pytest.raises(ValueError, match="rows_fit"):
        native.rows_fit([], *arguments)


@needs_compiler
def test_the_install_built_the_c_check() -> None:
    """Where the interpreter's C compiler is, `make` installs gates with its check in C
    (hatch_build.py); a build that silently fell back would leave the diff slower."""
    assert native is not None, "gates.outputs._fit did not build: see pip's output"
    assert structure_parity._native_rows_fit is native.rows_fit
    assert Path(native.__file__).parent == Path(structure_parity.__file__).parent
