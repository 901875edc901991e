"""The canonical header path's per-kind checks against the JSON path.

`_canonical` works out each kind's dtype, shape and size once (the text from the dtype
to the shape's last dimension, a few dozen in a checkpoint) and, for tensors in offset
order, checks the layout as running sums of those sizes; a repeated name or one called
`__metadata__` is found by the set of its names. It hands the tensors over as columns:
their names and kinds must be those of the entries made from them, and the header must
equal the JSON path's. Here canonical texts aim at exactly those
checks: sizes that are not a whole number of bytes, dimensions and sizes beyond u64,
unknown dtypes, a repeated name laid out as if it were another tensor, a tensor named
`__metadata__`, ends that add up wrongly, buffers one byte off, offsets out of order.
Every verdict must be the one the JSON path alone gives.
"""

from __future__ import annotations

import json
import math
import random

import pytest

import gates.safetensors.header as header_module
from gates.safetensors.dtypes import DTYPE_BITS
from gates.safetensors.header import HeaderError, parse_header
from tests.test_header_bulk import verdict

DTYPES = [*sorted(DTYPE_BITS), "F9", "X"]
USIZE_MAX = 2**64 - 1


def _shape(rng: random.Random) -> list[int]:
    roll = rng.random()
    if roll < 0.02:
        return [2**61]  # 2**64 bits of U8: a size beyond u64
    if roll < 0.04:
        return [USIZE_MAX + 1]  # a dimension beyond u64 (20 digits)
    return [rng.randint(1, 5) for _ in range(rng.randint(0, 3))]


def _entries(rng: random.Random) -> list[tuple[str, dict[str, object]]]:
    """Tensors laid out contiguously in offset order, their sizes as the dtype gives them,
    rounded down or up to whole bytes (so a size of a sub-byte dtype can fit the offsets
    and still not be whole bytes, and one beyond u64 in bits can fit them in bytes)."""
    entries = []
    offset = 0
    for index in range(rng.randint(1, 7)):
        dtype = rng.choice(DTYPES)
        shape = _shape(rng)
        bits = math.prod(shape) * DTYPE_BITS.get(dtype, 8)
        size = bits // 8 if rng.random() < 0.5 else -(-bits // 8)
        name = f"model.layers.{index}.w"
        entry: dict[str, object] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + size],
        }
        entries.append((name, entry))
        offset += size
    return entries


def _change(rng: random.Random, entries: list[tuple[str, dict[str, object]]]) -> None:
    """One change aimed at a check of the canonical path, or none."""
    kind = rng.randrange(8)
    if kind == 0 and len(entries) > 1:  # a repeated name, its offsets those of the tensor
        entries[rng.randrange(1, len(entries))] = (entries[0][0], entries[-1][1])
    elif kind == 1:
        index = rng.randrange(len(entries))
        entries[index] = ("__metadata__", entries[index][1])
    elif kind == 2:  # one tensor a byte longer than its shape says, the later ones moved on
        index = rng.randrange(len(entries))
        move_on = rng.random() < 0.5
        for position, (_, entry) in enumerate(entries[index:]):
            offsets: list[int] = entry["data_offsets"]  # type: ignore[assignment]
            if position and not move_on:
                break
            offsets[0] += position > 0
            offsets[1] += 1
    elif kind == 3 and len(entries) > 1:  # the same tensors, their offsets out of order
        rng.shuffle(entries)


def _text(rng: random.Random) -> tuple[str, int]:
    entries = _entries(rng)
    _change(rng, entries)
    size = max(entry["data_offsets"][1] for _, entry in entries)  # type: ignore[index]
    size += rng.choice([0, 0, 0, 1, -1])
    body = ",".join(
        json.dumps(name) + ":" + json.dumps(entry, separators=(",", ":")) for name, entry in entries
    )
    metadata = '"__metadata__":{"format":"pt"},' if rng.random() < 0.5 else ""
    text = "{" + metadata + body + "}"
    if rng.random() < 0.2:  # a kind the scan takes and `_KIND` must refuse
        old, spoilt = rng.choice(KIND_CHANGES)
        text = text.replace(old, spoilt, 1)
    return text, size


