"""Thin, read-only access to git: one subprocess per question, parsed into plain data.

GIT_OPTIONAL_LOCKS=0 keeps `git status` from refreshing the index, so an audit
never writes to the repository it judges.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gates.errors import GitError

_OVERRIDES = {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}


def run_git(root: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            input=stdin,
            capture_output=True,
            env={**os.environ, **_OVERRIDES},
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(
            f"git {args[0]} failed: {message[-1] if message else done.returncode}", file=root
        )
    return done.stdout


@dataclass(frozen=True)
class ObjectInfo:
    name: str
    sha: str | None
    type: str | None


def describe_objects(root: Path, names: list[str]) -> list[ObjectInfo]:
    """Resolve revisions to (sha, type) in one `git cat-file --batch-check` call."""
    payload = "".join(f"{name}\n" for name in names).encode("utf-8")
    lines = run_git(root, "cat-file", "--batch-check", stdin=payload).decode().splitlines()
    infos = []
    for name, line in zip(names, lines, strict=True):
        fields = line.split()
        if len(fields) == 3 and fields[1] != "missing":
            infos.append(ObjectInfo(name, fields[0], fields[1]))
        else:
            infos.append(ObjectInfo(name, None, None))
    return infos


def is_repository(root: Path) -> bool:
    out = run_git(root, "rev-parse", "--is-inside-work-tree", check=False)
    return out.strip() == b"true"


def toplevel(root: Path) -> Path:
    return Path(run_git(root, "rev-parse", "--show-toplevel").decode().strip())


def is_shallow(root: Path) -> bool:
    return run_git(root, "rev-parse", "--is-shallow-repository").strip() == b"true"


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    type: str
    sha: str


def list_tree(root: Path, commit: str) -> dict[str, TreeEntry]:
    """Every blob and gitlink of ``commit``, by path (`git ls-tree -r -z --full-tree`)."""
    out = run_git(root, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries: dict[str, TreeEntry] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, sha = meta.decode().split(" ")
        entries[path.decode("utf-8", "surrogateescape")] = TreeEntry(mode, kind, sha)
    return entries


def status_porcelain(root: Path, pathspecs: list[str]) -> bytes:
    """Raw `git status --porcelain=v2 -z` with every untracked file and submodule state."""
    return run_git(
        root,
        "status",
        "--porcelain=v2",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=none",
        "--",
        *pathspecs,
    )
