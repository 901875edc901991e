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
import json
import os
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from gates.core.errors import UnsafePathError
from gates.core.paths import check_relpath, resolve_inside
from gates.safetensors.header import Header, HeaderError, TensorEntry, read_header

INDEX_NAME = "model.safetensors.index.json"
SHARD_SUFFIX = ".safetensors"


class Located(NamedTuple):
    """A tensor and the shard (path relative to the checkpoint folder) that holds it."""

    shard: str
    entry: TensorEntry


@dataclass
class Checkpoint:
    """A folder's shards by name, the shard of each tensor (in the shards' sorted order and
    each header's; the first shard where two hold a tensor) and every problem found."""

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
        return {
            name: Located(shard, self.shards[shard].tensors[name])
            for name, shard in self.shard_of.items()
        }


def kinds(checkpoint: Checkpoint) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each tensor's dtype and shape by name (a survey's inventory of a side)."""
    found = {}
    for name, shard in checkpoint.shard_of.items():
        entry = checkpoint.shards[shard].tensors[name]
        found[name] = (entry.dtype, entry.shape)
    return found


class _Listing(NamedTuple):
    """A folder's entries: every name, the shards among them."""

    names: set[str]
    shards: list[str]


def _listing(folder: Path) -> _Listing:
    with os.scandir(folder) as entries:
        names = {entry.name for entry in entries}
    return _Listing(names, sorted(name for name in names if name.endswith(SHARD_SUFFIX)))


class IndexRead(NamedTuple):
    """The index file as read once, for the layout and the hygiene check alike."""

    parsed: bool  # read and parsed as JSON
    document: Any  # the parsed JSON (None when not parsed)
    shards: set[str] | None  # the shards a valid weight_map names (None: no valid map)


def read_index_file(folder: Path) -> IndexRead | OSError | ValueError:
    """The parsed index of ``folder``, or why it cannot be read or parsed."""
    try:
        return IndexRead(True, json.loads((folder / INDEX_NAME).read_bytes()), None)
    except (OSError, ValueError) as exc:
        return exc


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
        if exc.errno == errno.ELOOP:  # a symlink since the lstat
            checkpoint.problems.append(f"shard {name} is not a regular file")
        else:
            checkpoint.problems.append(f"{name}: cannot read: {exc.strerror}")


def _place_tensors(checkpoint: Checkpoint) -> None:
    placed = checkpoint.shard_of
    for shard, header in sorted(checkpoint.shards.items()):
        for name in header.tensors:
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


def load_checkpoint(folder: Path) -> Checkpoint:
    """Read every shard header of ``folder`` (never tensor bytes) and cross-check the index."""
    return load_checkpoint_and_index(folder)[0]


def load_checkpoint_and_index(folder: Path) -> tuple[Checkpoint, IndexRead | None]:
    """`load_checkpoint`, and its index as read (None where the listing has none), which
    the hygiene check takes rather than reading and parsing it a second time."""
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
    for name in names:
        _load_shard(folder, name, checkpoint)
    _place_tensors(checkpoint)
    if weight_map:
        _check_index(weight_map, referenced, checkpoint, on_disk)
    return checkpoint, index
