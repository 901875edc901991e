"""File hygiene of a checkpoint: regular files only, no symlink, hardlink or sparse file.

Each finding names the file and the kind, so a contract can report them as
criteria. A sparse file is found with SEEK_HOLE (a hole before the end of the
file); where the file system cannot answer, by fewer allocated blocks than
the size.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gates.checkpoints.layout import INDEX_NAME, SHARD_SUFFIX, IndexRead, read_index_file
from gates.core.errors import UnsafePathError
from gates.core.paths import check_relpath


@dataclass(frozen=True)
class Finding:
    file: str
    kind: str  # symlink | hardlink | sparse | not_regular | escapes
    detail: str

    def line(self) -> str:
        return f"{self.file}: {self.detail}"


def first_hole(path: Path | str, size: int) -> int | None:
    """Offset of the first hole before the end of the file, or None."""
    fd = os.open(path, os.O_RDONLY)
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        blocks = os.fstat(fd).st_blocks
        return 0 if blocks * 512 < size else None
    finally:
        os.close(fd)
    return hole if hole < size else None


def _file_findings(folder: Path, name: str) -> list[Finding]:
    # a plain string path: pathlib's parsing was a third of this check of a shard
    path = f"{folder}/{name}"
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return [Finding(name, "symlink", f"is a symlink to {(folder / name).readlink()}")]
    if not stat.S_ISREG(info.st_mode):
        return [Finding(name, "not_regular", "is not a regular file")]
    findings = []
    if info.st_nlink > 1:
        findings.append(Finding(name, "hardlink", f"is a hardlink ({info.st_nlink} links)"))
    hole = first_hole(path, info.st_size)
    if hole is not None:
        findings.append(Finding(name, "sparse", f"is a sparse file (hole at byte {hole})"))
    return findings


def _index_shards(index: IndexRead | OSError | ValueError) -> set[str]:
    """The shard names an index's weight_map holds, however malformed the rest is."""
    if not isinstance(index, IndexRead) or not index.parsed:
        return set()
    if index.shards is not None:  # a valid weight_map: its names, as the layout found them
        return index.shards
    document = index.document
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    if not isinstance(weight_map, dict):
        return set()  # the layout check reports the weight_map itself
    return {v for v in weight_map.values() if isinstance(v, str)}


def _escaping_entries(index: IndexRead | OSError | ValueError) -> list[Finding]:
    findings = []
    for shard in sorted(_index_shards(index)):
        try:
            check_relpath(shard, what="shard")
        except UnsafePathError as exc:
            findings.append(Finding(INDEX_NAME, "escapes", exc.message))
    return findings


def hygiene(folder: Path, index: IndexRead | None = None) -> list[Finding]:
    """Every hygiene finding of the checkpoint files in ``folder``; ``index``: its index
    as `load_checkpoint_and_index` read it, else the index is read here."""
    if not folder.is_dir():
        return []
    names = sorted(
        entry.name
        for entry in os.scandir(folder)
        if entry.name.endswith(SHARD_SUFFIX) or entry.name == INDEX_NAME
    )
    findings = [finding for name in names for finding in _file_findings(folder, name)]
    if (folder / INDEX_NAME).is_file():
        findings += _escaping_entries(read_index_file(folder) if index is None else index)
    return findings
