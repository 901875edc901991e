"""The persistent audit index: a warm audit reads one file instead of every receipt.

For each receipt judged before, the index keeps the judgement (status, reason,
the receipt's validated fields) and the stat keys (device, inode, size, mtime,
ctime) of the receipt file and of each of its subjects. A later audit stats
those files; when every key is unchanged, the judgement is reused: no file is
opened, parsed or schema-checked again, and the receipt is rebuilt from the
index's fields through the model. Anything else (a file changed, missing, or
reached through a symlink now) judges the receipt afresh.

The whole index belongs to one ``fingerprint``, an opaque string the engine
builds from everything a judgement depends on beyond the files (the gates
version, the contracts, the judging context, and whatever a later engine adds,
such as trust anchors): a different fingerprint starts an empty index.

Like the stat cache it lives outside the workspace (`gates.core.hashing.Caches`,
`index`), is replaced atomically (concurrent audits: last writer wins,
never a torn file), and a file that does not parse as an index of this
version and fingerprint is ignored and rebuilt, never trusted. Only accepted
judgements are kept: a rejected receipt is judged again every time.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gates.core.atomic import write_text_atomic
from gates.core.errors import UnsafePathError
from gates.core.hashing import RACY_WINDOW_NS, stat_key
from gates.core.paths import resolve_inside
from gates.receipts.model import Receipt
from gates.receipts.verify import Judgement, Status

INDEX_VERSION = 1

#: One entry: the judgement as plain data, and the stat key of every file it read.
Entry = tuple[dict[str, Any], dict[str, list[int]]]


def judgement_to_data(judgement: Judgement) -> dict[str, Any] | None:
    """A serialisable judgement, or None when it is not kept (rejected, or no receipt)."""
    if judgement.receipt is None or judgement.status is Status.REJECTED:
        return None
    return {
        "status": judgement.status.value,
        "reason": judgement.reason,
        "signer": judgement.signer,
        # the envelope was verified when the judgement was made; it is half of a signed
        # receipt's bytes, and `gates attest export` reads it from the file itself
        "receipt": judgement.receipt.model_dump(mode="json", exclude={"attestation"}),
    }


def judgement_from_data(path: str, data: dict[str, Any]) -> Judgement:
    """Rebuild a kept judgement: its receipt's fields pass the model's validation again
    (pydantic-core: 10,000 receipts in about 0.11 s here, within 15% of filling pydantic's
    internals by hand and half the time of `model_construct`), so fields the model no
    longer accepts (an index an older gates wrote, or one edited) are a miss (a
    ValueError), never a receipt the model would refuse."""
    receipt = Receipt.model_validate(data["receipt"])
    return Judgement(path, receipt, Status(data["status"]), data["reason"], data.get("signer"))


class AuditIndex:
    """Judgements keyed by the stat keys of the files they read, under one fingerprint."""

    def __init__(self, root: Path, path: Path | None, fingerprint: str) -> None:
        self.root = root
        self.base = str(root)
        self.path = path
        self.fingerprint = fingerprint
        self.entries: dict[str, Entry] = self._load()
        self.fresh: dict[str, Entry] = {}
        self.visited: set[str] = set()
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, Entry]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        if (
            not isinstance(data, dict)
            or data.get("version") != INDEX_VERSION
            or data.get("fingerprint") != self.fingerprint
            or not isinstance(data.get("entries"), dict)
        ):
            return {}
        entries: dict[str, Entry] = data["entries"]
        return entries

    def _key(self, relpath: str, checked_dirs: set[str]) -> list[int] | None:
        """The stat key of a workspace file, or None when it is missing, not a regular file,
        or reached through a symlinked folder (folders are checked once per audit)."""
        folder, _, _ = relpath.rpartition("/")
        try:
            if folder and f"{self.base}/{folder}" not in checked_dirs:
                resolve_inside(self.root, folder, checked_dirs=checked_dirs)
                checked_dirs.add(f"{self.base}/{folder}")
            info = os.lstat(f"{self.base}/{relpath}")
        except (OSError, UnsafePathError):
            return None
        return stat_key(info) if stat.S_ISREG(info.st_mode) else None

    def lookup(self, relpath: str, checked_dirs: set[str]) -> Judgement | None:
        """The kept judgement of ``relpath`` if no file it read has changed."""
        self.visited.add(relpath)
        entry = self.entries.get(relpath)
        if entry is not None:
            with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
                data, keys = entry
                if keys and all(self._key(p, checked_dirs) == key for p, key in keys.items()):
                    judgement = judgement_from_data(relpath, data)
                    self.fresh[relpath] = entry
                    self.hits += 1
                    return judgement
        self.misses += 1
        return None

    def remember(self, judgement: Judgement, checked_dirs: set[str]) -> None:
        """Keep an accepted judgement with the stat keys of its receipt and subjects, unless
        a file is still changing (modified within the racy window) or changed meanwhile."""
        data = judgement_to_data(judgement)
        if data is None or judgement.receipt is None:
            return
        files = [judgement.path, *(s.path for s in judgement.receipt.subjects)]
        keys: dict[str, list[int]] = {}
        now = time.time_ns()
        for relpath in files:
            key = self._key(relpath, checked_dirs)
            if key is None or now - key[3] <= RACY_WINDOW_NS:
                return
            keys[relpath] = key
        self.fresh[judgement.path] = (data, keys)

    def judge(
        self, relpath: str, compute: Callable[[], Judgement], checked_dirs: set[str]
    ) -> Judgement:
        """The kept judgement, or ``compute()`` (then kept when accepted)."""
        found = self.lookup(relpath, checked_dirs)
        if found is not None:
            return found
        judgement = compute()
        self.remember(judgement, checked_dirs)
        return judgement

    def save(self, *, keep_unvisited: bool = False) -> None:
        """Write the entries of this audit (receipts gone since are dropped; with
        ``keep_unvisited``, a checker's judging of some receipts, the entries it did not
        look at are kept), atomically; an unwritable cache folder just skips it."""
        entries = self.fresh
        if keep_unvisited:
            kept = {path: e for path, e in self.entries.items() if path not in self.visited}
            entries = {**kept, **self.fresh}
        if self.path is None or (entries == self.entries and self.misses == 0):
            return
        payload = json.dumps(
            {"version": INDEX_VERSION, "fingerprint": self.fingerprint, "entries": entries},
            separators=(",", ":"),
        )
        with contextlib.suppress(OSError):
            write_text_atomic(self.path, payload)
