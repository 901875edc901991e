"""The commit under audit as files: read from git's objects, never from the worktree.

`git archive` of the commit's *tree* (a tree, not a commit, so no `export-subst`
expansion), without the evidence locations, extracted by `tar` into a folder
outside the workspace. The extracted file list is then compared with the tree's
own listing, so an `export-ignore` attribute (committed by the PR) cannot drop a
file from what runs without gates saying so.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gates.core.errors import GatesError
from gates.core.paths import is_under


@dataclass(frozen=True)
class Materialized:
    path: Path
    commit: str
    tree: str


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise GatesError(
            f"git {' '.join(args[:2])} failed: {done.stderr.strip()[:300]}",
            hint="gates run needs the commit under audit in this clone",
        )
    return done.stdout


def _pathspecs(excluded: tuple[str, ...]) -> list[str]:
    return [".", *(f":(exclude,top){path.strip('/')}" for path in excluded)]


def _extracted(folder: Path) -> set[str]:
    found = set()
    for base, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if (Path(base) / d).is_symlink()]:
            found.add((Path(base) / name).relative_to(folder).as_posix())
    return found


def _check_complete(into: Path, commit: str, listing: list[str], excluded: tuple[str, ...]) -> None:
    """Every file of the commit was extracted (an export-ignore attribute drops files)."""
    expected = set()
    for entry in listing:
        meta, _, name = entry.partition("\t")
        if name and not meta.startswith("160000 ") and not is_under(name, excluded):
            expected.add(name)
    missing = sorted(expected - _extracted(into))
    if missing:
        raise GatesError(
            f"commit {commit[:12]}: {missing[0]} is in the commit but not in its archive "
            f"({len(missing)} file(s); an export-ignore attribute?)",
            hint="remove export-ignore from .gitattributes: what runs must be the whole commit",
        )


def materialize(root: Path, commit: str, excluded: tuple[str, ...], into: Path) -> Materialized:
    """Write ``commit``'s files (less ``excluded`` paths) into the empty folder ``into``."""
    if commit.startswith("-"):
        raise GatesError(f"not a commit: {commit!r}")
    full, tree = _git(root, "rev-parse", f"{commit}^{{commit}}", f"{commit}^{{tree}}").split()
    into.mkdir(parents=True, exist_ok=True)
    specs = _pathspecs(excluded)
    archive = subprocess.Popen(
        ["git", "-C", str(root), "archive", "--format=tar", tree, "--", *specs],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert archive.stdout is not None  # noqa: S101  (stdout=PIPE above)
    tar = subprocess.run(
        ["tar", "-x", "--no-same-owner", "-C", str(into)],
        stdin=archive.stdout,
        capture_output=True,
        check=False,
    )
    archive.stdout.close()
    archive_err = archive.stderr.read().decode("utf-8", "replace") if archive.stderr else ""
    if archive.wait() != 0 or tar.returncode != 0:
        why = archive_err.strip() or tar.stderr.decode("utf-8", "replace").strip()
        raise GatesError(f"cannot materialize commit {full[:12]}: {why[:300]}")
    if archive.stderr:
        archive.stderr.close()
    listing = _git(root, "ls-tree", "-r", "-z", tree).split("\0")
    if any(entry.endswith(("/.gitattributes", "\t.gitattributes")) for entry in listing):
        _check_complete(into, full, listing, excluded)
    return Materialized(into, full, tree)
