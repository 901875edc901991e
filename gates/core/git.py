"""Thin, read-only access to git: one subprocess per question, parsed into plain data.

`--no-optional-locks` keeps `git status` from refreshing the index, so an audit
never writes to the repository it judges. Local shortcuts that could make git
report something other than the objects and files are off for every call:
`--no-replace-objects` (no `git replace`), core.fsmonitor=false and
core.untrackedCache=false (no cached "nothing changed" answers). git runs in the
environment gates was started with: gates reads none of it here.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gates.core.errors import GitError

_NO_SHORTCUTS = (
    "--no-optional-locks",
    "--no-replace-objects",  # a replace ref never makes one commit read as another
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
)


def run_git(root: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *_NO_SHORTCUTS, *args],
            input=stdin,
            capture_output=True,
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


def resolve_commit(root: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None when it names none."""
    return describe_objects(root, [f"{ref}^{{commit}}"])[0].sha


def read_blobs(root: Path, commit: str, paths: list[str]) -> dict[str, bytes | None]:
    """The content of each path in ``commit``'s tree (None where it is not a file there),
    in one `git cat-file --batch` call."""
    if not paths:
        return {}
    payload = "".join(f"{commit}:{path}\n" for path in paths).encode("utf-8")
    out = run_git(root, "cat-file", "--batch", stdin=payload)
    found: dict[str, bytes | None] = {}
    offset = 0
    for path in paths:
        end = out.index(b"\n", offset)
        header = out[offset:end].decode("utf-8", "replace").split()
        offset = end + 1
        if len(header) == 3 and header[1] == "blob":
            size = int(header[2])
            found[path] = out[offset : offset + size]
            offset += size + 1
        else:
            if len(header) == 3 and header[1] != "missing":
                offset += int(header[2]) + 1
            found[path] = None
    return found


def list_folder(root: Path, commit: str, folder: str) -> list[str]:
    """Names of the files directly in ``folder`` of ``commit``'s tree (empty if none)."""
    out = run_git(root, "ls-tree", "-z", "--full-tree", commit, "--", f"{folder.rstrip('/')}/")
    names = []
    for record in out.split(b"\0"):
        meta, _, path = record.partition(b"\t")
        if record and meta.split(b" ")[1:2] == [b"blob"]:
            names.append(path.decode("utf-8", "surrogateescape").rsplit("/", 1)[-1])
    return sorted(names)


@dataclass(frozen=True)
class IndexListing:
    """What `git ls-files` says about the source tree, read with only the in-tree ignore rules."""

    assume_unchanged: tuple[str, ...]
    skip_worktree: tuple[str, ...]
    untracked: tuple[str, ...]


def list_index(root: Path, pathspecs: list[str]) -> IndexListing:
    """Index flags and untracked files; ignore rules only from `.gitignore` files.

    `--exclude-per-directory=.gitignore` without `--exclude-standard` leaves out
    `.git/info/exclude` and `core.excludesFile`, which are not part of any tree.
    """
    out = run_git(
        root,
        "ls-files",
        "-z",
        "-v",
        "--cached",
        "--others",
        "--exclude-per-directory=.gitignore",
        "--",
        *pathspecs,
    )
    assume_unchanged: list[str] = []
    skip_worktree: list[str] = []
    untracked: list[str] = []
    for record in out.split(b"\0"):
        if len(record) < 3:
            continue
        tag, path = record[:1].decode(), record[2:].decode("utf-8", "surrogateescape")
        if tag == "?":
            untracked.append(path)
            continue
        if tag.islower():
            assume_unchanged.append(path)
        if tag.upper() == "S":
            skip_worktree.append(path)
    return IndexListing(tuple(assume_unchanged), tuple(skip_worktree), tuple(untracked))


def ignored_rule_files(root: Path, pathspecs: list[str]) -> list[str]:
    """Untracked `.gitignore` files that ignore themselves (invisible to `git status`)."""
    out = run_git(
        root,
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--directory",
        "--exclude-per-directory=.gitignore",
        "--",
        *pathspecs,
    )
    paths = (record.decode("utf-8", "surrogateescape") for record in out.split(b"\0"))
    return [path for path in paths if path.rsplit("/", 1)[-1] == ".gitignore"]


def replaced_objects(root: Path) -> dict[str, str]:
    """`git replace` entries: replaced object id -> replacement (ignored by every call here)."""
    out = run_git(
        root, "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)", "refs/replace/"
    )
    replacements: dict[str, str] = {}
    for line in out.decode().splitlines():
        replaced, _, replacement = line.partition(" ")
        replacements[replaced] = replacement
    return replacements