#: Kinds of the scan's loose form (anything up to the shape's `]`) that are not canonical.
KIND_CHANGES = (
    ('"shape":[', '"shape":[01,'),  # a leading zero: invalid JSON
    ('"shape":[', '"shape":[0,'),  # a zero dimension: the exact way decides
    ('"shape":[', '"shape":[ 1,'),
    ('"shape":[', '"shape":[+1,'),
    ('"shape":[', '"shape":[1_0,'),
    ('"shape":[', '"shape":[1.0,'),
    ('"shape":[', '"shape":[1,,'),
    ('"dtype":"', '"dtype":"\\u0046'),  # an escaped dtype: F
    ('"dtype":"', '"dtype":" '),
    ('"dtype":"', '"dtype":"\t'),  # a raw tab: invalid JSON
)


def test_the_kind_checks_give_the_json_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(29)  # noqa: S311 - reproducible test inputs
    canonical_accepted = refused = 0
    for _ in range(2000):
        text, size = _text(rng)
        with_canonical = verdict(text, size)
        with monkeypatch.context() as patched:
            patched.setattr(header_module, "_canonical", lambda *_: None)
            without = verdict(text, size)
        assert with_canonical == without, text
        raw = text.encode()
        canonical = header_module._canonical(text, 8 + len(raw), 8 + len(raw) + size)
        if canonical is not None:
            canonical_accepted += 1
            # the names and kinds the columns give, before any entry is made
            names, kinds = list(canonical.names), list(canonical.kinds())
            assert with_canonical == ("ok", canonical.tensors, canonical.metadata), text
            assert names == list(canonical.tensors), text
            assert kinds == [(e.dtype, e.shape) for e in canonical.tensors.values()], text
            with monkeypatch.context() as patched:
                patched.setattr(header_module, "_canonical", lambda *_: None)
                assert canonical == parse_header(raw, 8 + len(raw) + size), text
        refused += with_canonical[0] == "error"  # type: ignore[index]
    assert canonical_accepted > 250 and refused > 1200, (canonical_accepted, refused)


def test_a_repeated_name_laid_out_as_another_tensor_is_refused() -> None:
    """The one case where only the repeat is wrong: each entry fits where it lies."""
    text = (
        '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
        '"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}'
    )
    raw = text.encode()
    assert header_module._canonical(text, 8 + len(raw), 8 + len(raw) + 8) is None
    with pytest.raises(HeaderError, match="duplicate key"):
        parse_header(raw, 8 + len(raw) + 8)


@pytest.mark.parametrize(
    ("dtype", "dims", "nbytes", "error"),
    [("F4", 3, 1, "byte boundary"), ("U8", 2**61, 2**61, "overflow computing the size")],
)
def test_sizes_the_offsets_fit_are_refused(dtype: str, dims: int, nbytes: int, error: str) -> None:
    """12 bits in 1 byte; 2**64 bits (one beyond u64) in 2**61 bytes: the offsets fit."""
    text = f'{{"a":{{"dtype":"{dtype}","shape":[{dims}],"data_offsets":[0,{nbytes}]}}}}'
    raw = text.encode()
    assert header_module._canonical(text, 8 + len(raw), 8 + len(raw) + nbytes) is None
    with pytest.raises(HeaderError, match=error):
        parse_header(raw, 8 + len(raw) + nbytes)


def test_ends_beyond_u64_are_refused() -> None:
    """Seventeen tensors of 2**60 bytes, each size within u64, the last end beyond it (a
    buffer that large only `parse_header`'s callers can claim)."""
    size = 2**60
    entries = [
        f'"t{index:02d}":{{"dtype":"U8","shape":[{size}],'
        f'"data_offsets":[{index * size},{(index + 1) * size}]}}'
        for index in range(17)
    ]
    text = "{" + ",".join(entries) + "}"
    raw = text.encode()
    buffer = 17 * size
    assert header_module._canonical(text, 8 + len(raw), 8 + len(raw) + buffer) is None
    with pytest.raises(HeaderError, match="is not an unsigned integer"):
        parse_header(raw, 8 + len(raw) + buffer)
