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
from collections.abc import Iterator
from pathlib import Path

import pytest

import gates.safetensors.header as header_module
from gates.safetensors.dtypes import DTYPE_BITS
from gates.safetensors.header import HeaderError, parse_header, parse_headers

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


BATCH_CHANGES = (
    ("{", "{\x00"),  # a NUL: the batch's own separator
    ("}}", "}}\x00"),
    ("{", "\x00{"),
    ("{", ""),  # no opening brace: the batch's start of a header without one
    ("}}", "},"),  # no closing brace: an entry ends with `,`
    ('},"', '}}"'),  # an entry closes the object, and another follows it
    ("}}", "}}\n"),  # white space after the object: valid
)
SPOILS = ("order", "names", "repeat", "metadata", "shape", "huge", "entries", "text", "whole")


def batch_member(
    rng: random.Random, index: int, spoil: str | None, change: tuple[str, str] | None = None
) -> tuple[bytes, int]:
    """A header for a batch: names of its own, in offset order as the library writes them,
    metadata or not; then spoiled one way, if ``spoil`` says so."""
    tensors, size = valid_header(rng)
    if spoil != "names":  # else the names of another header of the batch
        tensors = {f"{name}.{index}": info for name, info in tensors.items()}
    if spoil == "shape":  # twice the elements its offsets hold
        info: dict[str, list[int]] = rng.choice(list(tensors.values()))  # type: ignore[assignment]
        info["shape"] = [*info["shape"], 2]
    if spoil != "order":
        tensors = dict(sorted(tensors.items(), key=lambda kv: kv[1]["data_offsets"]))  # type: ignore[index]
    text = json.dumps(tensors, separators=(",", ":"))
    if rng.random() < 0.3:
        text = f'{{"__metadata__":{{"format":"pt","shard":"{index}"}},{text[1:]}'
    if spoil == "repeat" and len(tensors) > 1:  # a name twice, its offsets right
        first, second = (json.dumps(name) + ":" for name in list(tensors)[:2])
        text = text.replace(second, first, 1)
    if spoil == "metadata":  # a tensor named `__metadata__`, laid out right
        text = text.replace(json.dumps(next(iter(tensors))), '"__metadata__"', 1)
    if spoil == "huge":  # 2**61 bytes fit u64, not as bits; 17 x 2**60 end beyond u64
        count = rng.choice([1, 17])
        each = 2**61 if count == 1 else 2**60
        huge = [
            f'"huge.{index}.{n}":{{"dtype":"U8","shape":[{each}],'
            f'"data_offsets":[{n * each},{(n + 1) * each}]}}'
            for n in range(count)
        ]
        text, size = "{" + ",".join(huge) + "}", count * each
    if spoil == "entries":
        text, size = mutate(rng, tensors, size)
    if spoil == "text":
        old, new = change or rng.choice(TEXT_CHANGES + BATCH_CHANGES)
        text = text.replace(old, new, 1)
    if spoil == "whole":
        text = rng.choice(["{}", "{", '{"__metadata__":{"a":"b"}}', ""])
    raw = text.encode("utf-8", "surrogatepass")
    return raw, 8 + len(raw) + size


def batches(rng: random.Random) -> Iterator[list[tuple[bytes, int]]]:
    """Clean batches; batches with one header spoiled, in each text change and each other
    way (the case a batch must not hide); batches spoiled all over."""
    for _ in range(100):
        yield [batch_member(rng, index, None) for index in range(rng.randint(2, 12))]
    for change in TEXT_CHANGES[1:] + BATCH_CHANGES:
        for _ in range(3):
            spoiled = rng.randrange(3)
            yield [
                batch_member(rng, index, "text" if index == spoiled else None, change)
                for index in range(3)
            ]
    for spoil in SPOILS:
        for _ in range(40 if spoil != "entries" else 200):
            count = rng.randint(2, 8)
            spoiled = rng.randrange(count)
            yield [
                batch_member(rng, index, spoil if index == spoiled else None)
                for index in range(count)
            ]
    for _ in range(100):
        spoils = [*SPOILS, None, None, None]
        yield [batch_member(rng, index, rng.choice(spoils)) for index in range(rng.randint(1, 12))]
    lacking, surplus = ("}}", "},"), ('},"', '}}"')  # no closing `}`, one too early
    for _ in range(20):  # what one header lacks, another has too much of
        raw, size = batch_member(rng, 1, "text", surplus)
        empty = (b"{", 9 + size - 8 - len(raw))  # no entry; the other's buffer size
        yield [empty, (raw, size)]
        yield [(raw, size), batch_member(rng, 2, None), empty]
        yield [
            batch_member(rng, index, "text", change)
            for index, change in enumerate((lacking, surplus))
        ]
        yield [
            batch_member(rng, index, "text", change)
            for index, change in enumerate((surplus, lacking))
        ]


@pytest.mark.slow
def test_headers_checked_together_get_each_ones_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """`parse_headers` checks a batch of canonical headers at once: every header must get
    what `parse_header` gives it alone, whatever the others in its batch are."""
    rng = random.Random(23)  # noqa: S311 - reproducible test inputs
    batches_accepted = 0
    check_all = header_module._canonical_all

    def counted(raws: list[bytes], sizes: list[int]) -> object:
        nonlocal batches_accepted
        found = check_all(raws, sizes)
        batches_accepted += found is not None
        return found

    monkeypatch.setattr(header_module, "_canonical_all", counted)
    monkeypatch.setattr(header_module, "BATCH_BYTES", 1 << 20)  # each one batch
    for members in batches(rng):
        raws, sizes = [raw for raw, _ in members], [size for _, size in members]
        together = [
            ("error", str(found)) if isinstance(found, HeaderError) else found
            for found in parse_headers(raws, sizes)
        ]
        alone = [verdict_of(raw, size) for raw, size in members]
        assert together == alone, raws
    assert batches_accepted > 100, batches_accepted


def test_headers_are_batched_by_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few bytes up to one of everything give the same headers."""
    rng = random.Random(29)  # noqa: S311 - reproducible test inputs
    members = [batch_member(rng, index, None) for index in range(60)]
    members[17] = batch_member(rng, 17, "entries")
    raws, sizes = [raw for raw, _ in members], [size for _, size in members]
    alone = [verdict_of(raw, size) for raw, size in members]
    for batch_bytes in (0, 100, 1000, 4096, 1 << 20):
        monkeypatch.setattr(header_module, "BATCH_BYTES", batch_bytes)
        together = [
            ("error", str(found)) if isinstance(found, HeaderError) else found
            for found in parse_headers(raws, sizes)
        ]
        assert together == alone, batch_bytes


def verdict_of(raw: bytes, size: int) -> object:
    try:
        return parse_header(raw, size)
    except HeaderError as error:
        return ("error", str(error))
