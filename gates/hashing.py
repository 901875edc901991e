"""Streaming sha256 of files, with a stat cache so unchanged files are not re-read.

The cache maps a workspace path to (device, inode, size, mtime_ns, sha256).
A file modified less than RACY_WINDOW_NS before it was hashed is not cached:
a write in the same clock tick could otherwise keep a stale digest (git's
"racy clean" problem).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from gates.atomic import write_text_atomic

CHUNK = 4 * 1024 * 1024
RACY_WINDOW_NS = 2_000_000_000
CACHE_VERSION = 1


@dataclass(frozen=True)
class FileDigest:
    sha256: str
    size: int


def sha256_file(path: Path) -> FileDigest:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb", buffering=0) as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return FileDigest(digest.hexdigest(), size)


StatKey = tuple[int, int, int, int]


def stat_key(stat: os.stat_result) -> StatKey:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


class StatCache:
    """A persistent path -> digest map, trusted only while the file's stat key is unchanged."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, list[object]] = self._load()
        self._dirty = False
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, list[object]]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return {}
        entries = data.get("entries")
        return entries if isinstance(entries, dict) else {}

    def digest(self, relpath: str, path: Path, stat: os.stat_result) -> FileDigest:
        """The digest of ``path`` (already lstat-ed as ``stat``), from cache when unchanged."""
        key = list(stat_key(stat))
        cached = self._entries.get(relpath)
        if isinstance(cached, list) and len(cached) == 5 and cached[:4] == key:
            self.hits += 1
            return FileDigest(str(cached[4]), stat.st_size)
        self.misses += 1
        result = sha256_file(path)
        after = path.stat()
        unchanged = list(stat_key(after)) == key
        if unchanged and time.time_ns() - stat.st_mtime_ns > RACY_WINDOW_NS:
            self._entries[relpath] = [*key, result.sha256]
            self._dirty = True
        return result

    def save(self) -> None:
        """Write the cache back if it changed; a read-only workspace just skips it."""
        if self.path is None or not self._dirty:
            return
        payload = json.dumps({"version": CACHE_VERSION, "entries": self._entries})
        with contextlib.suppress(OSError):
            write_text_atomic(self.path, payload)
        self._dirty = False
