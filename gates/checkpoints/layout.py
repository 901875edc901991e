"""A checkpoint folder: its shards, its index, and every tensor with the shard holding it.

A folder holds one or more `*.safetensors` shards and, when sharded, a
`model.safetensors.index.json` whose `weight_map` names the shard of every
tensor. Problems are collected, never raised one at a time, so a report
lists all of them: a shard that is not valid safetensors, an index entry whose
shard is missing, outside the folder or disagrees with the shard's header, a
tensor in two shards, a shard or tensor the index does not mention.
"""

from __future__ import annotations

import gc
import json
import operator
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from pathlib import Path
from typing import Any, NamedTuple

from gates.errors import UnsafePathError
from gates.paths import check_relpath, resolve_inside
from gates.safetensors.header import Header, HeaderError, TensorEntry, read_header

INDEX_NAME = "model.safetensors.index.json"
SHARD_SUFFIX = ".safetensors"


class Located(NamedTuple):
    """A tensor and the shard (path relative to the checkpoint folder) that holds it."""

    shard: str
    entry: TensorEntry


@dataclass
class Checkpoint:
    folder: Path
    shards: dict[str, Header] = field(default_factory=dict)
    tensors: dict[str, Located] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    index_present: bool = False

    @property
    def valid(self) -> bool:
        return not self.problems


def shard_files(folder: Path) -> list[str]:
    # names, not `Path` objects: pathlib's per-entry work was a tenth of a small-shard listing
    names = os.listdir(folder)  # noqa: PTH208
    return sorted(name for name in names if name.endswith(SHARD_SUFFIX))


def _read_index(folder: Path, checkpoint: Checkpoint) -> dict[str, str] | None:
    path = folder / INDEX_NAME
    if not path.exists() and not path.is_symlink():
        return None
    checkpoint.index_present = True
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        checkpoint.problems.append(f"{INDEX_NAME}: not valid JSON: {exc}")
        return {}
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    # keys of a parsed JSON object are strings; the values' types checked in one C pass
    if not isinstance(weight_map, dict) or not set(map(type, weight_map.values())) <= {str}:
        checkpoint.problems.append(f"{INDEX_NAME}: no weight_map of tensor name -> shard file")
        return {}
    return weight_map


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


# tuple.__new__ on (shard, entry), called from C (the named tuple's own __new__ is Python)
_NEW_LOCATED: Any = partial(tuple.__new__, Located)


def _place_tensors(checkpoint: Checkpoint) -> None:
    placed = checkpoint.tensors
    shards = sorted(checkpoint.shards.items())
    for shard, header in shards:
        located = map(_NEW_LOCATED, zip(repeat(shard), header.tensors.values()))
        placed.update(zip(header.tensors, located, strict=False))
    if len(placed) == sum(len(header.tensors) for _, header in shards):
        return  # no tensor in two shards: the usual case, checked without a Python loop
    placed.clear()
    for shard, header in shards:
        for name, entry in header.tensors.items():
            if name in checkpoint.tensors:
                other = checkpoint.tensors[name].shard
                checkpoint.problems.append(f"tensor {name} is in two shards: {other} and {shard}")
                continue
            checkpoint.tensors[name] = Located(shard, entry)


_SHARD = operator.itemgetter(0)  # Located.shard


def _check_index(weight_map: dict[str, str], checkpoint: Checkpoint, on_disk: list[str]) -> None:
    placed = dict(zip(checkpoint.tensors, map(_SHARD, checkpoint.tensors.values()), strict=False))
    if placed == weight_map and set(weight_map.values()) >= set(on_disk):
        return  # the index agrees with every header: compared as whole dicts
    for name, shard in sorted(weight_map.items()):
        located = checkpoint.tensors.get(name)
        if shard in checkpoint.shards and (located is None or located.shard != shard):
            checkpoint.problems.append(
                f"{INDEX_NAME}: {name} -> {shard}, but {shard} has no such tensor"
            )
    for name, located in sorted(checkpoint.tensors.items()):
        if name not in weight_map:
            checkpoint.problems.append(f"tensor {name} in {located.shard} is not in {INDEX_NAME}")
        elif weight_map[name] != located.shard:
            checkpoint.problems.append(
                f"{INDEX_NAME}: {name} -> {weight_map[name]}, but it is in {located.shard}"
            )
    referenced = set(weight_map.values())
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
    with _collector_paused():
        return _load_checkpoint(folder)


def _load_checkpoint(folder: Path) -> Checkpoint:
    checkpoint = Checkpoint(folder)
    if not folder.is_dir() or folder.is_symlink():
        checkpoint.problems.append("not a checkpoint folder (missing, or a symlink)")
        return checkpoint
    on_disk = shard_files(folder)
    weight_map = _read_index(folder, checkpoint)
    names = sorted(set(weight_map.values())) if weight_map else on_disk
    if not names and not checkpoint.problems:
        checkpoint.problems.append("no *.safetensors file in the folder")
    for name in names:
        _load_shard(folder, name, checkpoint)
    _place_tensors(checkpoint)
    if weight_map is not None and weight_map:
        _check_index(weight_map, checkpoint, on_disk)
    return checkpoint
