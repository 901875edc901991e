"""Seeing through pre-commit's stash.

While hooks run at the pre-commit stage, the pre-commit framework saves the
unstaged changes to a patch file (`<store>/patch<time>-<pid>`, with the pid
of the pre-commit process) and removes them from the worktree, so a
"worktree is clean" check can pass on a tree that is not. When run under
pre-commit (PRE_COMMIT=1: the invocation then names pre-commit's store), we look for
the patch written by one of our ancestor processes and name the paths it hid.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_DIFF_HEADER = re.compile(rb"^diff --git a/(.+?) b/(.+)$", re.MULTILINE)


def ancestor_pids(limit: int = 16) -> list[int]:
    """Our parent, its parent, and so on (Linux /proc; empty elsewhere)."""
    pids = []
    pid = os.getppid()
    for _ in range(limit):
        if pid <= 1:
            break
        pids.append(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            break
        pid = int(fields[1])
    return pids


def stashed_paths(store: Path | None) -> list[str] | None:
    """Paths pre-commit stashed for the run we are part of, from its ``store``
    (`Invocation.pre_commit_store`); None when not under pre-commit (no store)."""
    if store is None:
        return None
    paths: set[str] = set()
    for pid in ancestor_pids():
        for patch in store.glob(f"patch*-{pid}"):
            try:
                data = patch.read_bytes()
            except OSError:
                continue
            for match in _DIFF_HEADER.finditer(data):
                paths.update(part.decode("utf-8", "replace") for part in match.groups())
    return sorted(paths)
