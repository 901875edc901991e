"""A safetensors header reader of our own: reads only the header, validates all of it.

Format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an
object: tensor name -> {dtype, shape, data_offsets}, plus an optional
`__metadata__` string -> string map), then the byte buffer. It accepts what the
`safetensors` library accepts and rejects what it rejects (a differential test
and a hypothesis fuzzer hold us to that), with one deliberate exception: a
repeated JSON key, which the library's README forbids but the library resolves
by keeping the last one (or ignores, inside an unknown field), is rejected
here, since two readers could then see two different checkpoints.

The library parses with serde_json, whose limits we mirror where Python's
json is laxer: nesting depth (serde_json refuses a 128th level), the
non-standard `NaN`/`Infinity` tokens and numbers beyond the float64 range
(both refused by serde_json), and the element count, whose every partial
product must fit a u64, in the order the library multiplies.

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
from collections.abc import Collection, Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import accumulate, chain, compress, repeat
from pathlib import Path
from typing import Any, NamedTuple

from gates.core.canonical import DuplicateKeyError, unique_pairs
from gates.core.rows import as_rows
from gates.safetensors.dtypes import DTYPE_BITS

MAX_HEADER_BYTES = 100_000_000
USIZE_MAX = 2**64 - 1
METADATA_KEY = "__metadata__"
#: serde_json's recursion limit: a value nested 128 levels deep (top object = 1) is refused.
MAX_DEPTH = 127
_FIELDS = frozenset(("dtype", "shape", "data_offsets"))


class HeaderError(ValueError):
    """The file is not a valid safetensors file; the message says why."""


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


class Columns(NamedTuple):
    """A header's tensors as columns, in the header's order: what the canonical scan
    reads, before any `TensorEntry` is made."""

    names: list[str]
    dtypes: list[str]
    shapes: list[tuple[int, ...]]
    starts: list[int]
    ends: list[int]


_KIND_OF_ENTRY = operator.itemgetter(1, 2)  # TensorEntry.dtype, TensorEntry.shape


class Header:
    """A shard's header: its tensors by name, its metadata, where its byte buffer starts
    and the file's size. The canonical scan hands over columns (`Columns`); a
    `TensorEntry` per tensor is made the first time `tensors` is asked for (an inventory
    diff needs only the names, dtypes and shapes: `names`, `kinds`)."""

    __slots__ = ("_held", "data_start", "file_size", "metadata")

    def __init__(
        self,
        tensors: dict[str, TensorEntry] | Columns,
        metadata: dict[str, str] | None,
        data_start: int,
        file_size: int,
    ) -> None:
        self._held = tensors
        self.metadata = metadata
        self.data_start = data_start
        self.file_size = file_size

    @property
    def tensors(self) -> dict[str, TensorEntry]:
        held = self._held
        if isinstance(held, Columns):
            made = new_entries(zip(*held, strict=True))
            held = self._held = dict(zip(held.names, made, strict=True))
        return held

    @property
    def names(self) -> Collection[str]:
        """The tensors' names, in the header's order."""
        held = self._held
        return held.names if isinstance(held, Columns) else held.keys()

    def kinds(self) -> Iterator[tuple[str, tuple[int, ...]]]:
        """Each tensor's (dtype, shape), in the header's order."""
        held = self._held
        if isinstance(held, Columns):
            return zip(held.dtypes, held.shapes, strict=True)
        return map(_KIND_OF_ENTRY, held.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Header):
            return NotImplemented
        return (self.tensors, self.metadata, self.data_start, self.file_size) == (
            other.tensors,
            other.metadata,
            other.data_start,
            other.file_size,
        )

    # unhashable, as its tensors and metadata (dicts) are
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Header(tensors={self.tensors!r}, metadata={self.metadata!r}, "
            f"data_start={self.data_start!r}, file_size={self.file_size!r})"
        )


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


def _usize(value: Any, where: str) -> int:
    # `type(...) is int` on purpose: it excludes bool and the -0 marker.
    if type(value) is not int or not 0 <= value <= USIZE_MAX:
        raise HeaderError(f"invalid JSON in header: {where}: {value!r} is not an unsigned integer")
    return value


def _entry(name: str, info: Any) -> TensorEntry:
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
        _usize(dim, f"tensor {name!r} shape")
    start, end = offsets
    _usize(start, f"tensor {name!r} data_offsets")
    _usize(end, f"tensor {name!r} data_offsets")
    if len(info) > len(_FIELDS):
        for field_name, value in info.items():
            if field_name not in _FIELDS:
                _check_ignored(value, f"tensor {name!r} field {field_name!r}")
    return TensorEntry(name, dtype, tuple(shape), start, end)


def new_entries(fields: Iterable[tuple[str, str, tuple[int, ...], int, int]]) -> list[TensorEntry]:
    """The entry of each (name, dtype, shape, start, end), made in C (`as_rows`)."""
    return list(as_rows(TensorEntry, fields))


def _bulk_entries(  # noqa: PLR0911 - each return is one check failing
    document: dict[str, Any], buffer_size: int
) -> list[TensorEntry] | None:
    """Every entry and the whole layout checked at once, in C-level passes (map, set,
    list equality) instead of a Python loop per tensor; None when anything is not the
    plain, valid case, and `_entries` + `_check_layout` then find the exact error.

    Sound by construction: it accepts only when each condition the per-tensor checks
    test holds (three known fields, a known dtype, unsigned integers within u64,
    offsets contiguous from 0 and covering the buffer, size = elements x dtype size).
    """
    infos = list(document.values())
    if not infos:
        return None
    try:
        if set(map(type, infos)) != {dict} or set(map(len, infos)) != {3}:
            return None  # an extra field is checked by _check_ignored, one at a time
        dtypes = list(map(operator.itemgetter("dtype"), infos))
        shapes = list(map(operator.itemgetter("shape"), infos))
        offsets = list(map(operator.itemgetter("data_offsets"), infos))
        if not set(dtypes) <= DTYPE_BITS.keys() or set(map(type, dtypes)) != {str}:
            return None
        if set(map(type, shapes)) != {list} or set(map(type, offsets)) != {list}:
            return None
        if set(map(len, offsets)) != {2}:
            return None
        numbers = list(chain(chain.from_iterable(shapes), chain.from_iterable(offsets)))
        # `type is int` excludes bool and the -0 marker; a 0 dimension goes the exact way
        # (the library multiplies partial products, which a final 0 would hide)
        if set(map(type, numbers)) != {int} or min(numbers) < 0 or max(numbers) > USIZE_MAX:
            return None
        if 0 in chain.from_iterable(shapes):
            return None
    except (KeyError, TypeError):  # a missing field, an unhashable dtype
        return None
    starts = list(map(operator.itemgetter(0), offsets))
    ends = list(map(operator.itemgetter(1), offsets))
    return _laid_out(list(document), dtypes, list(map(tuple, shapes)), (starts, ends), buffer_size)


def _laid_out(
    names: list[str],
    dtypes: list[str],
    shapes: list[tuple[int, ...]],
    offsets: tuple[list[int], list[int]],
    buffer_size: int,
) -> list[TensorEntry] | None:
    """The entries, when sizes and offsets (starts, ends) lay the tensors out contiguously
    over the whole buffer; None otherwise. Takes known dtypes, positive dimensions and
    offsets, all within u64."""
    starts, ends = offsets
    bits = list(map(operator.mul, map(math.prod, shapes), map(DTYPE_BITS.__getitem__, dtypes)))
    if max(bits) > USIZE_MAX or bits != list(
        map(operator.mul, map(operator.sub, ends, starts), repeat(8))
    ):
        return None  # bits = 8 x (end - start) also means end >= start and whole bytes
    # Every size is positive here (no 0 dimension), so each tensor is an edge start -> end
    # with start < end; the sorted starts less the first equal to the sorted ends less the
    # last balances every inner point, which in such a graph leaves one path 0 -> buffer
    # end through every tensor: contiguous, no overlap, no gap (two int sorts, in C).
    sorted_starts, sorted_ends = sorted(starts), sorted(ends)
    if sorted_starts[0] != 0 or sorted_ends[-1] != buffer_size:
        return None
    if sorted_starts[1:] != sorted_ends[:-1]:
        return None
    return new_entries(zip(names, dtypes, shapes, starts, ends, strict=True))


# The header as the safetensors library writes it (serde_json, compact): an optional flat
# `__metadata__` first, then `"name":{"dtype":"..","shape":[..],"data_offsets":[a,b]}` for
# each tensor. Strings without escapes or control characters and integers in JSON's own
# form (no sign, no leading zero, at most 20 digits) read the same to every JSON parser,
# so such a header needs no JSON decoder: one regular expression in C reads its fields.
_STRING = r'"([^"\\\x00-\x1f]*)"'
_COUNT = r"(0|[1-9][0-9]{0,19})"
_DIM = r"[1-9][0-9]{0,19}"  # a 0 dimension goes the exact way, as in `_bulk_entries`
_DTYPE = r"[0-9A-Z_]{1,16}"
_SHAPE_FIELD = r'","shape":\['
_DIMS = "(?:" + _DIM + "(?:," + _DIM + ")*)?"
_ENTRY_START = _STRING + r':\{"dtype":"'
_ENTRY_END = r'\],"data_offsets":\[' + _COUNT + "," + _COUNT + r"\]\}([,}])"
_CANONICAL_ENTRY = re.compile(
    _ENTRY_START + "(" + _DTYPE + ")" + _SHAPE_FIELD + "(" + _DIMS + ")" + _ENTRY_END
)
#: The characters of a canonical entry besides its five fields.
_ENTRY_FRAME = len('"":{"dtype":"","shape":[],"data_offsets":[,]}') + 1
# The same entry read as four fields: name, kind, start, end; the kind is the text from the
# dtype to the shape's last dimension (`BF16","shape":[6144,2048`), one of a few dozen in a
# checkpoint, so each kind's dtype, shape and size are worked out once, not per tensor. The
# scan takes any kind up to the shape's `]`, each distinct one then held to `_KIND` (which
# costs the scan less than a strict kind per entry): once every kind is, every entry is of
# `_CANONICAL_ENTRY`'s form.
_KIND = re.compile(_DTYPE + _SHAPE_FIELD + _DIMS)
_CANONICAL_KIND_ENTRY = re.compile(
    _ENTRY_START + r'([^"]{1,16}' + _SHAPE_FIELD + r"[^\]]*)" + _ENTRY_END
)
_PAIR = _STRING + ":" + _STRING
_CANONICAL_METADATA = re.compile(r'\{"__metadata__":\{((?:' + _PAIR + ")(?:," + _PAIR + r")*)?\},")
_METADATA_PAIR = re.compile(_PAIR)
_JSON_SPACE = " \t\n\r"


def _dims(text: str) -> tuple[int, ...]:
    return tuple(map(int, text.split(","))) if text else ()


def _canonical_metadata(body: str) -> tuple[dict[str, str] | None, int] | None:
    """The flat `__metadata__` a canonical text may start with, and where its tensors start."""
    if not body.startswith('{"__metadata__":'):
        return (None, 1) if body.startswith("{") else None
    found = _CANONICAL_METADATA.match(body)
    if found is None:
        return None
    pairs = _METADATA_PAIR.findall(found.group(1) or "")
    metadata = dict(pairs)
    return (metadata, found.end()) if len(metadata) == len(pairs) else None


class _Kinds(NamedTuple):
    """What each kind's text says: the dtype, the shape and the byte size of a tensor."""

    dtypes: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    sizes: dict[str, int]


