"""The bulk header paths (whole-header checks in C-level passes) against the per-tensor path.

`parse_header` first tries `_canonical` (the library's compact text read by one regular
expression, no JSON decoder), then `_bulk_entries`; both accept only the plain, valid
case and otherwise hand over to the per-tensor checks for the exact error. Here
the paths see the same mutated headers (offsets swapped, overlapping, leaving
gaps; zero and huge dimensions; `-0`, booleans, floats; unknown dtypes, extra
fields, repeated keys; and, in the text, white space, escapes, leading zeros,
metadata of every shape, garbage): with the bulk paths on, every verdict and every
entry must be what the per-tensor path alone gives.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import gates.safetensors.header as header_module
from gates.safetensors.dtypes import DTYPE_BITS
from gates.safetensors.header import HeaderError, parse_header

DTYPES = ["F32", "BF16", "U8", "F4", "F6_E2M3", "I64", "BOOL"]


def valid_header(rng: random.Random) -> tuple[dict[str, object], int]:
    tensors: dict[str, object] = {}
    offset = 0
    for index in range(rng.randint(1, 8)):
        dtype = rng.choice(DTYPES)
        shape = [rng.randint(1, 4) for _ in range(rng.randint(0, 3))]
        elements = 1
        for dim in shape:
            elements *= dim
        bits = elements * DTYPE_BITS[dtype]
        if bits % 8:
            shape, bits = [*shape, 8], bits * 8
        size = bits // 8
        tensors[f"model.layers.{index}.w"] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + size],
        }
        offset += size
    order = list(tensors.items())
    rng.shuffle(order)  # offsets in another order than the keys
    return dict(order), offset


def mutate(  # noqa: PLR0912 - one branch a kind of change
    rng: random.Random, tensors: dict[str, object], size: int
) -> tuple[str, int]:
    """One change, or none; returns the header text and the buffer size."""
    names = list(tensors)
    info: dict[str, object] = tensors[rng.choice(names)]  # type: ignore[assignment]
    offsets: list[int] = info["data_offsets"]  # type: ignore[assignment]
    shape: list[object] = info["shape"]  # type: ignore[assignment]
    kind = rng.randrange(16)
    text_suffix = ""
    if kind == 0:
        offsets[1] += 1
    elif kind == 1:
        offsets[0] += 1
    elif kind == 2:
        size += 1
    elif kind == 3 and len(names) > 1:
        other: dict[str, object] = tensors[rng.choice(names)]  # type: ignore[assignment]
        info["data_offsets"], other["data_offsets"] = other["data_offsets"], offsets
    elif kind == 4:
        info["shape"] = [*shape, 0]
    elif kind == 5:
        info["shape"] = [2**40, 2**40, 2**40]
    elif kind == 6:
        info["dtype"] = rng.choice(["F8", "f32", 5, None])
    elif kind == 7:
        info["extra"] = {"nested": [1, 2.5]}
    elif kind == 8 and shape:
        shape[0] = True
    elif kind == 9:
        info["shape"] = [*shape, 1.0]
    elif kind == 10:
        offsets.append(offsets[1])
    elif kind == 11:
        del info["shape"]
    elif kind == 12:
        offsets[0], offsets[1] = offsets[1], offsets[0]
    elif kind == 13:
        text_suffix = "-0"
    elif kind == 14:
        info["data_offsets"] = [offsets[0], offsets[0]]
        info["shape"] = [0]
    text = json.dumps(tensors, separators=(",", ":"))
    if text_suffix:  # a -0 where a dimension was 1
        text = text.replace('"shape":[1', '"shape":[-0', 1)
    if kind == 15:
        first = names[0]
        text = text[:-1] + "," + json.dumps(first) + ":" + json.dumps(tensors[first]) + "}"
    return text, size


def verdict(text: str, size: int) -> object:
    raw = text.encode()
    try:
        parsed = parse_header(raw, 8 + len(raw) + size)
    except HeaderError as error:
        return ("error", str(error))
    return ("ok", parsed.tensors, parsed.metadata)


@pytest.mark.slow
def test_bulk_path_gives_the_per_tensor_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(21)  # noqa: S311 - reproducible test inputs
    accepted = refused = 0
    for _ in range(3000):
        tensors, size = valid_header(rng)
        text, size = mutate(rng, tensors, size)
        with_bulk = verdict(text, size)
        with monkeypatch.context() as patched:
            patched.setattr(header_module, "_bulk_entries", lambda *_: None)
            patched.setattr(header_module, "_canonical", lambda *_: None)
            per_tensor = verdict(text, size)
        assert with_bulk == per_tensor, text
        if with_bulk[0] == "ok":
            accepted += 1
        else:
            refused += 1
    assert accepted > 200 and refused > 1000, (accepted, refused)


def test_a_zero_sized_tensor_inside_another_is_refused() -> None:
    """The one layout the bulk path's degree count cannot see: it is left to the exact path."""
    text = json.dumps(
        {
            "a": {"dtype": "U8", "shape": [10], "data_offsets": [0, 10]},
            "b": {"dtype": "U8", "shape": [0], "data_offsets": [5, 5]},
        }
    )
    with pytest.raises(HeaderError, match="invalid offset for tensor 'b'"):
        parse_header(text.encode(), 8 + len(text) + 10)


