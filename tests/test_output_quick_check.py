"""`check_output` of a structure-parity document takes the model's decision, and its error
message, whichever way it checks: the differences by `differences_fit` (a direct check of
the columns) and the rest by the model, or the whole document by the model. Held to the
model alone on random valid documents and spoiled ones. What the quick check vouches for
(plain values the writer does not look at again) is what the document holds: the written
bytes stay json.dumps'."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from gates.core.canonical import plain_json, pretty_json_bytes
from gates.core.errors import GatesError
from gates.core.validation import first_error
from gates.outputs.models import MODELS, check_output
from gates.outputs.structure_parity import CLASSES, DIFFERENCE_KEYS, Difference, differences_fit
from gates.receipts.model import ArtifactKind

KIND = ArtifactKind.STRUCTURE_PARITY
WHERE = "outputs/surveys/structure-parity.json"


class Str(str):
    __slots__ = ()


def model_message(document: object) -> str | None:
    """What `check_output` said when the model checked every document (the code before)."""
    try:
        MODELS[KIND].validate_python(document)
    except ValidationError as exc:
        first = first_error(exc, whole="the document")
        return f"the {KIND.value} output does not fit its model at {first.key}: {first.problem}"
    return None


def checked_message(document: object) -> str | None:
    try:
        check_output(KIND, document, WHERE)
    except GatesError as exc:
        return exc.message
    return None


names = st.text(st.characters(codec="utf-8"), max_size=8) | st.sampled_from(["", "\ud800", "é"])
name_lists = st.lists(names, max_size=3)
differences = st.lists(
    st.fixed_dictionaries(
        {
            "class": st.sampled_from(sorted(CLASSES)),
            "reference": name_lists,
            "candidate": name_lists,
            "rules": name_lists,
            "detail": names,
        }
    ),
    max_size=6,
)
counts = st.integers(min_value=0, max_value=10**6)
sides = st.fixed_dictionaries(
    {"path": names, "tensor_count": counts, "valid": st.booleans(), "problems": name_lists}
)
documents = st.fixed_dictionaries(
    {
        "format": st.just("gates.structure_parity/v1"),
        "reference": sides,
        "candidate": sides,
        "rules": st.none() | names,
        "matched": counts,
        "counts": st.fixed_dictionaries(dict.fromkeys(sorted(CLASSES), counts)),
        "differences": differences,
        "rule_problems": name_lists,
        "notes": st.none() | name_lists,
    }
)
#: what a spoiled value becomes: the wrong types pydantic's strict fields refuse, and the
#: ones its lax list and model fields take
ODD: list[Any] = [
    None,
    0,
    -1,
    1.5,
    True,
    False,
    "",
    "naming",
    "kind",
    Str("naming"),
    b"bytes",
    ("a",),
    (),
    [],
    ["a"],
    [1],
    [None],
    [True],
    [Str("a")],
    [["a"]],
    {},
    {"a": "b"},
    frozenset({"a"}),
]


def spoil_difference(data: st.DataObject, difference: object) -> object:
    if type(difference) is not dict:  # spoiled already
        return difference
    how = data.draw(st.sampled_from(["value", "item", "drop", "add", "alias", "whole", "none"]))
    key = data.draw(st.sampled_from(DIFFERENCE_KEYS))
    if how == "value":
        difference[key] = data.draw(st.sampled_from([*ODD, "other", "Naming", "naming "]))
    elif how == "item" and type(difference.get(key)) is list:
        difference[key] = [*difference[key], data.draw(st.sampled_from(ODD))]
    elif how == "drop":
        difference.pop(key, None)
    elif how == "add":
        difference[data.draw(st.sampled_from(["kind", "extra", "", "Class"]))] = "naming"
    elif how == "alias" and "class" in difference:  # the model's name: populate_by_name
        difference["kind"] = difference.pop("class")
    elif how == "whole":
        return data.draw(st.sampled_from(ODD))
    return difference


def _as_tuple(listed: object) -> tuple[object, ...]:
    """The differences as a tuple, when a list (a spoil before may have made them a number)."""
    return tuple(listed) if isinstance(listed, list) else ()


def spoil(data: st.DataObject, document: dict[str, Any]) -> object:
    """``document`` with one thing or a few wrong (or merely unusual)."""
    for _ in range(data.draw(st.integers(min_value=1, max_value=2))):
        where = data.draw(st.sampled_from(["difference", "differences", "top", "side", "doc"]))
        listed = document.get("differences")
        if where == "difference" and type(listed) is list and listed:
            at = data.draw(st.integers(min_value=0, max_value=len(listed) - 1))
            listed[at] = spoil_difference(data, listed[at])
        elif where == "differences":
            document["differences"] = data.draw(
                st.sampled_from([None, (), _as_tuple(listed), {}, "x", [None], [[]]])
            )
        elif where == "top":
            key = data.draw(st.sampled_from([*document, "extra"]))
            if data.draw(st.booleans()):
                document.pop(key, None)
            else:
                document[key] = data.draw(st.sampled_from(ODD))
        elif where == "side":
            side = document.get("reference")
            if isinstance(side, dict):
                side[data.draw(st.sampled_from([*side, "extra"]))] = data.draw(st.sampled_from(ODD))
        else:
            return data.draw(st.sampled_from([None, [], "text", [document]]))
    return document


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.data())
def test_the_check_decides_and_words_as_the_model_does(
    document: dict[str, Any], data: st.DataObject
) -> None:
    assert differences_fit(document["differences"])  # the direct check's own case
    assert checked_message(document) is None
    spoiled = spoil(data, copy.deepcopy(document))
    assert checked_message(spoiled) == model_message(spoiled)


@settings(max_examples=80, deadline=None)
@given(differences.filter(bool), st.data())
def test_the_direct_check_accepts_only_what_the_model_accepts(
    listed: list[dict[str, Any]], data: st.DataObject
) -> None:
    spoiled: list[object] = copy.deepcopy(listed)  # type: ignore[arg-type]
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        at = data.draw(st.integers(min_value=0, max_value=len(spoiled) - 1))
        spoiled[at] = spoil_difference(data, spoiled[at])
    accepted = True
    try:
        TypeAdapter(list[Difference]).validate_python(spoiled)
    except ValidationError:
        accepted = False
    assert accepted or not differences_fit(spoiled)
    document = data.draw(documents)
    document["differences"] = spoiled
    assert checked_message(document) == model_message(document)


def test_the_direct_check_stands_for_the_model_as_it_is() -> None:
    """`differences_fit` assumes these fields; a change to the model must change it too."""
    fields = {
        field.alias or name: str(field.annotation)
        for name, field in Difference.model_fields.items()
    }
    assert fields == {
        "class": "typing.Literal['naming', 'layout', 'dtype', 'structural']",
        "reference": "list[typing.Annotated[str, Strict(strict=True)]]",
        "candidate": "list[typing.Annotated[str, Strict(strict=True)]]",
        "rules": "list[typing.Annotated[str, Strict(strict=True)]]",
        "detail": "<class 'str'>",
    }
    assert Difference.model_config.get("extra") == "forbid"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.data())
def test_what_the_check_vouches_for_is_plain_and_written_as_json_dumps_writes_it(
    document: dict[str, Any], data: st.DataObject
) -> None:
    spoiled = spoil(data, copy.deepcopy(document)) if data.draw(st.booleans()) else document
    try:
        checked = check_output(KIND, spoiled, WHERE)
    except GatesError:
        return
    assert type(spoiled) is dict
    assert all(plain_json(spoiled[key]) for key in checked)
    try:
        text = json.dumps(spoiled, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        expected = text.encode("utf-8")
    except (TypeError, UnicodeEncodeError) as exc:  # a set the lax model took; a lone surrogate
        with pytest.raises(type(exc)):
            pretty_json_bytes(spoiled, checked=checked)
        return
    assert pretty_json_bytes(spoiled, checked=checked) == expected


def test_a_survey_document_s_differences_are_vouched_for_and_others_not() -> None:
    document = {
        "format": "gates.structure_parity/v1",
        "reference": {"path": "a", "tensor_count": 1, "valid": True, "problems": []},
        "candidate": {"path": "b", "tensor_count": 1, "valid": True, "problems": []},
        "rules": None,
        "matched": 0,
        "counts": dict.fromkeys(sorted(CLASSES), 0),
        "differences": [
            {
                "class": "naming",
                "reference": ["a"],
                "candidate": ["b"],
                "rules": ["r"],
                "detail": "a -> b",
            }
        ],
        "rule_problems": [],
    }
    assert check_output(KIND, document, WHERE) == {"differences"}
    tupled = {**document, "differences": [{**document["differences"][0], "rules": ("r",)}]}
    assert check_output(KIND, tupled, WHERE) == {"differences"}  # as the survey hands over
    lax = {**document, "differences": [{**document["differences"][0], "rules": [Str("r")]}]}
    assert check_output(KIND, lax, WHERE) == frozenset()  # pydantic decided: nothing vouched
