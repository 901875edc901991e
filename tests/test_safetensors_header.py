"""Our safetensors header validator against `safetensors.safe_open`, file by file.

Every case is a real file on disk; the library is the oracle. Valid files come
from the library's own writer (numpy arrays) as well as from hand-built headers.
"""

from __future__ import annotations

import errno
import json
import os
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from gates.safetensors.dtypes import DTYPE_BITS
from gates.safetensors.header import FIRST_READ, HeaderError, read_header

Writer = Callable[[Path], None]


def raw(header: bytes, data: bytes = b"", length: int | None = None) -> Writer:
    def write(path: Path) -> None:
        size = len(header) if length is None else length
        path.write_bytes(struct.pack("<Q", size) + header + data)

    return write


def tensors(header: dict[str, object], data: bytes = b"") -> Writer:
    return raw(json.dumps(header).encode(), data)


def f32(start: int, end: int, *shape: int) -> dict[str, object]:
    return {"dtype": "F32", "shape": list(shape), "data_offsets": [start, end]}


def library(arrays: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> Writer:
    def write(path: Path) -> None:
        save_file(arrays, str(path), metadata=metadata)

    return write


def truncated(writer: Writer, keep: int) -> Writer:
    def write(path: Path) -> None:
        writer(path)
        path.write_bytes(path.read_bytes()[:keep])

    return write


RNG = np.random.default_rng(0)
GOOD = library(
    {"w": RNG.standard_normal((4, 3)).astype(np.float32), "b": np.arange(3, dtype=np.int64)}
)

CASES: dict[str, Writer] = {
    "library-f32-i64": GOOD,
    "library-with-metadata": library({"x": np.ones((2, 2), np.float16)}, {"format": "pt"}),
    "library-many-dtypes": library(
        {
            name: np.zeros((3,), dtype)
            for name, dtype in [
                ("u8", np.uint8),
                ("i8", np.int8),
                ("i16", np.int16),
                ("u16", np.uint16),
                ("i32", np.int32),
                ("u32", np.uint32),
                ("f64", np.float64),
                ("u64", np.uint64),
                ("bool", np.bool_),
                ("c64", np.complex64),
            ]
        }
    ),
    "library-scalar-and-empty": library(
        {"s": np.array(3.0, dtype=np.float32), "e": np.zeros((0, 4), np.float32)}
    ),
    "empty-object": tensors({}),
    "metadata-only": tensors({"__metadata__": {"a": "b"}}),
    "metadata-null": tensors({"__metadata__": None, "a": f32(0, 4, 1)}, b"\0" * 4),
    "extra-field-ignored": tensors({"a": {**f32(0, 4, 1), "note": 1.5, "neg": -3}}, b"\0" * 4),
    "padded-header": raw(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}    ', b"\0" * 4),
    "leading-whitespace": raw(
        b' {"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4
    ),
    "zero-size-before": tensors({"z": f32(0, 0, 0), "a": f32(0, 4, 1)}, b"\0" * 4),
    "zero-size-after": tensors({"a": f32(0, 4, 1), "z": f32(4, 4, 0)}, b"\0" * 4),
    "empty-name": tensors({"": f32(0, 4, 1)}, b"\0" * 4),
    "f4-even": tensors({"a": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]}}, b"\0" * 2),
    "f6-four": tensors(
        {"a": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]}}, b"\0" * 3
    ),
    # malformed
    "shorter-than-8": lambda p: p.write_bytes(b"\x01\x02"),
    "truncated-data": truncated(GOOD, 60),
    "truncated-header": truncated(GOOD, 20),
    "length-past-end": raw(b"{}", length=100),
    "length-absurd": raw(b"{}", length=2**63),
    "length-just-over-limit": raw(b"{}", length=100_000_001),
    "not-json": raw(b"hello"),
    "json-array": tensors([1, 2]),  # type: ignore[arg-type]
    "json-string": raw(b'"x"'),
    "utf8-bom": raw(b"\xef\xbb\xbf{}"),
    "non-utf8": raw(b'{"\xff":1}'),
    "trailing-nul": raw(b"{}\x00\x00"),
    "lone-surrogate": raw(b'{"__metadata__":{"a":"\\ud800"}}'),
    "overlapping-offsets": tensors({"a": f32(0, 8, 2), "b": f32(4, 8, 1)}, b"\0" * 8),
    "hole-between": tensors({"a": f32(0, 4, 1), "b": f32(8, 12, 1)}, b"\0" * 12),
    "not-from-zero": tensors({"a": f32(4, 8, 1)}, b"\0" * 8),
    "reversed-offsets": tensors({"a": f32(4, 0, 0)}, b"\0" * 4),
    "zero-size-in-middle": tensors({"a": f32(0, 4, 1), "z": f32(2, 2, 0)}, b"\0" * 4),
    "trailing-bytes": tensors({"a": f32(0, 8, 2)}, b"\0" * 9),
    "unknown-dtype": tensors(
        {"a": {"dtype": "F31", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4
    ),
    "lowercase-dtype": tensors(
        {"a": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4
    ),
    "dtype-not-string": tensors(
        {"a": {"dtype": 1, "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4
    ),
    "shape-size-disagree": tensors({"a": f32(0, 8, 3)}, b"\0" * 8),
    "negative-dim": tensors({"a": f32(0, 4, -1)}, b"\0" * 4),
    "negative-zero-offset": raw(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[-0,4]}}', b"\0" * 4
    ),
    "float-dim": raw(b'{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', b"\0" * 4),
    "exponent-dim": raw(b'{"a":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}}', b"\0" * 4),
    "bool-dim": raw(b'{"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}}', b"\0" * 4),
    "dim-over-u64": raw(
        b'{"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}}', b"\0" * 4
    ),
    "size-overflow": raw(
        b'{"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,0]}}'
    ),
    "shape-not-list": tensors(
        {"a": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}}, b"\0" * 4
    ),
    "three-offsets": tensors(
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 4]}}, b"\0" * 4
    ),
    "missing-shape": tensors({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, b"\0" * 4),
    "tensor-not-object": tensors({"a": [1]}),
    "metadata-int-value": tensors({"__metadata__": {"x": 1}}),
    "metadata-list": tensors({"__metadata__": ["x"]}),
    "duplicate-field": raw(
        b'{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4
    ),
    "duplicate-name-last-invalid": raw(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
        b"\0" * 4,
    ),
    "f4-odd-count": tensors(
        {"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, b"\0" * 2
    ),
    "f6-three": tensors(
        {"a": {"dtype": "F6_E2M3", "shape": [3], "data_offsets": [0, 3]}}, b"\0" * 3
    ),
}
CASES.update(
    {
        f"dtype-{name}": tensors(
            {"a": {"dtype": name, "shape": [16], "data_offsets": [0, 2 * bits]}}, b"\0" * (2 * bits)
        )
        for name, bits in DTYPE_BITS.items()
    }
)


def paddle_written(path: Path) -> None:
    """Written through Paddle tensors, the way PaddleFormers saves checkpoints."""
    import paddle  # noqa: PLC0415  (slow import, only for the cases that need it)
    from safetensors.paddle import save_file as paddle_save  # noqa: PLC0415

    weight = paddle.to_tensor(RNG.standard_normal((4, 8)).astype(np.float32))
    paddle_save(
        {"linear.weight": weight.astype("bfloat16"), "linear.bias": paddle.zeros([8], "float32")},
        str(path),
    )


CASES["paddle-bf16-and-f32"] = paddle_written


def library_accepts(path: Path) -> bool:
    try:
        with safe_open(str(path), "np") as handle:
            list(handle.keys())
    except Exception:  # noqa: BLE001  (the oracle's verdict is all we need)
        return False
    return True


def ours_accepts(path: Path) -> bool:
    try:
        read_header(path)
    except HeaderError:
        return False
    return True


def test_the_cases_are_many_and_of_both_kinds(tmp_path: Path) -> None:
    verdicts = []
    for name, writer in CASES.items():
        path = tmp_path / f"{name}.safetensors"
        writer(path)
        verdicts.append(library_accepts(path))
    assert len(CASES) >= 30
    assert verdicts.count(True) >= 10
    assert verdicts.count(False) >= 30


@pytest.mark.parametrize("name", list(CASES))
def test_we_agree_with_the_library(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.safetensors"
    CASES[name](path)
    assert ours_accepts(path) == library_accepts(path)


@pytest.mark.parametrize(
    "header",
    [
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
        b'{"__metadata__":{"k":"1","k":"2"}}',
    ],
)
def test_repeated_keys_are_rejected_where_the_library_keeps_the_last(
    tmp_path: Path, header: bytes
) -> None:
    path = tmp_path / "dup.safetensors"
    raw(header, b"\0" * 4 if b'"a"' in header else b"")(path)
    assert library_accepts(path)
    with pytest.raises(HeaderError, match="duplicate key"):
        read_header(path)


def test_header_entries_match_the_library(tmp_path: Path) -> None:
    path = tmp_path / "good.safetensors"
    GOOD(path)
    header = read_header(path)
    with safe_open(str(path), "np") as handle:
        names = set(handle.keys())
        for name in names:
            entry = header.tensors[name]
            assert list(entry.shape) == handle.get_slice(name).get_shape()
            assert entry.dtype == handle.get_slice(name).get_dtype()
    assert set(header.tensors) == names
    data = path.read_bytes()
    w = header.tensors["w"]
    expected = np.frombuffer(
        data[header.data_start + w.start : header.data_start + w.end], np.float32
    )
    with safe_open(str(path), "np") as handle:
        assert np.array_equal(expected.reshape(4, 3), handle.get_tensor("w"))


def test_a_hostile_length_of_two_to_the_63_allocates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "hostile.safetensors"
    raw(b"{}", length=2**63)(path)
    tracemalloc.start()
    with pytest.raises(HeaderError, match="header too large"):
        read_header(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1_000_000


def test_a_symlink_a_fifo_and_a_folder_are_refused(tmp_path: Path) -> None:
    good = tmp_path / "good.safetensors"
    GOOD(good)
    (tmp_path / "link.safetensors").symlink_to(good)
    os.mkfifo(tmp_path / "fifo.safetensors")  # no writer: a blocking open would hang
    (tmp_path / "folder.safetensors").mkdir()
    errors = {}
    for name in ("link", "fifo", "folder", "missing"):
        with pytest.raises(OSError) as raised:
            read_header(tmp_path / f"{name}.safetensors")
        errors[name] = raised.value.errno
    assert errors == {
        "link": errno.ELOOP,
        "fifo": errno.ESPIPE,
        "folder": errno.EISDIR,
        "missing": errno.ENOENT,
    }
    assert read_header(good).tensors


def test_a_header_longer_than_the_first_read(tmp_path: Path) -> None:
    """A file of more than 64 KiB: its header comes from a second read."""
    names = {f"tensor.{index:05d}.with.a.long.name": np.zeros(1, np.uint8) for index in range(3000)}
    path = tmp_path / "long.safetensors"
    library(names)(path)
    assert path.stat().st_size > FIRST_READ
    short = tmp_path / "short.safetensors"
    truncated(library(names), FIRST_READ + 100)(short)
    assert len(read_header(path).tensors) == 3000
    with pytest.raises(HeaderError, match="invalid header length"):
        read_header(short)
