"""A checkpoint folder: its shards, its index, and every tensor with the shard holding it.

A folder holds one or more `*.safetensors` shards and, when sharded, a
`model.safetensors.index.json` whose `weight_map` names the shard of every
tensor. Problems are collected, never raised one at a time, so a report
lists all of them: a shard that is not valid safetensors, an index entry whose
shard is missing, outside the folder or disagrees with the shard's header, a
tensor in two shards, a shard or tensor the index does not mention.
"""

from __future__ import annotations

import errno
import gc
import json
import operator
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress, repeat
from pathlib import Path
from typing import Any, NamedTuple

from gates.core.canonical import plain_json
from gates.core.errors import UnsafePathError
from gates.core.paths import check_relpath, resolve_inside
from gates.core.rows import as_rows
from gates.safetensors.header import Header, HeaderError, TensorEntry, read_header, read_headers

INDEX_NAME = "model.safetensors.index.json"
SHARD_SUFFIX = ".safetensors"


class Located(NamedTuple):
    """A tensor and the shard (path relative to the checkpoint folder) that holds it."""

    shard: str
    entry: TensorEntry


@dataclass
class Checkpoint:
    """A folder's shards by name, the shard of each tensor and every problem found.

    ``shard_of`` is what the reading makes (name -> shard, in the shards' sorted order and
    each header's; the first shard where two hold a tensor): strings only, built in C, and
    compared with the index as one dict. `tensors` pairs each name with its entry when
    first asked for (a survey needs only dtypes and shapes: `kinds`)."""

    folder: Path
    shards: dict[str, Header] = field(default_factory=dict)
    shard_of: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    index_present: bool = False

    @property
    def valid(self) -> bool:
        return not self.problems

    @cached_property
    def tensors(self) -> dict[str, Located]:
        located = as_rows(Located, zip(self.shard_of.values(), entries(self), strict=True))
        return dict(zip(self.shard_of, located, strict=True))


_TENSORS = operator.attrgetter("tensors")
_NAMES = operator.attrgetter("names")
_SHARD = operator.itemgetter(0)  # the name of a (name, header) pair
_HEADER = operator.itemgetter(1)


def _in_order(checkpoint: Checkpoint) -> list[Header] | None:
    """The headers in the order the tensors were placed (the shards' names sorted) where
    no tensor is in two shards, so that their tensors one after the other are
    ``checkpoint.shard_of``'s; None where one is."""
    headers = list(map(_HEADER, sorted(checkpoint.shards.items())))
    held = sum(map(len, map(_NAMES, headers)))
    return headers if len(checkpoint.shard_of) == held else None


def entries(checkpoint: Checkpoint) -> Iterator[TensorEntry]:
    """Each tensor's entry, in the order of ``checkpoint.shard_of``: the headers' own entries
    one after the other where no tensor is in two shards (all in C), else looked up."""
    headers = _in_order(checkpoint)
    if headers is not None:
        return chain.from_iterable(map(dict.values, map(_TENSORS, headers)))
    held = map(_TENSORS, map(checkpoint.shards.__getitem__, checkpoint.shard_of.values()))
    return map(dict.__getitem__, held, checkpoint.shard_of)


_KIND = operator.itemgetter(1, 2)  # TensorEntry.dtype, TensorEntry.shape


def kinds(checkpoint: Checkpoint) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each tensor's dtype and shape by name, made in C (a survey's inventory of a side):
    from the headers' columns where no tensor is in two shards (no `TensorEntry` made),
    else from the entries."""
    headers = _in_order(checkpoint)
    found: Iterator[tuple[str, tuple[int, ...]]]
    if headers is not None:
        found = chain.from_iterable(header.kinds() for header in headers)
    else:
        found = map(_KIND, entries(checkpoint))
    return dict(zip(checkpoint.shard_of, found, strict=True))


class _Listing(NamedTuple):
    """A folder's entries: every name, the shards among them, the regular files."""

    names: set[str]
    shards: list[str]
    regular: set[str]


_NAME = operator.attrgetter("name")
_IS_REGULAR = operator.methodcaller("is_file", follow_symlinks=False)


def _listing(folder: Path) -> _Listing:
    # each entry's type as the listing gives it (d_type): no stat per file; names, not
    # `Path` objects: pathlib's per-entry work was a tenth of a small-shard listing
    with os.scandir(folder) as entries:
        found = list(entries)
    names = list(map(_NAME, found))
    shards = sorted(name for name in names if name.endswith(SHARD_SUFFIX))
    return _Listing(set(names), shards, set(compress(names, map(_IS_REGULAR, found))))


