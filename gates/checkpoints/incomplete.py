"""A checkpoint still being written, or cut short: reported as incomplete, never as valid.

Signs of a write in progress: a partial file beside the shards (``*.tmp``,
``*.part``, ``*.incomplete``, a hidden temp copy of a shard), numbered shards
(``-00003-of-00010``) with some numbers missing, several shards and no index
yet, and a shard whose size or mtime changes while it is checked. A shard
whose header declares more data than the file holds is named as truncated
(cut short on the file system, or not yet fully written).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from gates.checkpoints.layout import INDEX_NAME, SHARD_SUFFIX
from gates.safetensors.header import Header, HeaderError, TruncatedError, read_header

PARTIAL_SUFFIXES = (".tmp", ".part", ".partial", ".incomplete")
_NUMBERED = re.compile(r"-(\d{5})-of-(\d{5})\.safetensors$")

StatKey = tuple[int, int]


def _partial(name: str) -> bool:
    if SHARD_SUFFIX not in name and INDEX_NAME not in name:
        return False
    return name.endswith(PARTIAL_SUFFIXES) or (name.startswith(".") and name != INDEX_NAME)


def truncation(path: Path) -> str | None:
    """Why a shard is shorter than its header says, or None (also when the header is unreadable
    otherwise: the layout check names that)."""
    try:
        read_header(path)
    except TruncatedError as exc:
        return (
            f"shard {path.name} is truncated: its header declares {exc.needed} bytes, the file "
            f"holds {exc.file_size} (cut short on the file system, or still being written)"
        )
    except (HeaderError, OSError):
        return None
    return None


def _truncation_unless_read(path: Path, header: Header | None) -> str | None:
    """`truncation`, without reading the header again when ``header`` (parsed and valid)
    is of a file of this size: its tensors cover the file exactly, so it is not short."""
    if header is not None:
        try:
            if path.stat().st_size == header.file_size:
                return None
        except OSError:
            pass  # gone since it was read: `truncation` says nothing either
    return truncation(path)


def incomplete_findings(
    folder: Path, index_present: bool, headers: Mapping[str, Header] | None = None
) -> list[str]:
    """Every sign that the checkpoint in ``folder`` is not completely written; ``headers``
    are the shards already read and checked (by name), whose sizes need no second read."""
    if not folder.is_dir():
        return []
    names = sorted(entry.name for entry in os.scandir(folder))
    findings = [
        f"{name}: a partial file is still there (a write in progress?)"
        for name in names
        if _partial(name)
    ]
    shards = [n for n in names if n.endswith(SHARD_SUFFIX) and not n.startswith(".")]
    totals: dict[int, set[int]] = {}
    for name in shards:
        match = _NUMBERED.search(name)
        if match:
            totals.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    for total, present in sorted(totals.items()):
        missing = sorted(set(range(1, total + 1)) - present)
        if missing:
            listed = ", ".join(f"{n:05d}" for n in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            findings.append(
                f"shard(s) {listed}{more} of {total:05d} missing (still being written?)"
            )
    if len(shards) > 1 and not index_present:
        findings.append(f"{len(shards)} shards but no {INDEX_NAME} (not yet written?)")
    read = headers or {}
    for name in shards:
        found = _truncation_unless_read(folder / name, read.get(name))
        if found:
            findings.append(found)
    return findings


def stat_keys(folder: Path, shards: Iterable[str]) -> dict[str, StatKey]:
    """(size, mtime_ns) of each shard, to see whether one changes while it is checked."""
    keys: dict[str, StatKey] = {}
    for shard in shards:
        try:
            info = (folder / shard).stat()
        except OSError:
            continue
        keys[shard] = (info.st_size, info.st_mtime_ns)
    return keys


def changed_while_checked(before: dict[str, StatKey], after: dict[str, StatKey]) -> list[str]:
    return [
        f"shard {shard} changed while it was checked ({before[shard][0]} -> "
        f"{after.get(shard, (0, 0))[0]} bytes): still being written?"
        for shard in sorted(before)
        if after.get(shard) != before[shard]
    ]
