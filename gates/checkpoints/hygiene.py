"""File hygiene of a checkpoint: regular files only, no symlink, hardlink or sparse file.

Each finding names the file and the kind, so a contract can report them as
criteria. A sparse file is found with SEEK_HOLE (a hole before the end of the
file); where the file system cannot answer, by fewer allocated blocks than
the size.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gates.checkpoints.layout import INDEX_NAME, SHARD_SUFFIX
from gates.errors import UnsafePathError
from gates.paths import check_relpath


@dataclass(frozen=True)
class Finding:
    file: str
    kind: str  # symlink | hardlink | sparse | not_regular | escapes
    detail: str

    def line(self) -> str:
        return f"{self.file}: {self.detail}"


def first_hole(path: Path, size: int) -> int | None:
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
    path = folder / name
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return [Finding(name, "symlink", f"is a symlink to {path.readlink()}")]
    if not stat.S_ISREG(info.st_mode):
        return [Finding(name, "not_regular", "is not a regular file")]
    findings = []
    if info.st_nlink > 1:
        findings.append(Finding(name, "hardlink", f"is a hardlink ({info.st_nlink} links)"))
    hole = first_hole(path, info.st_size)
    if hole is not None:
        findings.append(Finding(name, "sparse", f"is a sparse file (hole at byte {hole})"))
    return findings


def _escaping_entries(folder: Path) -> list[Finding]:
    try:
        document = json.loads((folder / INDEX_NAME).read_bytes())
        weight_map = document["weight_map"]
        shards = {v for v in weight_map.values() if isinstance(v, str)}
    except (OSError, ValueError, TypeError, KeyError):
        return []
    findings = []
    for shard in sorted(shards):
        try:
            check_relpath(shard, what="shard")
        except UnsafePathError as exc:
            findings.append(Finding(INDEX_NAME, "escapes", exc.message))
    return findings


def hygiene(folder: Path) -> list[Finding]:
    """Every hygiene finding of the checkpoint files in ``folder``."""
    if not folder.is_dir():
        return []
    names = sorted(
        entry.name
        for entry in os.scandir(folder)
        if entry.name.endswith(SHARD_SUFFIX) or entry.name == INDEX_NAME
    )
    findings = [finding for name in names for finding in _file_findings(folder, name)]
    if (folder / INDEX_NAME).is_file():
        findings += _escaping_entries(folder)
    return findings
