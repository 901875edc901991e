"""The worktree's source files judged by their bytes against HEAD's tree objects.

`git status` trusts the index: its stat data, the assume-unchanged and
skip-worktree flags, an fsmonitor's answers and clean/smudge filters. Here each
tracked source file is hashed as a git blob (`blob <size>\\0<bytes>`) and
compared with the object id in HEAD's tree, so none of those can hide an edit.
The stat cache (keyed on device, inode, size, mtime and ctime) keeps the blob
id of a file that did not change, so a warm check reads no file at all.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_module
from collections.abc import Callable
from pathlib import Path

from gates.core.git import TreeEntry
from gates.core.hashing import BLOB_TABLE, CHUNK, StatCache

_SYMLINK = "120000"
_EXECUTABLE = "100755"


def blob_id(path: Path, size: int, algorithm: str) -> str:
    """The git object id of ``path``'s bytes (what `git hash-object --no-filters` prints)."""
    digest = hashlib.new(algorithm)
    digest.update(b"blob %d\0" % size)
    with path.open("rb", buffering=0) as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _link_blob_id(path: Path, algorithm: str) -> str:
    target = os.fsencode(path.readlink())
    return hashlib.new(algorithm, b"blob %d\0" % len(target) + target).hexdigest()


def differing_files(
    root: Path,
    entries: dict[str, TreeEntry],
    contains: Callable[[str], bool],
    cache: StatCache,
) -> list[str]:
    """Source paths of ``entries`` whose file on disk is missing or not the tree's blob.

    Gitlinks (submodules) are left to `git status`. The object format (sha1 or
    sha256) follows from the length of the tree's ids.
    """
    differing: list[str] = []
    for path, entry in entries.items():
        if entry.type != "blob" or not contains(path):
            continue
        algorithm = "sha1" if len(entry.sha) == 40 else "sha256"
        full = root / path
        try:
            info = os.lstat(full)
        except OSError:
            differing.append(path)
            continue
        executable = bool(info.st_mode & stat_module.S_IXUSR)
        if entry.mode == _SYMLINK:
            same = stat_module.S_ISLNK(info.st_mode) and _link_blob_id(full, algorithm) == entry.sha
        elif not stat_module.S_ISREG(info.st_mode) or executable != (entry.mode == _EXECUTABLE):
            same = False
        else:
            same = _cached_blob_id(cache, path, full, info, algorithm) == entry.sha
        if not same:
            differing.append(path)
    return differing


def _cached_blob_id(
    cache: StatCache, relpath: str, path: Path, info: os.stat_result, algorithm: str
) -> str:
    cached = cache.lookup(BLOB_TABLE, relpath, info)
    if cached is not None:
        return cached
    try:
        found = blob_id(path, info.st_size, algorithm)
    except OSError:
        return ""
    cache.remember(BLOB_TABLE, relpath, path, info, found)
    return found
