"""Streaming sha256 of files, and a stat cache so unchanged files are not re-read.

The cache maps a workspace path to (device, inode, size, mtime_ns, ctime_ns)
and what was learnt from the file's bytes: a subject's sha256, the id of a
receipt that passed the schema and id checks, or a source file's git blob id.
The change time is part of the key because no user can set it: a file edited
and given back its old mtime still misses the cache. A file modified less than RACY_WINDOW_NS
before it was read is not cached: a write in the same clock tick could
otherwise keep a stale answer (git's "racy clean" problem).

The cache lives outside the workspace (see `cache_path`), so nothing committed
to a repository can vouch for its own files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from gates.core.atomic import write_text_atomic

CHUNK = 4 * 1024 * 1024
RACY_WINDOW_NS = 2_000_000_000
CACHE_VERSION = 4
TABLES = ("files", "receipts", "shards", "attestations")


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


def cache_path(folder: Path | None, root: Path, kind: str = "") -> Path | None:
    """The file in the cache ``folder`` for the workspace at ``root`` (None: no cache).

    ``kind`` names a separate file for the same workspace (the freeze's blob ids are kept
    apart so the freeze check does not load every receipt's entry; the audit index).
    The folder is the invocation's (`Invocation.caching`: none under `--verify-all` or
    GATES_CACHE_DIR=off).
    """
    if folder is None:
        return None
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return folder / (f"{name}.{kind}.json" if kind else f"{name}.json")


def stat_key(stat: os.stat_result) -> list[int]:
    """(device, inode, size, mtime_ns, ctime_ns): a file unchanged since keeps all five."""
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


class StatCache:
    """Persistent per-file answers, trusted only while the file's stat key is unchanged."""

    def __init__(self, path: Path | None, tables: tuple[str, ...] = TABLES) -> None:
        self.path = path
        self.table_names = tables
        self._loaded: dict[str, dict[str, list[object]]] | None = None
        self._dirty = False
        self.hits = 0
        self.misses = 0

    @property
    def _tables(self) -> dict[str, dict[str, list[object]]]:
        """Read on first use: a warm audit served by the audit index never needs it."""
        if self._loaded is None:
            self._loaded = self._load()
        return self._loaded

    def _load(self) -> dict[str, dict[str, list[object]]]:
        empty: dict[str, dict[str, list[object]]] = {name: {} for name in self.table_names}
        if self.path is None:
            return empty
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return empty
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return empty
        tables = {name: data.get(name) for name in empty}
        if not all(isinstance(table, dict) for table in tables.values()):
            return empty
        return tables  # type: ignore[return-value]

    def lookup(self, table: str, relpath: str, stat: os.stat_result) -> str | None:
        """The remembered answer for this exact file state, or None."""
        cached = self._tables[table].get(relpath)
        if isinstance(cached, list) and len(cached) == 6 and cached[:5] == stat_key(stat):
            self.hits += 1
            return str(cached[5])
        self.misses += 1
        return None

    def remember(
        self, table: str, relpath: str, path: Path, stat: os.stat_result, answer: str
    ) -> None:
        """Keep ``answer`` for the file state ``stat``, unless the file is still changing."""
        key = stat_key(stat)
        if stat_key(path.stat()) != key or time.time_ns() - stat.st_mtime_ns <= RACY_WINDOW_NS:
            return
        self._tables[table][relpath] = [*key, answer]
        self._dirty = True

    def digest(self, relpath: str, path: Path, stat: os.stat_result) -> FileDigest:
        """The digest of ``path`` (already lstat-ed as ``stat``), from cache when unchanged."""
        cached = self.lookup("files", relpath, stat)
        if cached is not None:
            return FileDigest(cached, stat.st_size)
        result = sha256_file(path)
        self.remember("files", relpath, path, stat, result.sha256)
        return result

    def save(self) -> None:
        """Write the cache back if it changed; an unwritable cache folder just skips it."""
        if self.path is None or not self._dirty:
            return
        payload = json.dumps({"version": CACHE_VERSION, **self._tables})
        with contextlib.suppress(OSError):
            write_text_atomic(self.path, payload)
        self._dirty = False


BLOB_TABLE = "blobs"
INDEX_KIND = "audit"


@dataclass(frozen=True)
class Caches:
    """The caches of one command on one workspace, opened once by the command layer and
    passed down: the stat cache (``files``: subjects' digests, receipts that passed, shards,
    attestations), the freeze's cache of git blob ids (``blobs``), and where the audit
    index lives (``index``; the receipts stage opens it under its fingerprint). Opened on
    no folder, nothing is read or kept."""

    files: StatCache
    blobs: StatCache
    index: Path | None

    @classmethod
    def open(cls, folder: Path | None, root: Path) -> Caches:
        return cls(
            StatCache(cache_path(folder, root)),
            StatCache(cache_path(folder, root, BLOB_TABLE), tables=(BLOB_TABLE,)),
            cache_path(folder, root, INDEX_KIND),
        )

    @classmethod
    def none(cls) -> Caches:
        """No cache at all (the Python API's default)."""
        return cls(StatCache(None), StatCache(None, tables=(BLOB_TABLE,)), None)

    def save(self) -> None:
        self.files.save()
        self.blobs.save()
