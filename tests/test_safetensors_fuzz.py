"""Differential fuzzing: hypothesis writes safetensors files, `safetensors.safe_open` and our
header reader each judge them, and they must agree.

The one allowed disagreement: a repeated JSON key, which the library's README forbids
("Duplicate keys are disallowed") but the library lets through; we refuse it by name.
Where both accept, the names, dtypes, shapes and metadata must be the library's.

Budget: GATES_FUZZ_EXAMPLES examples (default 150, a few seconds, run by `make test`).
A longer hunt:
    GATES_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest tests/test_safetensors_fuzz.py
Every file that once made the two disagree is kept in tests/data/safetensors-regressions/.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open

from gates.safetensors.dtypes import DTYPE_BITS
from gates.safetensors.header import HeaderError, read_header

EXAMPLES = int(os.environ.get("GATES_FUZZ_EXAMPLES", "150"))
REGRESSIONS = Path(__file__).parent / "data" / "safetensors-regressions"

VALID_DTYPES = list(DTYPE_BITS)
HUGE = [2**32, 2**61, 2**62, 2**63, 2**64 - 1, 2**64]
ODD_SPELLINGS = ["{n}.0", "{n}e0", "-{n}", "0{n}", "-0", "{n}E+0", " {n} "]
ODD_WHITESPACE = ["\t", "\n", "\r", "\x0c", "\x00", "\ufeff", "\u00a0"]
DUPLICATE = "\x00again:"  # a field key with this prefix is written without it: a repeated key
#: What one mutation changes in one tensor entry (mutate_tensor), then in the whole file.
TENSOR_MUTATIONS = (
    "spelling",
    "huge_dim",
    "offset",
    "size",
    "dtype",
    "extra_value",
    "extra_deep",
    "duplicate_field",
    "drop_field",
)
FILE_MUTATIONS = ("duplicate_tensor", "metadata_value", "whitespace", "byte", "length", "buffer")
MUTATIONS = TENSOR_MUTATIONS + FILE_MUTATIONS

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**320),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=4,
)


def mutate_tensor(draw: st.DrawFn, mutation: str, fields: dict[str, str]) -> None:
    """Change one tensor entry's JSON text (field name -> value text) in place."""
    if not {"shape", "data_offsets"} <= fields.keys():
        return  # a field was dropped already: nothing left to change there
    try:
        json.loads(fields["shape"])
    except ValueError:
        return  # an earlier "spelling" mutation left a number JSON refuses (`00`): keep it
    if mutation == "spelling":
        shape = json.loads(fields["shape"])
        if shape:
            index = draw(st.integers(0, len(shape) - 1))
            spelled = [str(dim) for dim in shape]
            spelled[index] = draw(st.sampled_from(ODD_SPELLINGS)).format(n=shape[index])
            fields["shape"] = "[" + ",".join(spelled) + "]"
    elif mutation == "huge_dim":
        shape = json.loads(fields["shape"])
        shape.insert(draw(st.integers(0, len(shape))), draw(st.sampled_from(HUGE)))
        fields["shape"] = json.dumps(shape)
    elif mutation in ("offset", "size"):
        begin, stop = json.loads(fields["data_offsets"])
        delta = draw(st.sampled_from([1, -1, 2**64, -(2**63)]))
        begin, stop = (begin + delta, stop) if mutation == "offset" else (begin, stop + delta)
        fields["data_offsets"] = f"[{begin},{stop}]"
    elif mutation == "dtype":
        fields["dtype"] = json.dumps(draw(st.sampled_from(["F31", "f32", "", "I4", "BF8"])))
    elif mutation == "extra_value":
        fields[draw(st.sampled_from(["x", "note"]))] = json.dumps(draw(json_values))
    elif mutation == "extra_deep":
        depth = draw(st.integers(min_value=120, max_value=1500))
        fields["x"] = "[" * depth + "]" * depth
    elif mutation == "duplicate_field":
        key = draw(st.sampled_from(list(fields)))
        fields[DUPLICATE + key] = fields[key]  # written as `key` a second time
    elif mutation == "drop_field" and fields:
        del fields[draw(st.sampled_from(list(fields)))]