def _kinds(texts: set[str]) -> _Kinds | None:
    """Each kind's dtype, shape and size; None if any is not canonical (`_kind`)."""
    kinds = _Kinds({}, {}, {})
    for text in texts:
        read = _kind(text)
        if read is None:
            return None
        kinds.dtypes[text], kinds.shapes[text], kinds.sizes[text] = read
    return kinds


# The same few dozen kinds recur in every header of a checkpoint: each is read once.
@lru_cache(maxsize=1024)
def _kind(text: str) -> tuple[str, tuple[int, ...], int] | None:
    """A kind's dtype, shape and size in bytes; None if it is not of `_KIND`'s form or has
    an unknown dtype or a size in bits beyond u64 or not a whole number of bytes (the exact
    way names those)."""
    if _KIND.fullmatch(text) is None:
        return None
    dtype, _, dims = text.partition('","shape":[')
    shape = _dims(dims)
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        return None
    # dimensions >= 1: each one, and every partial product, is at most the size
    size = math.prod(shape) * bits
    if size > USIZE_MAX or size % 8:
        return None
    return dtype, shape, size // 8


def _canonical(text: str, data_start: int, file_size: int) -> Header | None:
    """The header of a canonical text (see above), valid and laid out contiguously; None
    for any other text, which the JSON path then reads and checks (or refuses)."""
    body = text.rstrip(_JSON_SPACE)
    start = _canonical_metadata(body)
    if start is None:
        return None
    metadata, position = start
    # the text before the first entry, then each entry's five fields and the text after it
    parts = _CANONICAL_KIND_ENTRY.split(body)
    names, kinds, starts, ends, ends_with = (parts[field::6] for field in range(1, 6))
    # The entries cover the text after the metadata without a gap (none before the first,
    # between two or after the last), separated by `,`, then the closing `}`.
    if (
        not names
        or len(parts[0]) != position
        or parts[6::6].count("") != len(names)
        or ends_with.count("}") != 1
        or ends_with[-1] != "}"
    ):
        return None
    entries = _canonical_entries(names, kinds, (starts, ends), file_size - data_start)
    if entries is None:
        return None
    distinct = set(names)
    if len(distinct) != len(names) or METADATA_KEY in distinct:
        return None  # a repeated key, or one named `__metadata__`: the JSON path decides
    if isinstance(entries, Columns):
        return Header(entries, metadata, data_start, file_size)
    return Header(dict(zip(names, entries, strict=True)), metadata, data_start, file_size)


