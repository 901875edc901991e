"""Workspace-relative paths: POSIX, relative, no ``..``, never through a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gates.core.errors import UnsafePathError


def check_relpath(raw: str, *, what: str = "path") -> list[str]:
    """Validate the spelling of a workspace-relative path and return its parts.

    Raises UnsafePathError for an empty, absolute, backslashed or
    non-normalized path (``..``, ``.`` or an empty component).
    """
    if not raw or "\x00" in raw:
        raise UnsafePathError(f"{what} {raw!r} is empty or contains NUL")
    if "\\" in raw:
        raise UnsafePathError(
            f"{what} {raw!r} contains a backslash", hint="write workspace paths in POSIX form"
        )
    if raw.startswith("/"):
        raise UnsafePathError(
            f"{what} {raw!r} is absolute",
            hint="give the path relative to the workspace root",
        )
    parts = raw.split("/")
    if any(part in ("..", ".", "") for part in parts):
        raise UnsafePathError(
            f"{what} {raw!r} is not a normalized workspace path (no '..', '.' or '//')",
            hint="give the path relative to the workspace root, inside it",
        )
    return parts


def resolve_inside(
    root: Path, raw: str, *, what: str = "path", checked_dirs: set[str] | None = None
) -> Path:
    """Map a workspace-relative path to a real file path, refusing symlinks on the way.

    Every component is checked with lstat, so neither the file nor any folder
    above it may be a symlink; the result is therefore inside ``root``.
    ``checked_dirs`` remembers folders already found to be real within one run.
    """
    parts = check_relpath(raw, what=what)
    current = str(root)
    for index, part in enumerate(parts):
        current = f"{current}/{part}"
        is_dir = index < len(parts) - 1
        if is_dir and checked_dirs is not None and current in checked_dirs:
            continue
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return root / raw
        if stat.S_ISLNK(mode):
            link = "/".join(parts[: index + 1])
            raise UnsafePathError(
                f"{what} {raw!r} goes through a symlink ({link})",
                hint="evidence must be a regular file inside the workspace, not a link",
            )
        if is_dir and checked_dirs is not None:
            checked_dirs.add(current)
    return root / raw


def to_workspace_relpath(root: Path, given: str, cwd: Path) -> str:
    """Turn a path typed by a user (relative to cwd, or absolute) into a workspace path.

    Only lexical: the caller still resolves it with :func:`resolve_inside`.
    """
    candidate = Path(given)
    if not candidate.is_absolute():
        candidate = cwd / candidate
    normalized = Path(os.path.normpath(candidate))
    try:
        return normalized.relative_to(root).as_posix()
    except ValueError:
        raise UnsafePathError(
            f"path {given!r} is outside the workspace {root}",
            hint="evidence must live inside the workspace",
        ) from None


def is_under(path: str, prefixes: list[str] | tuple[str, ...]) -> bool:
    """True when workspace path ``path`` equals one of ``prefixes`` or lies below one."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in prefixes)
