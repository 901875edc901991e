"""The inventory's fast readers against the readers they stand in for.

`json_loads_exactly` reads a checkpoint's index by orjson where orjson's value is
``json.loads``' own, else by ``json.loads``: on generated JSON and on texts spoiled in each
way the two decoders part (repeated keys, integers beyond 64 bits, floats, NaN, lone
surrogates escaped and raw, a byte order mark, UTF-16, deep nesting, bad UTF-8, garbage),
its value, with every type and the order of every object's keys, or its exception, type
and message, must be ``json.loads``'. `_canonical` reads the ends of tensors in offset
order as one JSON array: ends at the edge of u64 and beyond it must get the JSON path's
verdicts.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gates.checkpoints.layout as layout_module
import gates.safetensors.header as header_module
from gates.checkpoints.layout import json_loads_exactly
from tests.test_header_bulk import verdict

USIZE_MAX = 2**64 - 1


def _typed(value: Any) -> object:
    """The value with the type of every part spelled out (1 and 1.0 and True differ, -0.0 and
    0.0 too), each object's keys in their order."""
    if isinstance(value, dict):
        return ("dict", [(key, _typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(item) for item in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def _outcome(loads: Any, raw: bytes) -> object:
    try:
        return ("ok", _typed(loads(raw)))
    except (ValueError, RecursionError) as error:
        return ("error", type(error).__name__, str(error))


def _same_as_json(raw: bytes) -> object:
    expected = _outcome(json.loads, raw)
    assert _outcome(json_loads_exactly, raw) == expected, raw[:200]
    return expected


NUMBERS = st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 5e-324, 1.7976931348623157e308, 0.1, 1e16]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12))
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=30,
)
#: Spoilings of a JSON text (bytes), each where json.loads and orjson part or may part.
SPOILINGS: list[tuple[bytes, bytes]] = [
    (b"{", b'{"k": 1, "k": 2, '),  # a repeated key: the last value, in the first place
    (b"{", b'{"k": [1], "j": 0, "k": {}, '),
    (b"[", b"[18446744073709551616, "),  # beyond 64 bits: orjson reads a float
    (b"[", b"[-9223372036854775809, "),
    (b"[", b"[123456789012345678901234567890, "),
    (b"[", b"[1e400, "),  # json.loads: inf; orjson refuses
    (b"[", b"[NaN, "),
    (b"[", b"[-Infinity, "),
    (b"[", b'["\\ud800", '),  # an escaped lone surrogate
    (b"[", b'["\xed\xa0\x80", '),  # a raw one, which json.loads decodes with surrogatepass
    (b"[", b'[{"\\udc00": 0}, '),
    (b"[", b"[-0, "),
    (b"[", b"[1E2, 0.5e-3, "),
    (b"[", b"[\x0b1, "),  # not JSON white space
    (b"[", b"[\xc2\xa01, "),
    (b"[", b"[\x00, "),
    (b"[", b"[\xff, "),  # not UTF-8
    (b"[", b'["\x01", '),  # a raw control character
    (b"[", b"[" * 1200),  # deep and unclosed
    (b"1", b"1 x"),
    (b"2", b"2,"),
]


@st.composite
def _index_texts(draw: st.DrawFn) -> bytes:
    """JSON as json.dumps writes it, spoilt or not (`SPOILINGS`), nested in lists or not,
    after a prefix, in UTF-8 or in UTF-16."""
    text = json.dumps(
        draw(VALUES),
        indent=draw(st.sampled_from([None, 0, 2])),
        ensure_ascii=draw(st.booleans()),
    )
    raw = text.encode("utf-8", "surrogatepass")
    old, new = draw(st.sampled_from(SPOILINGS)) if draw(st.booleans()) else (b"", b"")
    if old:
        raw = raw.replace(old, new, 1)
    # nested as deep as the fast path goes, deeper, and as deep as orjson reads (1,024
    # levels) where json.loads raises RecursionError
    depth = draw(st.sampled_from([0, 0, 0, 62, 70, 1010]))
    raw = b"[" * depth + raw + b"]" * depth
    raw = draw(st.sampled_from([b"", b"", b" ", b"\xef\xbb\xbf", b"\n\t"])) + raw
    utf16 = draw(st.integers(0, 3)) == 0 and b"\xff" not in raw
    # the same text in UTF-16, which json.loads detects and orjson refuses
    return raw.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass") if utf16 else raw