def _canonical_entries(
    names: list[str],
    kinds: list[str],
    offsets: tuple[list[str], list[str]],
    buffer_size: int,
) -> Columns | list[TensorEntry] | None:
    """The entries of a canonical text's fields (offsets: the starts' and ends' digits),
    when they lay the tensors out contiguously over the whole buffer (as columns where
    they are in offset order, as entries where sorting found them contiguous); None
    otherwise."""
    read = _kinds(set(kinds))
    if read is None:
        return None
    starts, ends = offsets
    dtypes = list(map(read.dtypes.__getitem__, kinds))
    shapes = list(map(read.shapes.__getitem__, kinds))
    if starts[0] != "0" or starts[1:] != ends[:-1]:  # not in offset order: sorted and checked
        firsts, stops = list(map(int, starts)), list(map(int, ends))
        if max(stops) > USIZE_MAX or max(firsts) > USIZE_MAX:
            return None
        return _laid_out(names, dtypes, shapes, (firsts, stops), buffer_size)
    # In offset order, as the library writes: each tensor starts where the one before it
    # ends, the first at 0; every size is positive, so ends that are the running sums of
    # the sizes, the last at the buffer's end (and within u64, as every sum then is), lay
    # the tensors out contiguously, without overlap.
    stops = list(accumulate(map(read.sizes.__getitem__, kinds)))
    if stops[-1] != buffer_size or buffer_size > USIZE_MAX or _integers(ends) != stops:
        return None
    return Columns(names, dtypes, shapes, [0, *stops[:-1]], stops)


