"""Canonical JSON and content ids.

Canonical form: keys sorted, no insignificant whitespace, UTF-8, no NaN or
Infinity. A receipt's ``id`` is ``sha256:`` + the hex digest of the canonical
form of the receipt without its ``id`` and ``attestation`` fields (the
attestation signs the receipt, id included).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Collection, Iterable, Iterator
from itertools import chain, repeat
from operator import itemgetter
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice: its meaning is ambiguous."""


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def content_id(document: dict[str, Any]) -> str:
    body = {key: value for key, value in document.items() if key not in ("id", "attestation")}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object hook that refuses a key given twice (raises DuplicateKeyError)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"duplicate key {key!r}")
            seen.add(key)
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def strict_loads(text: str | bytes) -> Any:
    """Parse JSON refusing duplicate keys, the NaN/Infinity extensions and nesting deeper
    than the interpreter's recursion limit (a ValueError, never a RecursionError)."""
    try:
        return json.loads(text, object_pairs_hook=unique_pairs, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def pretty_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)``
    and a newline, byte for byte (see `indented_json`)."""
    written = _orjson_indented(value, sort_keys=True, newline=True)
    if written is not None:
        return written.decode("utf-8")
    return _indented(value, sort_keys=True, ensure_ascii=False, end="\n")


def pretty_json_bytes(value: Any, *, checked: Collection[str] = ()) -> bytes:
    """``pretty_json(value).encode("utf-8")``, without the text in between (a survey's
    document is 24 MB). ``checked``: keys of ``value`` (a dict) whose values the caller has
    found to hold only exact dicts, lists, strings, ints, bools and None (the quick check of
    a survey's differences, gates/outputs/models.py), which `_orjson_indented` then need not
    look at again."""
    written = _orjson_indented(value, sort_keys=True, newline=True, checked=checked)
    if written is not None:
        return written
    return _indented(value, sort_keys=True, ensure_ascii=False, end="\n").encode("utf-8")


def indented_json(value: Any, *, sort_keys: bool, ensure_ascii: bool) -> str:
    """``json.dumps(value, indent=2, sort_keys=..., ensure_ascii=..., allow_nan=False)``,
    byte for byte: by orjson where its bytes are the same (`_orjson_indented`), else by
    `_pretty` over the C string encoder (Python's ``indent`` selects its pure-Python
    encoder, a generator per level: a 60,000-difference survey took seconds). Anything
    `_pretty` does not handle plainly goes to `json.dumps`."""
    written = _orjson_indented(value, sort_keys=sort_keys, newline=False)
    if written is not None and (not ensure_ascii or _ascii_as_json_escapes(written)):
        return written.decode("utf-8")
    return _indented(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii, end="")


def _ascii_as_json_escapes(written: bytes) -> bool:
    """orjson's bytes are what ``ensure_ascii=True`` writes: all ASCII, and no DEL (which
    json.dumps escapes there)."""
    return written.isascii() and b"\x7f" not in written


#: the exact types orjson writes as ``json.dumps(indent=2, ensure_ascii=False)`` does;
#: a float is not one (orjson writes ``1e-05`` as ``1e-5`` and NaN as null), nor is a
#: subclass or an enum (json.dumps may encode those otherwise, or refuse them)
_ORJSON_SAME = frozenset({dict, list, tuple, str, int, bool, type(None)})
_CONTAINERS = (dict, list, tuple)
_ORJSON_DEPTH = 254  # orjson refuses deeper nesting; json.dumps goes on
_ORJSON_WIDEST = 1 << 24  # values in one level: a 60,000-difference survey has 300,000


def _orjson_indented(
    value: Any, *, sort_keys: bool, newline: bool, checked: Collection[str] = ()
) -> bytes | None:
    """orjson's indented JSON of ``value`` when it is byte for byte what ``json.dumps``
    writes, else None: every value, at every level, of a type in `_ORJSON_SAME` (checked a
    level at a time by C-level passes), and nothing orjson refuses that json.dumps takes
    (an int beyond 64 bits, a key that is not a string, a lone surrogate). orjson writes a
    survey's 60,000 differences about ten times faster than the record writer below."""
    unchecked = {k: v for k, v in value.items() if k not in checked} if checked else value
    if not plain_json(unchecked):
        return None
    import orjson  # noqa: PLC0415  (only writers need it; the warm audit's imports stay few)

    option = orjson.OPT_INDENT_2
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    if newline:
        option |= orjson.OPT_APPEND_NEWLINE
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError:
        return None