@settings(max_examples=400, deadline=None)
@given(raw=_index_texts())
def test_the_index_is_read_as_json_loads_reads_it(raw: bytes) -> None:
    _same_as_json(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"metadata": {"total_size": 10}, "weight_map": {"a": "s1", "b": "s2"}}',
        b'{"a": 1, "b": 2, "a": 3}',
        b"18446744073709551615",
        b"18446744073709551616",
        b"-9223372036854775808",
        b"-9223372036854775809",
        b"1" * 4301,  # beyond int's digit limit: json.loads' ValueError
        b"[1.5]",
        b"[-0.0, 0.0, -0]",
        b"\xef\xbb\xbf{}",
        b"[" * 64 + b"]" * 64,  # the deepest orjson's answer is kept
        b"[" * 65 + b"]" * 65,
        b"[" * 1010 + b"]" * 1010,  # orjson reads it, json.loads raises RecursionError
        b"[" * 1100 + b"]" * 1100,
        b"",
        b"null",
        b'{"k": "\\ud83d\\ude00"}',
    ],
)
def test_the_index_edges_read_as_json_loads_reads_them(raw: bytes) -> None:
    _same_as_json(raw)


def test_an_index_of_strings_is_read_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is the usual one: an index of tensor names and shard files."""
    weight_map = {f"model.layers.{index}.w": f"s{index % 3}.safetensors" for index in range(50)}
    document = {"metadata": {"total_size": 2**40}, "weight_map": weight_map}
    raw = json.dumps(document, indent=2).encode()
    expected = _same_as_json(raw)
    monkeypatch.setattr(layout_module, "json", None)  # no json.loads to fall back to
    assert _outcome(json_loads_exactly, raw) == expected == ("ok", _typed(document))


def _in_order(sizes: list[int], spelled: dict[int, str] | None = None) -> tuple[str, int]:
    """A canonical text of U8 tensors laid out in offset order, an end now and then spelled
    otherwise (``spelled``: index -> digits), and its buffer size."""
    entries, offset = [], 0
    for index, size in enumerate(sizes):
        end = (spelled or {}).get(index, str(offset + size))
        entries.append(
            f'"t{index}":{{"dtype":"U8","shape":[{size}],"data_offsets":[{offset},{end}]}}'
        )
        offset += size
    return "{" + ",".join(entries) + "}", offset


@pytest.mark.parametrize(
    ("sizes", "spelled", "accepted"),
    [
        ([2**61 - 1] * 8 + [7], None, True),  # the last end u64's largest: read exactly
        ([2**61 - 1] * 8 + [7], {8: str(2**64)}, False),  # 2**64: a float to orjson
        ([2**61 - 1] * 8 + [7], {8: "99999999999999999999"}, False),  # 20 digits
        ([5, 3], {0: str(2**64 + 5)}, False),
        ([5, 3], {1: str(2**64 + 8)}, False),
        ([5, 3], None, True),
    ],
)
def test_ends_read_at_once_give_the_json_verdicts(
    monkeypatch: pytest.MonkeyPatch, sizes: list[int], spelled: dict[int, str], accepted: bool
) -> None:
    text, size = _in_order(sizes, spelled)
    raw = text.encode()
    canonical = header_module._canonical(text, 8 + len(raw), 8 + len(raw) + size)
    assert (canonical is not None) == accepted
    with_canonical = verdict(text, size)
    with monkeypatch.context() as patched:
        patched.setattr(header_module, "_canonical", lambda *_: None)
        assert verdict(text, size) == with_canonical
    if canonical is not None:
        assert with_canonical == ("ok", canonical.tensors, canonical.metadata)
        assert all(type(entry.end) is int for entry in canonical.tensors.values())


@pytest.mark.parametrize(
    "text",
    [
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
        '"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',  # the object closed early
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
        '"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},',  # and an entry after it
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},',  # and never closed
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        ' "b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',  # valid, not canonical
    ],
)
def test_entries_that_do_not_tile_the_text_are_not_canonical(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    raw = text.encode()
    assert header_module._canonical(text, 8 + len(raw), 8 + len(raw) + 2) is None
    with_canonical = verdict(text, 2)
    with monkeypatch.context() as patched:
        patched.setattr(header_module, "_canonical", lambda *_: None)
        assert verdict(text, 2) == with_canonical


@pytest.mark.parametrize("depth", [900, 1010, 1024, 1030])
def test_deep_nesting_is_read_as_json_loads_reads_it_under_the_usual_limit(depth: int) -> None:
    """json.loads' depth is the interpreter's recursion limit (hypothesis raises it to
    2,048; a plain process has 1,000), orjson's 1,024 levels: between the two they part."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        _same_as_json(b"[" * depth + b"]" * depth)
    finally:
        sys.setrecursionlimit(limit)