def _integers(digits: list[str]) -> list[int | float]:
    """The numbers of canonical integers' digits (`_COUNT`), read at once as one JSON array
    by orjson (a third of the time of `int` on each): an int each, but a float for one
    beyond 64 bits, which then equals no integer within u64."""
    import orjson  # noqa: PLC0415  (the header reader's imports stay few)

    numbers: list[int | float] = orjson.loads("[" + ",".join(digits) + "]")
    return numbers


def _entries(document: dict[str, Any]) -> list[TensorEntry]:
    """Every tensor entry; the common, well-formed entry is checked inline (the listing's
    hot loop), anything else goes through `_entry` for the exact error."""
    entries: list[TensorEntry] = []
    append = entries.append
    bits = DTYPE_BITS
    for name, info in document.items():
        if type(info) is dict and len(info) == 3:
            dtype = info.get("dtype")
            shape = info.get("shape")
            offsets = info.get("data_offsets")
            if (
                type(dtype) is str
                and dtype in bits
                and type(shape) is list
                and type(offsets) is list
                and len(offsets) == 2
            ):
                start, end = offsets
                dims = tuple(shape)
                if (
                    type(start) is int
                    and type(end) is int
                    and 0 <= start <= USIZE_MAX
                    and 0 <= end <= USIZE_MAX
                    and all(type(d) is int and 0 <= d <= USIZE_MAX for d in dims)
                ):
                    append(TensorEntry(name, dtype, dims, start, end))
                    continue
        append(_entry(name, info))
    return entries


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


