"""Atomic file writes: a temp file in the same folder, fsync, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp = Path(tmp_name)
        tmp.chmod(path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp_name).unlink()
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))