class IndexRead(NamedTuple):
    """The index file as read once, for the layout and the hygiene check alike."""

    parsed: bool  # read and parsed as JSON
    document: Any  # the parsed JSON (None when not parsed)
    shards: set[str] | None  # the shards a valid weight_map names (None: no valid map)


def read_index_file(folder: Path) -> IndexRead | OSError | ValueError:
    """The parsed index of ``folder``, or why it cannot be read or parsed."""
    try:
        return IndexRead(True, json_loads_exactly((folder / INDEX_NAME).read_bytes()), None)
    except (OSError, ValueError) as exc:
        return exc


#: The nesting orjson's answer may have: ``json.loads`` reads this deep at any stack depth
#: short of the recursion limit less this, and raises RecursionError where deeper.
_ORJSON_DEPTH = 64


def json_loads_exactly(raw: bytes) -> Any:
    """``json.loads(raw)``: its value, or its exception, exactly; by orjson (0.6x to 0.8x
    the time on a 60,000-tensor index) where its value is the same, else by ``json.loads``.

    orjson refuses much that ``json.loads`` takes: NaN and Infinity, a lone surrogate, a
    byte order mark, other encodings than UTF-8, a number beyond the float range; each then
    goes to ``json.loads``. What orjson takes it reads as ``json.loads`` reads the same text
    (bytes without a BOM or a NUL, which ``json.loads`` decodes as UTF-8; a repeated key
    keeps its last value in its first place in both), but for the numbers and the depth:
    its answer is kept only where `gates.core.canonical.plain_json` holds it plain."""
    import orjson  # noqa: PLC0415  (only a sharded checkpoint's index needs it)

    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)
    # no float: orjson reads an integer beyond 64 bits as one, and its rounding is not
    # Python's to prove equal
    return document if plain_json(document, depth=_ORJSON_DEPTH) else json.loads(raw)


def _read_index(
    folder: Path, listed: _Listing, checkpoint: Checkpoint
) -> tuple[dict[str, str] | None, IndexRead | None]:
    """The index's weight_map (None: no index; {}: not a valid one) and the index as read."""
    if INDEX_NAME not in listed.names:  # neither a file nor a (dangling) symlink
        return None, None
    checkpoint.index_present = True
    read = read_index_file(folder)
    if not isinstance(read, IndexRead):
        checkpoint.problems.append(f"{INDEX_NAME}: not valid JSON: {read}")
        return {}, IndexRead(False, None, None)
    document = read.document
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    shards = _shard_names(weight_map)
    if shards is None:
        checkpoint.problems.append(f"{INDEX_NAME}: no weight_map of tensor name -> shard file")
        return {}, read
    return weight_map, read._replace(shards=shards)


def _shard_names(weight_map: object) -> set[str] | None:
    """The shard names of a weight_map of tensor name -> shard file; None if it is not one.

    Keys of a parsed JSON object are strings; the values' types are checked on their set
    (a few hundred names, not 60,000 values): no other JSON value equals a string, so a
    value that is not one leaves one in the set."""
    if not isinstance(weight_map, dict):
        return None
    try:
        names = set(weight_map.values())
    except TypeError:  # a list or an object among the values
        return None
    return names if set(map(type, names)) <= {str} else None


def _load_shard(folder: Path, name: str, checkpoint: Checkpoint) -> None:
    try:
        check_relpath(name, what="shard")
        # a plain string path: pathlib's parsing is a visible share of a listing
        path = resolve_inside(folder, name, what="shard") if "/" in name else f"{folder}/{name}"
        mode = os.lstat(path).st_mode
    except UnsafePathError as exc:
        checkpoint.problems.append(f"{INDEX_NAME}: {exc.message}")
        return
    except FileNotFoundError:
        checkpoint.problems.append(f"shard {name} does not exist")
        return
    if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
        checkpoint.problems.append(f"shard {name} is not a regular file")
        return
    try:
        checkpoint.shards[name] = read_header(path)
    except HeaderError as exc:
        checkpoint.problems.append(f"{name}: {exc}")
    except OSError as exc:
        checkpoint.problems.append(f"{name}: cannot read: {exc.strerror}")


