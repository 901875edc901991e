"""The one safetensors header reader: reads only the header, validates all of it.

Format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an
object: tensor name -> {dtype, shape, data_offsets}, plus an optional
`__metadata__` string -> string map), then the byte buffer. It accepts what the
`safetensors` library accepts and rejects what it rejects (a differential test
and a hypothesis fuzzer hold us to that), with one deliberate exception: a
repeated JSON key, which the library's README forbids but the library resolves
by keeping the last one (or ignores, inside an unknown field), is rejected
here, since two readers could then see two different checkpoints.

The header is parsed once, by Python's JSON decoder with a hook that refuses a
repeated key, and then validated in one pass: each entry, then the layout.
The library parses with serde_json, whose limits we mirror where Python's
json is laxer: nesting depth (serde_json refuses a 128th level), the
non-standard `NaN`/`Infinity` tokens and numbers beyond the float64 range
(both refused by serde_json), lone UTF-16 surrogates, `-0` (a float to
serde_json, so never a size or an offset) and the element count, whose every
partial product must fit a u64, in the order the library multiplies.

The header length is checked against the file size before anything is read,
so a hostile length of 2**63 allocates nothing.
"""

from __future__ import annotations

import json
import math
import operator
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gates.core.content_ids import DuplicateKeyError, unique_pairs
from gates.safetensors.dtypes import DTYPE_BITS

MAX_HEADER_BYTES = 100_000_000
USIZE_MAX = 2**64 - 1
METADATA_KEY = "__metadata__"
#: serde_json's recursion limit: a value nested 128 levels deep (top object = 1) is refused.
MAX_DEPTH = 127
_FIELDS = frozenset(("dtype", "shape", "data_offsets"))


class HeaderError(ValueError):
    """The file is not a valid safetensors file; the message says why."""


class TruncatedError(HeaderError):
    """A valid header whose tensors end past the end of the file: the file is cut short (or
    still being written). ``needed``: the file size the header declares; ``file_size``: the
    file's."""

    def __init__(self, message: str, needed: int, file_size: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.file_size = file_size


class TensorEntry(NamedTuple):
    """One tensor of a header: where its bytes are, relative to the byte buffer."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Header:
    """A shard's header: its tensors by name (in the header's order), its metadata, where its
    byte buffer starts and the file's size."""

    tensors: dict[str, TensorEntry]
    metadata: dict[str, str] | None
    data_start: int
    file_size: int


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _NegativeZero(int):
    """JSON `-0`: Python reads it as the integer 0, serde_json as the float -0.0."""


def _parse_int(text: str) -> int:
    return _NegativeZero(0) if text == "-0" else int(text)