def plain_json(value: Any, *, depth: int = _ORJSON_DEPTH) -> bool:
    """Every value in ``value``, at every level, is of an exact type in `_ORJSON_SAME`, in
    at most ``depth`` levels of containers (what orjson writes and reads as the standard
    library does): a level at a time by C-level passes."""
    level: list[Any] = [value]
    for _ in range(depth + 1):
        kinds = set(map(type, level))
        if not kinds <= _ORJSON_SAME:
            return False
        below: list[Any] = []
        for kind in _CONTAINERS:
            if kind in kinds:
                items = level if len(kinds) == 1 else filter(kind.__instancecheck__, level)
                below.extend(
                    chain.from_iterable(map(dict.values, items) if kind is dict else items)
                )
        if not below:
            return True
        if len(below) > _ORJSON_WIDEST:  # a cycle that branches (json.dumps refuses it)
            return False
        level = below
    return False


def _indented(value: Any, *, sort_keys: bool, ensure_ascii: bool, end: str) -> str:
    """`indented_json` followed by ``end``, joined once (a 24 MB document is not copied
    again to add its newline)."""
    encode = _ENCODE_ASCII if ensure_ascii else _ENCODE_STRING
    try:
        parts: list[str] = []
        _pretty(value, "\n", parts, sort_keys, encode)
        parts.append(end)
        return "".join(parts)
    except _UnplainError:
        return (
            json.dumps(
                value, sort_keys=sort_keys, indent=2, ensure_ascii=ensure_ascii, allow_nan=False
            )
            + end
        )


class _UnplainError(Exception):
    """A value `_pretty` leaves to `json.dumps` (non-str keys, subclasses, NaN, cycles...)."""


_ENCODE_STRING: Any = getattr(json.encoder, "c_encode_basestring", None) or (
    json.encoder.py_encode_basestring
)
_ENCODE_ASCII: Any = getattr(json.encoder, "c_encode_basestring_ascii", None) or (
    json.encoder.py_encode_basestring_ascii
)
_ONLY_STR = {str}
_MAX_DEPTH = 200  # deeper than any document gates writes; json.dumps handles the rest