def _load_shards(folder: Path, names: list[str], listed: _Listing, checkpoint: Checkpoint) -> None:
    """Every shard's header: a regular file of the folder's listing whose name needs no
    check (the listing holds no `/`, `.` or `..`) is read with the others at once; any
    other name, one at a time, for its exact problem."""
    plain = [name for name in names if name in listed.regular and "\\" not in name]
    read = dict(zip(plain, read_headers([f"{folder}/{name}" for name in plain]), strict=True))
    for name in names:
        result = read.get(name)
        if result is None:
            _load_shard(folder, name, checkpoint)
        elif isinstance(result, Header):
            checkpoint.shards[name] = result
        else:
            checkpoint.problems.append(_read_problem(name, result))


def _read_problem(name: str, error: HeaderError | OSError) -> str:
    if isinstance(error, FileNotFoundError):  # gone since the listing
        return f"shard {name} does not exist"
    if isinstance(error, OSError) and error.errno == errno.ELOOP:  # a symlink since then
        return f"shard {name} is not a regular file"
    if isinstance(error, OSError):
        return f"{name}: cannot read: {error.strerror}"
    return f"{name}: {error}"


def _place_tensors(checkpoint: Checkpoint) -> None:
    shards = sorted(checkpoint.shards.items())
    names = list(map(_NAMES, map(_HEADER, shards)))
    holders = chain.from_iterable(map(repeat, map(_SHARD, shards), map(len, names)))
    placed = checkpoint.shard_of
    placed.update(zip(chain.from_iterable(names), holders, strict=True))
    if len(placed) == sum(map(len, names)):
        return  # no tensor in two shards: the usual case, checked without a Python loop
    placed.clear()
    for shard, header in shards:
        for name in header.names:
            if name in placed:
                other = placed[name]
                checkpoint.problems.append(f"tensor {name} is in two shards: {other} and {shard}")
                continue
            placed[name] = shard


def _check_index(
    weight_map: dict[str, str], referenced: set[str], checkpoint: Checkpoint, on_disk: list[str]
) -> None:
    """Every disagreement of the index (``referenced``: its shard names) with the headers."""
    placed = checkpoint.shard_of
    # the index agrees with every header: the same names, each naming the tensor's shard
    if weight_map == placed and referenced.issuperset(on_disk):
        return
    for name, shard in sorted(weight_map.items()):
        if shard in checkpoint.shards and placed.get(name) != shard:
            checkpoint.problems.append(
                f"{INDEX_NAME}: {name} -> {shard}, but {shard} has no such tensor"
            )
    for name, held_by in sorted(placed.items()):
        if name not in weight_map:
            checkpoint.problems.append(f"tensor {name} in {held_by} is not in {INDEX_NAME}")
        elif weight_map[name] != held_by:
            checkpoint.problems.append(
                f"{INDEX_NAME}: {name} -> {weight_map[name]}, but it is in {held_by}"
            )
    for shard in on_disk:
        if shard not in referenced:
            checkpoint.problems.append(f"shard {shard} is not referenced by {INDEX_NAME}")


@contextmanager
def _collector_paused() -> Iterator[None]:
    """A listing allocates a few objects per tensor, none in a cycle: the cyclic garbage
    collector's passes over them would cost more than the listing (measured: 2x)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_checkpoint(folder: Path) -> Checkpoint:
    """Read every shard header of ``folder`` (never tensor bytes) and cross-check the index."""
    return load_checkpoint_and_index(folder)[0]


def load_checkpoint_and_index(folder: Path) -> tuple[Checkpoint, IndexRead | None]:
    """`load_checkpoint`, and its index as read (None where the listing has none), which
    the hygiene check takes rather than reading and parsing it a second time."""
    with _collector_paused():
        return _load_checkpoint(folder)


def _load_checkpoint(folder: Path) -> tuple[Checkpoint, IndexRead | None]:
    checkpoint = Checkpoint(folder)
    if not folder.is_dir() or folder.is_symlink():
        checkpoint.problems.append("not a checkpoint folder (missing, or a symlink)")
        return checkpoint, None
    listed = _listing(folder)
    on_disk = listed.shards
    weight_map, index = _read_index(folder, listed, checkpoint)
    referenced = index.shards if index is not None and index.shards is not None else set()
    names = sorted(referenced) if weight_map else on_disk
    if not names and not checkpoint.problems:
        checkpoint.problems.append("no *.safetensors file in the folder")
    _load_shards(folder, names, listed, checkpoint)
    _place_tensors(checkpoint)
    if weight_map:
        _check_index(weight_map, referenced, checkpoint, on_disk)
    return checkpoint, index
