"""The bulk header path (whole-header checks in C-level passes) against the per-tensor path.

`parse_header` first tries `_bulk_entries`, which accepts only the plain, valid
case and otherwise hands over to the per-tensor checks for the exact error. Here
both paths see the same mutated headers (offsets swapped, overlapping, leaving
gaps; zero and huge dimensions; `-0`, booleans, floats; unknown dtypes, extra
fields, repeated keys): with the bulk path on, every verdict and every entry
must be what the per-tensor path alone gives.
"""

from __future__ import annotations

import json
import random

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


def test_bulk_path_gives_the_per_tensor_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(21)  # noqa: S311 - reproducible test inputs
    accepted = refused = 0
    for _ in range(3000):
        tensors, size = valid_header(rng)
        text, size = mutate(rng, tensors, size)
        with_bulk = verdict(text, size)
        with monkeypatch.context() as patched:
            patched.setattr(header_module, "_bulk_entries", lambda *_: None)
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