@st.composite
def valid_tensors(draw: st.DrawFn) -> tuple[list[tuple[str, dict[str, str]]], int]:
    """Tensor entries (name, field -> JSON text) laid out back to back, and the buffer size."""
    names = draw(st.lists(st.text(max_size=5), max_size=4, unique=True))
    tensors: list[tuple[str, dict[str, str]]] = []
    end = 0
    for name in names:
        dtype = draw(st.sampled_from(VALID_DTYPES))
        bits = DTYPE_BITS[dtype]
        dims = draw(st.lists(st.integers(0, 4), max_size=3))
        elements = 1
        for dim in dims:
            elements *= dim
        if elements * bits % 8:
            dims, elements = [*dims, 8], elements * 8
        size = elements * bits // 8
        fields = {
            "dtype": json.dumps(dtype),
            "shape": "[" + ",".join(map(str, dims)) + "]",
            "data_offsets": f"[{end},{end + size}]",
        }
        tensors.append((name, fields))
        end += size
    return tensors, end


@st.composite
def safetensors_file(draw: st.DrawFn) -> bytes:
    """A valid file as the library writes it, then zero to two mutations of its bytes,
    numbers, fields or lengths (so most examples sit right at the edge of validity)."""
    tensors, end = draw(valid_tensors())
    metadata: object = draw(st.none() | st.dictionaries(st.text(max_size=4), st.text(max_size=4)))
    padding = [draw(st.sampled_from(["", " " * draw(st.integers(1, 7))])), ""]
    length_delta = buffer_delta = 0
    byte_at: tuple[int, int] | None = None
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), max_size=2)):
        target = draw(st.sampled_from(tensors)) if tensors else None
        if mutation in TENSOR_MUTATIONS and target:
            mutate_tensor(draw, mutation, target[1])
        elif mutation == "duplicate_tensor" and target:
            tensors.append(target)
        elif mutation == "metadata_value":
            metadata = draw(json_values)
        elif mutation == "whitespace":
            padding[draw(st.integers(0, 1))] = draw(st.sampled_from(ODD_WHITESPACE))
        elif mutation == "byte":
            byte_at = (draw(st.integers(0, 10_000)), draw(st.integers(0, 255)))
        elif mutation == "length":
            length_delta = draw(st.sampled_from([1, -1, 2**63, 100_000_001]))
        elif mutation == "buffer":
            buffer_delta = draw(st.sampled_from([1, -1]))
    entries = [
        json.dumps(name)
        + ":{"
        + ",".join(
            f"{json.dumps(key.removeprefix(DUPLICATE))}:{value}" for key, value in fields.items()
        )
        + "}"
        for name, fields in tensors
    ]
    if metadata is not None:
        entries.insert(draw(st.integers(0, len(entries))), f'"__metadata__":{json.dumps(metadata)}')
    header = f"{padding[1]}{{{','.join(entries)}}}{padding[0]}".encode("utf-8", "surrogatepass")
    if byte_at is not None and header:
        position = byte_at[0] % len(header)
        header = header[:position] + bytes([byte_at[1]]) + header[position + 1 :]
    buffer = b"\0" * max(0, end + buffer_delta)
    length = max(0, min(len(header) + length_delta, 2**64 - 1))
    return struct.pack("<Q", length) + header + buffer


def library_view(path: Path) -> dict[str, Any] | None:
    """What safe_open lists (names, dtypes, shapes, metadata), or None when it refuses."""
    try:
        with safe_open(str(path), "np") as handle:
            tensors = {
                name: (handle.get_slice(name).get_dtype(), handle.get_slice(name).get_shape())
                for name in handle.keys()  # noqa: SIM118  (safe_open has no __iter__)
            }
            return {"tensors": tensors, "metadata": handle.metadata()}
    except Exception:  # noqa: BLE001  (the oracle's verdict is all we need)
        return None


def assert_agree(path: Path) -> None:
    expected = library_view(path)
    try:
        header = read_header(path)
    except HeaderError as error:
        if expected is not None:
            assert "duplicate key" in str(error), f"we refuse what the library accepts: {error}"
        return
    assert expected is not None, "we accept a file the library refuses"
    ours = {name: (t.dtype, list(t.shape)) for name, t in header.tensors.items()}
    assert ours == {name: (d, list(s)) for name, (d, s) in expected["tensors"].items()}
    assert (header.metadata or None) == (expected["metadata"] or None)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=safetensors_file())
@pytest.mark.slow
def test_we_agree_with_the_library_on_generated_files(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.safetensors"
    path.write_bytes(data)
    assert_agree(path)


@pytest.mark.parametrize("name", sorted(p.name for p in REGRESSIONS.glob("*.safetensors")))
def test_the_kept_failing_examples_agree_now(name: str) -> None:
    path = REGRESSIONS / name
    assert library_view(path) is None, "each kept example is a file the library refuses"
    assert_agree(path)


def test_regression_files_are_kept() -> None:
    assert len(list(REGRESSIONS.glob("*.safetensors"))) >= 5