TEXT_CHANGES = (
    ("", ""),  # unchanged: the canonical path's own case
    (',"', ', "'),  # white space between entries
    ('":{', '": {'),
    ("]}", "] }"),
    ('"dtype"', '"\\u0064type"'),  # an escaped key
    ('"model.', '"\\u006dodel.'),  # an escaped name
    ('"model.', '"mo\\"del.'),
    ('"model.', '"mo\tdel.'),  # a raw control character: invalid JSON
    ('"model.', '"\\ud800model.'),  # a lone surrogate
    ('"data_offsets":[0', '"data_offsets":[00'),  # a leading zero: invalid JSON
    ('"data_offsets":[0', '"data_offsets":[-0'),
    ('"shape":[', '"shape":[1,'),
    ('"shape":[', '"shape":[01,'),
    ('"shape":[', '"shape":[18446744073709551616,'),  # beyond u64
    ('"shape":[', '"shape":[123456789012345678901,'),  # 21 digits
    ('"shape":[', '"shape":[1.0,'),
    ('"F32"', '"F 32"'),
    ('"F32"', '"f32"'),
    ('{"dtype":"F32","shape":', '{"shape":'),  # a missing field
    ("{", '{"__metadata__":{"format":"pt"},'),
    ("{", '{"__metadata__":{},'),
    ("{", '{"__metadata__":{"a":"1","a":"2"},'),  # a repeated metadata key
    ("{", '{"__metadata__":{"a":1},'),
    ("{", '{"__metadata__":{"a":"\\u0031"},'),
    ("{", '{"__metadata__":{"a":"1"},"__metadata__":{"a":"1"},'),
    ("{", '{"__metadata__":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'),
    ("{", "{ "),
    ("{", " {"),
    ("{", "{,"),
    ("}}", "}},"),  # garbage at the end
    ("}}", "}}}"),
    ("}}", "}} \n\t\r "),  # white space after the object: valid
    ("}}", "}}x"),
    ('},"', '},5,"'),  # garbage between entries
    ('},"', '}"'),
)


@pytest.mark.slow
def test_canonical_path_gives_the_json_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(17)  # noqa: S311 - reproducible test inputs
    canonical_accepted = 0
    for _ in range(3000):
        tensors, size = valid_header(rng)
        text = json.dumps(tensors, separators=(",", ":"))
        if rng.random() < 0.3:  # in offset order, as the library writes
            ordered = sorted(tensors.items(), key=lambda kv: kv[1]["data_offsets"])  # type: ignore[index]
            text = json.dumps(dict(ordered), separators=(",", ":"))
        if rng.random() < 0.2:
            text, size = mutate(rng, tensors, size)
        old, new = rng.choice(TEXT_CHANGES) if rng.random() < 0.7 else ("", "")
        if old:
            text = text.replace(old, new, 1) if rng.random() < 0.5 else text.replace(old, new)
        raw = text.encode("utf-8", "surrogatepass")
        canonical = header_module._canonical(text, 8 + len(raw), 8 + len(raw) + size)
        with_canonical = verdict(text, size)
        with monkeypatch.context() as patched:
            patched.setattr(header_module, "_canonical", lambda *_: None)
            without = verdict(text, size)
        assert with_canonical == without, text
        if canonical is not None:
            canonical_accepted += 1
            assert with_canonical == ("ok", canonical.tensors, canonical.metadata), text
    assert canonical_accepted > 500, canonical_accepted


def test_the_library_writes_canonical_headers(tmp_path: Path) -> None:
    """The fast path is the usual one: a file the library saved, metadata and all."""
    numpy = pytest.importorskip("numpy")
    save_file = pytest.importorskip("safetensors.numpy").save_file
    path = tmp_path / "x.safetensors"
    arrays = {"b.weight": numpy.zeros((2, 3), numpy.float32), "a": numpy.zeros(1, numpy.uint8)}
    save_file(arrays, str(path), metadata={"format": "pt"})
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    found = header_module._canonical(data[8 : 8 + length].decode(), 8 + length, len(data))
    assert found is not None
    assert found.metadata == {"format": "pt"}
    assert {name: (e.dtype, e.shape) for name, e in found.tensors.items()} == {
        "b.weight": ("F32", (2, 3)),
        "a": ("U8", (1,)),
    }