_BY_OFFSETS = operator.itemgetter(3, 4)  # TensorEntry (name, dtype, shape, start, end)


def _check_layout(tensors: list[TensorEntry], buffer_size: int) -> None:
    """Offsets contiguous from 0, sizes = elements x dtype size, buffer covered exactly."""
    offset = 0
    for entry in sorted(tensors, key=_BY_OFFSETS):
        if entry.start != offset or entry.end < entry.start:
            raise HeaderError(f"invalid offset for tensor {entry.name!r}")
        elements = 1
        for dim in entry.shape:  # every partial product must fit, as in the library
            elements *= dim
            if elements > USIZE_MAX:
                raise HeaderError(f"overflow computing the size of tensor {entry.name!r}")
        bits = elements * DTYPE_BITS[entry.dtype]
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
    if offset != buffer_size:
        raise HeaderError(
            f"incomplete metadata: the tensors cover {offset} of {buffer_size} buffer bytes"
        )


_SPACE_BEFORE_COLON = re.compile(r'"[ \t\n\r]+:')
_NEGATIVE_ZERO = re.compile(r"-0(?![0-9.eE])")


def _keys_in(document: dict[str, Any]) -> int:
    """How many keys the parsed header holds (top level, tensor infos, metadata)."""
    values = document.values()
    if set(map(type, values)) == {dict}:  # the usual header: counted in C
        return len(document) + sum(map(len, values))
    return len(document) + sum(len(value) for value in values if type(value) is dict)


def _load_json(text: str) -> dict[str, Any]:
    """Parse with the C decoder; fall back to the exact, slower hooks only when the text
    could hold a repeated key (more keys in the text than in the result) or a `-0`."""
    try:
        document = json.loads(text)
        # Every key is a string followed by `:`, so without whitespace before a colon
        # `":` occurs at least once per key in the text (more if a string holds `":`);
        # as often as the result has keys, no key was repeated.
        if (
            type(document) is dict
            and ("-0" not in text or not _NEGATIVE_ZERO.search(text))
            and text.count('":') == _keys_in(document)
            and not _SPACE_BEFORE_COLON.search(text)
        ):
            return document
        document = json.loads(text, object_pairs_hook=unique_pairs, parse_int=_parse_int)
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
    data_start = 8 + len(raw)
    canonical = _canonical(text, data_start, file_size)
    if canonical is not None:
        return canonical
    document = _load_json(text)
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(document)
    metadata = _metadata(document.pop(METADATA_KEY, None))
    entries = _bulk_entries(document, file_size - data_start)
    if entries is None:
        entries = _entries(document)
        _check_layout(entries, file_size - data_start)
    return Header(dict(zip(document, entries, strict=True)), metadata, data_start, file_size)


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