def attributes(root: Path, paths: list[str], names: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """The git attributes ``names`` that are set on ``paths`` (`git check-attr -z`)."""
    if not paths:
        return {}
    payload = b"".join(path.encode("utf-8", "surrogateescape") + b"\0" for path in paths)
    out = run_git(root, "check-attr", "-z", "--stdin", *names, stdin=payload)
    fields = out.split(b"\0")
    found: dict[str, dict[str, str]] = {}
    for index in range(0, len(fields) - 2, 3):
        path, name, value = (
            part.decode("utf-8", "surrogateescape") for part in fields[index : index + 3]
        )
        if value not in ("unspecified", "unset"):
            found.setdefault(path, {})[name] = value
    return found


def config_entries(root: Path, pattern: str) -> list[tuple[str, str, str]]:
    """(origin, key, value) of each git config entry whose key matches ``pattern``."""
    out = run_git(root, "config", "--show-origin", "-z", "--get-regexp", pattern, check=False)
    records = out.split(b"\0")
    entries = []
    for origin, pair in zip(records[0::2], records[1::2], strict=False):
        key, _, value = pair.decode("utf-8", "replace").partition("\n")
        entries.append((origin.decode("utf-8", "replace"), key, value))
    return entries


#: git's order for expanding a short name (gitrevisions(7)), after `$GIT_DIR/<name>`.
_SHORT_NAME_RULES = (
    "refs/{}",
    "refs/tags/{}",
    "refs/heads/{}",
    "refs/remotes/{}",
    "refs/remotes/{}/HEAD",
)
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_PSEUDO_REF = re.compile(r"[A-Z_]+")


@dataclass(frozen=True)
class ResolvedRef:
    """A protected ref as one thing: its full refname (or ``commit <id>`` for a commit id)
    and the commit it names now."""

    given: str
    refname: str
    commit: str

    def describe(self) -> str:
        return f"{self.refname} at {self.commit}"


class RefError(GitError):
    """A ref name that names nothing, or more than one thing."""


def _existing_refs(root: Path, names: list[str]) -> list[str]:
    out = run_git(root, "for-each-ref", "--format=%(refname)", *names)
    listed = set(out.decode("utf-8", "surrogateescape").splitlines())
    return [name for name in names if name in listed]


def resolve_ref(root: Path, name: str, *, what: str = "policy ref") -> ResolvedRef:
    """``name`` as exactly one full refname and its commit, or RefError.

    A short name that more than one ref could mean (a local branch
    ``refs/heads/origin/main`` beside ``refs/remotes/origin/main``, a tag and a
    branch of one name) is refused with the candidates: git would silently pick
    one, and a PR's scripts can create the one it picks. Pseudo-refs such as
    HEAD or FETCH_HEAD name whatever this clone has checked out or fetched last,
    so they are refused too. A full commit id is accepted as itself.
    """
    name = name.strip()
    if not name or _PSEUDO_REF.fullmatch(name):
        raise RefError(
            f"{what} {name!r} is not a branch or tag: it names what this clone has checked out "
            "or fetched, which the code under audit can move",
            file=root,
            hint="name the protected branch in full, e.g. refs/remotes/origin/main",
        )
    if name.startswith("refs/"):
        candidates = _existing_refs(root, [name])
    else:
        candidates = _existing_refs(root, [rule.format(name) for rule in _SHORT_NAME_RULES])
    if _COMMIT_ID.fullmatch(name):
        kind = describe_objects(root, [name])[0].type
        if kind == "commit" and not candidates:
            return ResolvedRef(name, f"commit {name}", name)
        if kind == "commit":
            candidates = [f"commit {name}", *candidates]
    if len(candidates) > 1:
        raise RefError(
            f"{what} {name} is ambiguous: it could mean {', '.join(candidates)}",
            file=root,
            hint="name one of them in full (e.g. refs/remotes/origin/main) and delete the "
            "others from this clone",
        )
    if not candidates:
        raise RefError(
            f"{what} {name} does not name a commit in this clone (no branch, tag or full "
            "commit id of that name)",
            file=root,
            hint="fetch it (git fetch origin main), or name it in full (refs/remotes/origin/main)"
            " or by its full commit id",
        )
    commit = resolve_commit(root, candidates[0])
    if commit is None:
        raise RefError(f"{what} {candidates[0]} does not name a commit", file=root)
    return ResolvedRef(name, candidates[0], commit)