def _check_strings(value: Any) -> None:
    """serde_json refuses lone UTF-16 surrogates; Python's json lets them through."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise HeaderError("invalid JSON in header: lone surrogate in a string") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key)
            _check_strings(item)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)


def _not_usize(value: Any, where: str) -> HeaderError:
    return HeaderError(f"invalid JSON in header: {where}: {value!r} is not an unsigned integer")


def _entry(name: str, info: Any) -> TensorEntry:
    # `type(...) is int` on purpose: it excludes bool and the -0 marker.
    if type(info) is not dict:
        raise HeaderError(f"invalid JSON in header: tensor {name!r} is not an object")
    try:
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    except KeyError as missing:
        raise HeaderError(
            f"invalid JSON in header: tensor {name!r}: missing field {missing}"
        ) from None
    if type(dtype) is not str or dtype not in DTYPE_BITS:
        raise HeaderError(f"invalid JSON in header: tensor {name!r}: unknown dtype {dtype!r}")
    if type(shape) is not list:
        raise HeaderError(f"invalid JSON in header: tensor {name!r}: shape is not a list")
    if type(offsets) is not list or len(offsets) != 2:
        raise HeaderError(f"invalid JSON in header: tensor {name!r}: data_offsets is not a pair")
    for dim in shape:
        if type(dim) is not int or not 0 <= dim <= USIZE_MAX:
            raise _not_usize(dim, f"tensor {name!r} shape")
    start, end = offsets
    for offset in offsets:
        if type(offset) is not int or not 0 <= offset <= USIZE_MAX:
            raise _not_usize(offset, f"tensor {name!r} data_offsets")
    if len(info) > len(_FIELDS):
        for field_name, value in info.items():
            if field_name not in _FIELDS:
                _check_ignored(value, f"tensor {name!r} field {field_name!r}")
    return TensorEntry(name, dtype, tuple(shape), start, end)


def _check_ignored(value: Any, where: str) -> None:
    """An unknown field is skipped by the library, but serde_json still parses it: refuse
    what serde_json refuses (too deep, NaN/Infinity, a number beyond float64)."""
    pending: list[tuple[Any, int]] = [(value, 3)]  # the top object and the tensor's are 1 and 2
    while pending:
        item, depth = pending.pop()
        if type(item) is float and not math.isfinite(item):
            raise HeaderError(
                f"invalid JSON in header: {where}: {item} is not a finite JSON number "
                "(NaN, Infinity or out of the float64 range)"
            )
        if type(item) is int and not _fits_float64(item):
            raise HeaderError(f"invalid JSON in header: {where}: integer out of the float64 range")
        if isinstance(item, (list, dict)):
            if depth > MAX_DEPTH:
                raise HeaderError(
                    f"invalid JSON in header: {where}: nested deeper than {MAX_DEPTH} levels"
                )
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)


def _fits_float64(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _metadata(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise HeaderError("invalid JSON in header: __metadata__ must map strings to strings")
    return value


_BY_OFFSETS = operator.itemgetter(3, 4)  # TensorEntry.start, TensorEntry.end


def _elements(entry: TensorEntry) -> int:
    """The element count, every partial product within u64 as the library multiplies; a
    product within u64 of dimensions all >= 1 has every partial product within it."""
    elements = math.prod(entry.shape)
    if 0 < elements <= USIZE_MAX or not entry.shape:
        return elements
    elements = 1
    for dim in entry.shape:
        elements *= dim
        if elements > USIZE_MAX:
            raise HeaderError(f"overflow computing the size of tensor {entry.name!r}")
    return elements


def _check_layout(tensors: list[TensorEntry], buffer_size: int, data_start: int) -> None:
    """Offsets contiguous from 0, sizes = elements x dtype size, buffer covered exactly (a
    buffer shorter than the tensors: `TruncatedError`)."""
    offset = 0
    for entry in sorted(tensors, key=_BY_OFFSETS):
        if entry.start != offset or entry.end < entry.start:
            raise HeaderError(f"invalid offset for tensor {entry.name!r}")
        bits = _elements(entry) * DTYPE_BITS[entry.dtype]
        if bits > USIZE_MAX:
            raise HeaderError(f"overflow computing the size of tensor {entry.name!r}")
        if bits % 8:
            raise HeaderError(f"tensor {entry.name!r} does not end on a byte boundary")
        if bits // 8 != entry.end - entry.start:
            raise HeaderError(
                f"tensor {entry.name!r}: shape {list(entry.shape)} of {entry.dtype} needs "
                f"{bits // 8} bytes, data_offsets give {entry.end - entry.start}"
            )
        offset = entry.end
    if offset > buffer_size:
        raise TruncatedError(
            f"incomplete metadata: the tensors cover {offset} of {buffer_size} buffer bytes",
            data_start + offset,
            data_start + buffer_size,
        )
    if offset != buffer_size:
        raise HeaderError(
            f"incomplete metadata: the tensors cover {offset} of {buffer_size} buffer bytes"
        )


_NEGATIVE_ZERO = re.compile(r"-0(?![0-9.eE])")


def _load_json(text: str) -> dict[str, Any]:
    """The header's JSON object; a repeated key, bad JSON or too deep a nesting refused. A
    `-0` is read as the marker only where the text has one (the hook costs a call per
    integer; without a `-0` token it would return what `int` does)."""
    parse_int = _parse_int if _NEGATIVE_ZERO.search(text) else None
    try:
        document = json.loads(text, object_pairs_hook=unique_pairs, parse_int=parse_int)
    except DuplicateKeyError as exc:
        raise HeaderError(f"invalid JSON in header: {exc}") from None
    except json.JSONDecodeError as exc:
        raise HeaderError(f"invalid JSON in header: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise HeaderError(
            f"invalid JSON in header: nested deeper than {MAX_DEPTH} levels"
        ) from None
    except ValueError as exc:  # an integer literal of more than 4,300 digits
        raise HeaderError(f"invalid JSON in header: number out of range ({exc})") from None
    if not isinstance(document, dict):
        raise HeaderError("invalid JSON in header: not an object")
    return document


def parse_header(raw: bytes, file_size: int) -> Header:
    """Validate header bytes (without the length prefix) for a file of ``file_size`` bytes."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderError(f"invalid UTF-8 in header: {exc.reason}") from None
    document = _load_json(text)
    if _SURROGATE_ESCAPE.search(text):  # a lone surrogate can only come from an escape
        _check_strings(document)
    metadata = _metadata(document.pop(METADATA_KEY, None))
    entries = [_entry(name, info) for name, info in document.items()]
    data_start = 8 + len(raw)
    _check_layout(entries, file_size - data_start, data_start)
    return Header({entry.name: entry for entry in entries}, metadata, data_start, file_size)


FIRST_READ = 64 * 1024


def _header_bytes(fd: int, start: bytes, size: int) -> bytes:
    """The header's bytes, given the file's first ``start`` bytes and its size."""
    if len(start) < 8:
        raise HeaderError("header too small: the file is shorter than 8 bytes")
    (length,) = struct.unpack_from("<Q", start)
    if length > MAX_HEADER_BYTES:
        raise HeaderError(f"header too large: {length} bytes declared")
    if 8 + length > size:
        raise HeaderError(f"invalid header length: {length} bytes declared, file has {size}")
    raw = start[8 : 8 + length] if 8 + length <= len(start) else os.pread(fd, length, 8)
    if len(raw) != length:
        raise HeaderError(f"header changed while read: {len(raw)} of {length} bytes")
    return raw


# O_NOFOLLOW: a symlink put in a file's place after the caller looked is refused by the open
# itself (ELOOP); O_NONBLOCK: a FIFO there cannot hang the open (its read then fails).
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_header(path: Path | str) -> Header:
    """Read and validate the header of one safetensors file (never its tensor bytes).

    One read of the first 64 KiB covers most headers; a longer one is read
    after its declared length has been checked against the file size. A symlink is
    refused (OSError, ELOOP).
    """
    fd = os.open(path, OPEN_FLAGS)
    try:
        size = os.fstat(fd).st_size
        raw = _header_bytes(fd, os.pread(fd, FIRST_READ, 0), size)
    finally:
        os.close(fd)
    return parse_header(raw, size)