def _pretty(  # noqa: PLR0912
    value: Any,
    newline: str,
    parts: list[str],
    sort_keys: bool = True,
    encode: Any = _ENCODE_STRING,
) -> None:
    """Append the indented JSON of ``value``; ``newline`` is a newline and the indentation
    of the current level. Exact types only (a subclass may encode differently)."""
    kind = type(value)
    if kind is str:
        parts.append(encode(value))
    elif kind is dict:
        if not value:
            parts.append("{}")
            return
        if len(newline) > _MAX_DEPTH or not all(type(key) is str for key in value):
            raise _UnplainError
        inner = newline + "  "
        parts.append("{")
        separator = inner
        for key in sorted(value) if sort_keys else value:
            parts.append(separator)
            parts.append(encode(key))
            parts.append(": ")
            item = value[key]
            if type(item) is str:  # the usual value, without a call
                parts.append(encode(item))
            else:
                _pretty(item, inner, parts, sort_keys, encode)
            separator = "," + inner
        parts.append(newline)
        parts.append("}")
    elif kind is list or kind is tuple:
        _pretty_sequence(value, newline, parts, sort_keys, encode)
    elif kind is int:
        parts.append(int.__repr__(value))
    elif kind is float:
        if not math.isfinite(value):
            raise _UnplainError  # json.dumps raises the error allow_nan=False gives
        parts.append(float.__repr__(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    else:
        raise _UnplainError


def _pretty_sequence(
    value: list[Any] | tuple[Any, ...],
    newline: str,
    parts: list[str],
    sort_keys: bool,
    encode: Any,
) -> None:
    if not value:
        parts.append("[]")
        return
    if len(newline) > _MAX_DEPTH:
        raise _UnplainError
    inner = newline + "  "
    if set(map(type, value)) == _ONLY_STR:  # names: one join, no call per item
        parts.append("[" + inner + ("," + inner).join(map(encode, value)) + newline + "]")
        return
    records = _records(value, newline, sort_keys, encode)
    if records is not None:
        parts.extend(records)
        return
    parts.append("[")
    separator = inner
    for item in value:
        parts.append(separator)
        _pretty(item, inner, parts, sort_keys, encode)
        separator = "," + inner
    parts.append(newline)
    parts.append("]")


def _records(
    value: list[Any] | tuple[Any, ...], newline: str, sort_keys: bool, encode: Any
) -> Iterator[str] | None:
    """The indented JSON of a list of flat records as pieces to join, or None for anything
    else: dicts with the same keys (in the same order, unless the keys are sorted) whose
    values are strings or lists of strings (the 60,000 differences of a survey). Laid out
    a column at a time by C-level passes, no Python step per record: a string column by one
    `map` of the encoder, a list column by one `json.dumps` split into its lists, and the
    records by one `zip` of the columns with the text between them. The same bytes as
    `json.dumps` (tests/test_pretty_json.py)."""
    first = value[0]
    if type(first) is not dict or not first or len(newline) + 4 > _MAX_DEPTH:
        return None
    keys = tuple(first)
    if not _same_keys(value, keys, sort_keys):
        return None
    item = newline + "  "
    order = sorted(range(len(keys)), key=keys.__getitem__) if sort_keys else range(len(keys))
    cells: list[Iterable[str]] = [chain(["[" + item], repeat("," + item))]
    before = "{"  # the constant text before the next key
    for k in order:
        column = _column_cells(value, keys[k], before, item, encode)
        if column is None:
            return None
        cells += column
        before = ","
    cells.append(repeat(item + "}"))
    # the repeats are endless; every column has one cell per record, so zip ends with them
    return chain(chain.from_iterable(zip(*cells, strict=False)), [newline + "]"])


def _same_keys(value: list[Any] | tuple[Any, ...], keys: tuple[Any, ...], sort_keys: bool) -> bool:
    """Every item is a dict whose keys are ``keys`` (strings), in that order unless sorted
    (then a missing key makes `_column_cells` give None)."""
    if set(map(type, keys)) != _ONLY_STR or set(map(type, value)) != {dict}:
        return False
    if sort_keys:
        return set(map(len, value)) == {len(keys)}
    return list(map(tuple, value)).count(keys) == len(value)


def _column_cells(
    value: list[Any] | tuple[Any, ...], key: str, before: str, item: str, encode: Any
) -> list[Iterable[str]] | None:
    """The text of ``key`` and its value in each record (``item`` is the records'
    newline and indentation), or None when a record lacks it or a value is not a string
    or a list of strings."""
    try:
        column = list(map(itemgetter(key), value))
    except KeyError:
        return None
    field, element = item + "  ", item + "    "
    head = repeat(before + field + encode(key) + ": ")
    kinds = set(map(type, column))
    if kinds == _ONLY_STR:
        return [head, map(encode, column)]
    if kinds != {list} or not set(map(type, chain.from_iterable(column))) <= _ONLY_STR:
        return None
    insides = _list_insides(column, "," + element, encode)
    if insides is None:
        return None
    filled = list(map(bool, insides))
    opening, closing = ("[", "[" + element), ("]", field + "]")  # an empty list, another
    return [head, map(opening.__getitem__, filled), insides, map(closing.__getitem__, filled)]


def _list_insides(column: list[list[str]], between: str, encode: Any) -> list[str] | None:
    """Each list's encoded strings joined by ``between`` ("" for an empty list), from one
    pass of the C encoder over the whole column. ``between`` holds a newline, which an
    encoded string never does, so ``]`` + ``between`` + ``[`` is found only between two
    lists; a count that does not add up (it cannot) gives None, never a shifted record."""
    text = json.dumps(
        column,
        ensure_ascii=encode is _ENCODE_ASCII,
        separators=(between, ": "),
        check_circular=False,  # strings in lists: no cycle possible
    )
    insides = text[2:-2].split("]" + between + "[")
    return insides if len(insides) == len(column) else None