def read_header(path: Path | str) -> Header:
    """Read and validate the header of one safetensors file (never its tensor bytes).

    One read of the first 64 KiB covers most headers; a longer one is read
    after its declared length has been checked against the file size.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        raw = _header_bytes(fd, os.pread(fd, FIRST_READ, 0), size)
    finally:
        os.close(fd)
    return parse_header(raw, size)


# O_NOFOLLOW: a symlinked file is refused by the open itself (ELOOP), no lstat before it;
# O_NONBLOCK: a FIFO put in a file's place cannot hang the open (its read then fails).
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_headers(paths: Sequence[str]) -> list[Header | HeaderError | OSError]:
    """`read_header` of many files, in order the header of each or why it has none: the
    files read one by one, their headers checked together (`parse_headers`).

    A symlink is refused (ELOOP); that a path is a regular file is the caller's to check
    (the checkpoint loader takes each entry's type from the folder's listing), a FIFO or
    a folder fails its read. A file is read from its start by one `pread` of 64 KiB; an
    answer shorter than that ends at the end of the file, so its length is the file's
    size and only a longer file costs an `fstat`.
    """
    results: list[Header | HeaderError | OSError | None] = []
    raws: list[bytes] = []
    sizes: list[int] = []
    for path in paths:
        try:
            fd = os.open(path, OPEN_FLAGS)
        except OSError as exc:
            results.append(exc)
            continue
        try:
            start = os.pread(fd, FIRST_READ, 0)
            size = len(start) if len(start) < FIRST_READ else os.fstat(fd).st_size
            raws.append(_header_bytes(fd, start, size))
            sizes.append(size)
            results.append(None)  # parsed below, with the others
        except (HeaderError, OSError) as exc:
            results.append(exc)
        finally:
            os.close(fd)
    parsed = iter(parse_headers(raws, sizes))
    return [next(parsed) if result is None else result for result in results]


def parse_headers(raws: Sequence[bytes], sizes: Sequence[int]) -> list[Header | HeaderError]:
    """`parse_header` of many headers (``raws``, of files of ``sizes`` bytes), in order the
    header of each or its error. Small headers are checked a batch at a time
    (`_canonical_all`, when all of a batch are canonical and in offset order), the rest
    one by one: batching saves the fixed cost of each header, and a batch kept to a few
    tens of KiB keeps its columns in the cache, where one batch of all the headers of a
    large checkpoint is slower than the headers one at a time."""
    parsed: list[Header | HeaderError] = []
    start = 0
    while start < len(raws):
        stop, held = start, 0
        while stop < len(raws) and held + len(raws[stop]) <= BATCH_BYTES:
            held += len(raws[stop])
            stop += 1
        batch = _canonical_all(raws[start:stop], sizes[start:stop]) if stop > start + 1 else None
        stop = max(stop, start + 1)
        parsed.extend(batch or map(_parse_or_error, raws[start:stop], sizes[start:stop]))
        start = stop
    return parsed


#: The most header bytes checked in one batch (measured: see docs/performance.md).
BATCH_BYTES = 16 * 1024


def _parse_or_error(raw: bytes, size: int) -> Header | HeaderError:
    try:
        return parse_header(raw, size)
    except HeaderError as exc:
        return exc


# Many canonical headers at once: joined, each after a NUL (which no canonical header
# holds), they are read by one regular expression whose matches are, in order, each
# header's start (the NUL, then `{` and a flat `__metadata__` if any) and its entries.
_PLAIN_STRING = r'"[^"\\\x00-\x1f]*"'
_PLAIN_PAIR = _PLAIN_STRING + ":" + _PLAIN_STRING
_HEADER_START = r'(\x00)(\{(?:"__metadata__":\{((?:' + _PLAIN_PAIR + ")(?:," + _PLAIN_PAIR
_HEADER_START += r")*)?\},)?)?"
_CANONICAL_HEADERS = re.compile(_HEADER_START + "|" + _CANONICAL_ENTRY.pattern)
_JSON_SPACE_BYTES = _JSON_SPACE.encode()


class _Scan(NamedTuple):
    """The canonical fields of many headers: the entries' columns (all headers in a row),
    where each header's entries begin, and each header's start and metadata text."""

    columns: tuple[list[str], list[str], list[str], list[str], list[str]]  # names .. ends
    firsts: list[int]
    opens: list[str]
    metadata: list[str]


def _scan(raws: Sequence[bytes]) -> _Scan | None:
    """The fields of every header, when each is canonical text (as in `_canonical`).

    Sound as `_canonical` is: the matches are disjoint and in order, and as long together
    as the joined text they tile it; each header then is a NUL, `{` or a canonical
    metadata, and entries; requiring one or more entries per header, the last one of
    each and no other closing with `}`, leaves each header exactly `_canonical`'s form.
    """
    count = len(raws)
    stripped = map(bytes.rstrip, raws, repeat(_JSON_SPACE_BYTES))
    try:
        text = b"\x00".join(chain((b"",), stripped)).decode("utf-8")
    except UnicodeDecodeError:
        return None
    rows = _CANONICAL_HEADERS.findall(text)
    nuls, opens, pairs, names, dtypes, shapes, starts, ends, closes = map(
        list, zip(*rows, strict=True)
    )
    # a start's row holds "" for an entry's fields, whose dtype is never empty, and back
    marks = list(compress(range(len(rows)), nuls))
    names, shapes, starts, ends, closes = (
        list(compress(column, dtypes)) for column in (names, shapes, starts, ends, closes)
    )
    dtypes = list(filter(None, dtypes))
    opens = list(compress(opens, nuls))
    firsts = list(map(operator.sub, marks, range(count)))
    lasts = [*map(operator.sub, firsts[1:], repeat(1)), len(names) - 1]
    covered = count + sum(map(len, opens)) + _ENTRY_FRAME * len(names)
    covered += sum(map(len, chain(names, dtypes, shapes, starts, ends)))
    if (
        covered != len(text)
        or len(marks) != count  # a NUL inside a header
        or "" in opens  # an entry right after the NUL: no `{`
        or len(set(firsts)) != count  # a header of no entry
        or firsts[-1] >= len(names)
        or closes.count("}") != count
        or set(map(closes.__getitem__, lasts)) != {"}"}
    ):
        return None
    metadata = list(compress(pairs, nuls))
    return _Scan((names, dtypes, shapes, starts, ends), firsts, opens, metadata)


def _canonical_all(raws: Sequence[bytes], sizes: Sequence[int]) -> list[Header] | None:
    """The headers, when every one is canonical (`_scan`), its tensors in offset order,
    the names unique across all of them and every layout valid; None otherwise, and each
    header then goes through `parse_header`. What `_canonical` checks one header at a
    time is checked here over the entries of all of them at once."""
    scan = _scan(raws)
    if scan is None:
        return None
    names, dtypes, shapes, starts, ends = scan.columns
    if (
        len(set(names)) != len(names)  # also across headers: a repeat goes the exact way
        or METADATA_KEY in names
        or not set(dtypes) <= DTYPE_BITS.keys()
    ):
        return None
    dims = {shape: _dims(shape) for shape in set(shapes)}  # each >= 1: bits >= every dim
    # in offset order, as the library writes: each entry starts where the one before it
    # ends, the first of each header at 0 (the numbers are canonical: equal as text)
    chained = ["0", *ends[:-1]]
    for first in scan.firsts:
        chained[first] = "0"
    if starts != chained:
        return None
    stops = list(map(int, ends))
    firsts = [0, *stops[:-1]]
    for first in scan.firsts:
        firsts[first] = 0
    data_starts = list(map(operator.add, map(len, raws), repeat(8)))
    lasts = [*map(operator.sub, scan.firsts[1:], repeat(1)), len(names) - 1]
    buffers = list(map(operator.sub, sizes, data_starts))
    shaped = list(map(dims.__getitem__, shapes))
    bits = list(map(operator.mul, map(math.prod, shaped), map(DTYPE_BITS.__getitem__, dtypes)))
    if (
        max(stops) > USIZE_MAX
        or list(map(stops.__getitem__, lasts)) != buffers
        or max(bits) > USIZE_MAX
        or bits != list(map(operator.mul, map(operator.sub, stops, firsts), repeat(8)))
    ):
        return None  # bits = 8 x (end - start) > 0, chained from 0 to the buffer's end
    metadata = _all_metadata(scan)
    if metadata is None:
        return None
    entries = new_entries(zip(names, dtypes, shaped, firsts, stops, strict=True))
    cuts = list(map(slice, scan.firsts, [*scan.firsts[1:], len(names)]))
    tensors = map(dict, map(zip, map(names.__getitem__, cuts), map(entries.__getitem__, cuts)))
    return list(map(Header, tensors, metadata, data_starts, sizes))


def _all_metadata(scan: _Scan) -> list[dict[str, str] | None] | None:
    """Each header's `__metadata__` (None where it has none); None if a key repeats."""
    metadata: list[dict[str, str] | None] = [None] * len(scan.opens)
    for index in compress(range(len(scan.opens)), map(operator.ne, scan.opens, repeat("{"))):
        pairs = _METADATA_PAIR.findall(scan.metadata[index])
        found = dict(pairs)
        if len(found) != len(pairs):
            return None
        metadata[index] = found
    return metadata
