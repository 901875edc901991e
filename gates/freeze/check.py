"""The source-freeze check: is HEAD's source tree the pin's, and is the worktree clean?

`evaluate_freeze` gathers every reason at once (never stops at the first) and
reads the worktree state twice, so a concurrent writer is named instead of
being silently half-seen.

Git's local state is not trusted to say the worktree is clean: the tracked
source files are compared by their bytes with HEAD's blobs (gates/freeze/worktree.py),
index entries marked assume-unchanged or skip-worktree are refused, untracked
files are listed with only the ignore rules that are part of the tree (not
`.git/info/exclude` nor `core.excludesFile`), and `git replace` entries for
the pin or HEAD are named (every git call here ignores them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal, Protocol

from gates.core import git
from gates.core.errors import ConfigError
from gates.core.hashing import BLOB_TABLE, StatCache
from gates.core.paths import is_under
from gates.freeze.precommit import stashed_paths
from gates.freeze.worktree import differing_files


class FreezeSectionLike(Protocol):
    @property
    def pin(self) -> str: ...
    @property
    def strict(self) -> bool: ...
    @property
    def paths(self) -> tuple[str, ...]: ...


class FreezeConfig(Protocol):
    """What the freeze reads of gates.toml: GatesConfig, or a commit's FreezeSettings."""

    @property
    def freeze(self) -> FreezeSectionLike: ...
    def governance_paths(self) -> tuple[str, ...]: ...


class Reason(StrEnum):
    NO_PIN = "no_pin"
    PIN_MISSING = "pin_missing"
    PIN_NOT_COMMIT = "pin_not_commit"
    UNBORN_HEAD = "unborn_head"
    TREE_DIFFERS = "tree_differs"
    HEAD_NOT_PIN = "head_not_pin"
    STAGED = "staged"
    UNSTAGED = "unstaged"
    UNTRACKED = "untracked"
    UNMERGED = "unmerged"
    SUBMODULE = "submodule"
    CONCURRENT_WRITER = "concurrent_writer"
    HIDDEN_BY_PRE_COMMIT = "hidden_by_pre_commit"
    REPLACED_OBJECT = "replaced_object"
    ASSUME_UNCHANGED = "assume_unchanged"
    SKIP_WORKTREE = "skip_worktree"
    CONTENT_DIFFERS = "content_differs"
    FILTERED = "filtered"
    LOCAL_IGNORE_RULE = "local_ignore_rule"
    ESCAPING_SYMLINK = "escaping_symlink"


#: The criteria of the source-freeze contract and the reasons that fail each.
CRITERIA: dict[str, tuple[Reason, ...]] = {
    "pin_resolves": (Reason.NO_PIN, Reason.PIN_MISSING, Reason.PIN_NOT_COMMIT, Reason.UNBORN_HEAD),
    "source_tree_equals_pin": (
        Reason.TREE_DIFFERS,
        Reason.HEAD_NOT_PIN,
        Reason.REPLACED_OBJECT,
        Reason.ESCAPING_SYMLINK,
    ),
    "worktree_clean": (
        Reason.STAGED,
        Reason.UNSTAGED,
        Reason.UNTRACKED,
        Reason.UNMERGED,
        Reason.SUBMODULE,
        Reason.HIDDEN_BY_PRE_COMMIT,
        Reason.ASSUME_UNCHANGED,
        Reason.SKIP_WORKTREE,
        Reason.CONTENT_DIFFERS,
        Reason.FILTERED,
        Reason.LOCAL_IGNORE_RULE,
    ),
    "worktree_stable": (Reason.CONCURRENT_WRITER,),
}


@dataclass(frozen=True)
class FreezeReason:
    code: Reason
    message: str
    #: the workspace paths the message names, for reports that point at them
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class FreezeReport:
    """What `audit_source_freeze.py` prints, and what stamps a receipt."""

    head: str | None
    pin: str | None
    head_equals_pin: bool
    reasons: tuple[FreezeReason, ...]
    head_source_tree: str | None = None
    pin_source_tree: str | None = None
    governance_paths: tuple[str, ...] = field(default=())

    @property
    def verdict(self) -> Literal["pass", "blocked"]:
        return "blocked" if self.reasons else "pass"

    def messages(self) -> list[str]:
        return [reason.message for reason in self.reasons]

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "head": self.head,
            "pin": self.pin,
            "head_equals_pin": self.head_equals_pin,
            "head_source_tree": self.head_source_tree,
            "pin_source_tree": self.pin_source_tree,
            "reasons": [{"code": r.code.value, "message": r.message} for r in self.reasons],
        }


class SourceTree:
    """Which paths belong to the source tree under a given configuration."""

    def __init__(self, config: FreezeConfig) -> None:
        self.governance = config.governance_paths()
        self.narrow_to = tuple(config.freeze.paths)

    def pathspecs(self) -> list[str]:
        """The same set as git pathspecs, so git never walks the evidence folders."""
        included = [f":(literal){path}" for path in self.narrow_to] or ["."]
        return included + [f":(exclude,literal){path}" for path in self.governance]

    def contains(self, path: str) -> bool:
        if is_under(path, self.governance):
            return False
        return not self.narrow_to or is_under(path, self.narrow_to)


def source_tree_digest(entries: dict[str, git.TreeEntry], tree: SourceTree) -> str:
    """sha256 over the sorted (mode, type, object id, path) records of the source tree."""
    digest = hashlib.sha256()
    for path in sorted(entries):
        if tree.contains(path):
            entry = entries[path]
            digest.update(f"{entry.mode} {entry.type} {entry.sha}\t{path}\0".encode())
    return digest.hexdigest()


def _name_paths(paths: Iterable[str], limit: int = 5) -> str:
    ordered = sorted(set(paths))
    shown = ", ".join(ordered[:limit])
    more = len(ordered) - limit
    return shown + (f" and {more} more" if more > 0 else "")


def _named(paths: Iterable[str], limit: int = 5) -> tuple[str, ...]:
    """The paths `_name_paths` names."""
    return tuple(sorted(set(paths))[:limit])


def parse_status(raw: bytes) -> list[tuple[str, str, str]]:
    """Porcelain v2 records as (kind, XY+submodule flags, path); renames give both paths."""
    records = raw.split(b"\0")
    parsed: list[tuple[str, str, str]] = []
    index = 0
    while index < len(records):
        record = records[index].decode("utf-8", "surrogateescape")
        index += 1
        if not record or record.startswith("#"):
            continue
        kind = record[0]
        if kind in "?!":
            parsed.append((kind, "", record[2:]))
            continue
        fields = record.split(" ", {"1": 8, "2": 9, "u": 10}[kind])
        flags = f"{fields[1]} {fields[2]}"
        parsed.append((kind, flags, fields[-1]))
        if kind == "2":
            parsed.append((kind, flags, records[index].decode("utf-8", "surrogateescape")))
            index += 1
    return parsed


def worktree_reasons(raw_status: bytes, tree: SourceTree) -> list[FreezeReason]:
    """Staged, unstaged, untracked, unmerged and submodule changes inside the source tree."""
    found: dict[Reason, list[str]] = {}
    for kind, flags, path in parse_status(raw_status):
        if kind == "!" or not tree.contains(path):
            continue
        for code in _classify(kind, flags):
            found.setdefault(code, []).append(path)
    wording = {
        Reason.STAGED: "staged changes inside the source tree",
        Reason.UNSTAGED: "unstaged changes inside the source tree",
        Reason.UNTRACKED: "untracked files inside the source tree",
        Reason.UNMERGED: "unmerged (conflicted) paths inside the source tree",
        Reason.SUBMODULE: "submodules with changes inside the source tree",
    }
    return [
        FreezeReason(code, f"{wording[code]}: {_name_paths(paths)}", _named(paths))
        for code, paths in sorted(found.items())
    ]


def _classify(kind: str, flags: str) -> list[Reason]:
    if kind == "?":
        return [Reason.UNTRACKED]
    if kind == "u":
        return [Reason.UNMERGED]
    xy, submodule = flags.split(" ")
    if submodule.startswith("S") and (xy[1] != "." or submodule != "S..."):
        return [Reason.SUBMODULE]
    codes = []
    if xy[0] != ".":
        codes.append(Reason.STAGED)
    if xy[1] != ".":
        codes.append(Reason.UNSTAGED)
    return codes


def hidden_by_pre_commit(tree: SourceTree, store: Path | None) -> list[FreezeReason]:
    """Unstaged changes that pre-commit stashed away (in ``store``) while this hook runs."""
    hidden = [path for path in stashed_paths(store) or [] if tree.contains(path)]
    if not hidden:
        return []
    return [
        FreezeReason(
            Reason.HIDDEN_BY_PRE_COMMIT,
            "pre-commit stashed unstaged changes inside the source tree while hooks run "
            f"({_name_paths(hidden)}): the worktree only looks clean; commit or stash them, "
            "and run the strict check at pre-push and in CI",
            _named(hidden),
        )
    ]


def _changed_paths(first: bytes, second: bytes) -> list[str]:
    a = set(parse_status(first))
    b = set(parse_status(second))
    return [path for _, _, path in a ^ b]


@dataclass
class _Resolution:
    head: str | None = None
    pin: str | None = None
    reasons: list[FreezeReason] = field(default_factory=list)


def _resolve(root: Path, pin: str) -> _Resolution:
    names = ["HEAD"] + ([f"{pin}^{{commit}}", pin] if pin else [])
    infos = git.describe_objects(root, names)
    found = _Resolution(head=infos[0].sha)
    if found.head is None:
        found.reasons.append(
            FreezeReason(Reason.UNBORN_HEAD, "HEAD has no commit yet (unborn branch)")
        )
    if not pin:
        found.reasons.append(
            FreezeReason(
                Reason.NO_PIN,
                "no pin set in gates.toml [freeze] pin; run `gates freeze pin <commit>`",
            )
        )
        return found
    found.pin = infos[1].sha
    if found.pin is None and infos[2].sha is not None:
        found.reasons.append(
            FreezeReason(Reason.PIN_NOT_COMMIT, f"pin {pin} is a {infos[2].type}, not a commit")
        )
    elif found.pin is None:
        fix = (
            "shallow clone? run `git fetch --unshallow`"
            if git.is_shallow(root)
            else "after a rebase the pinned commit is gone: review the source, then run "
            "`gates freeze pin HEAD`"
        )
        found.reasons.append(
            FreezeReason(Reason.PIN_MISSING, f"pin {pin} is not in this clone ({fix})")
        )
    return found


@dataclass(frozen=True)
class FreezeInputs:
    """What judging the freeze reads besides the repository: the command's cache of git
    blob ids (``blobs``; None: hash every source file), and pre-commit's store while its
    hooks run (``pre_commit_store``; None: not under pre-commit). Both come from the
    command's invocation (`gates.engine.inputs.AuditInputs.freeze_inputs`)."""

    blobs: StatCache | None = None
    pre_commit_store: Path | None = None


def evaluate_freeze(
    root: Path,
    config: FreezeConfig,
    inputs: FreezeInputs | None = None,
    *,
    between_reads: Callable[[], None] | None = None,
) -> FreezeReport:
    """Judge the source freeze of the repository at ``root`` (which must be its top level).

    ``between_reads`` runs between the two reads of the worktree state; tests
    use it to play a concurrent writer deterministically.
    """
    inputs = inputs or FreezeInputs()
    if not (root / ".git").exists():
        raise ConfigError(
            "gates.toml must sit at the root of a git repository (no .git here)", file=root
        )
    tree = SourceTree(config)
    first_status = git.status_porcelain(root, tree.pathspecs())
    found = _resolve(root, config.freeze.pin)
    reasons = list(found.reasons)
    reasons += _replacement_reasons(root, found)
    head_digest = pin_digest = None
    differing: list[str] = []
    if found.head:
        head_entries = git.list_tree(root, found.head)
        head_digest = source_tree_digest(head_entries, tree)
        cache = inputs.blobs or StatCache(None, tables=(BLOB_TABLE,))
        differing = differing_files(root, head_entries, tree.contains, cache)
        cache.save()
        reasons += symlink_reasons(root, found.head, head_entries, tree)
    if found.head and found.pin:
        pin_entries = head_entries if found.pin == found.head else git.list_tree(root, found.pin)
        pin_digest = source_tree_digest(pin_entries, tree)
        reasons += _tree_reasons(head_entries, pin_entries, tree)
        if config.freeze.strict and found.head != found.pin:
            reasons.append(
                FreezeReason(
                    Reason.HEAD_NOT_PIN,
                    f"strict freeze: HEAD {found.head[:12]} is not the pin {found.pin[:12]}",
                )
            )
    reasons += worktree_reasons(first_status, tree)
    reasons += local_state_reasons(root, first_status, differing, tree)
    reasons += hidden_by_pre_commit(tree, inputs.pre_commit_store)
    if between_reads is not None:
        between_reads()
    second_status = git.status_porcelain(root, tree.pathspecs())
    second_head = git.describe_objects(root, ["HEAD"])[0].sha
    if second_status != first_status or second_head != found.head:
        changed = _changed_paths(first_status, second_status) or ["HEAD"]
        reasons.append(
            FreezeReason(
                Reason.CONCURRENT_WRITER,
                "concurrent writer: the worktree changed between two reads "
                f"({_name_paths(changed)}); stop the writer and rerun",
                _named(changed),
            )
        )
    return FreezeReport(
        head=found.head,
        pin=found.pin or (config.freeze.pin or None),
        head_equals_pin=found.head is not None and found.head == found.pin,
        reasons=tuple(reasons),
        head_source_tree=head_digest,
        pin_source_tree=pin_digest,
        governance_paths=tree.governance,
    )


SYMLINK_MODE = "120000"
_MAX_HOPS = 40  # as the kernel's limit on nested symlinks


def resolve_in_tree(link: str, targets: dict[str, str]) -> str | None:
    """Where the committed symlink ``link`` leads inside the repository, following the other
    committed symlinks (``targets``: path -> link text) as the kernel would; None when it
    leaves the repository (an absolute target, ``..`` above the root, or a loop)."""
    parts = link.split("/")[:-1]
    pending = targets[link].split("/")
    if targets[link].startswith("/"):
        return None
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
        here = "/".join(parts)
        if here in targets:
            hops += 1
            if hops > _MAX_HOPS or targets[here].startswith("/"):
                return None
            parts.pop()
            pending = targets[here].split("/") + pending
    return "/".join(parts)


def symlink_reasons(
    root: Path, commit: str, entries: dict[str, git.TreeEntry], tree: SourceTree
) -> list[FreezeReason]:
    """Committed symlinks of the source tree whose target is not frozen with it: outside the
    repository, into .git, or into a path the source tree leaves out (an evidence location,
    a governance path, or outside [freeze] paths). What they point at could change after the
    pin while the freeze passes."""
    links = [path for path, entry in entries.items() if entry.mode == SYMLINK_MODE]
    if not links:
        return []
    blobs = git.read_blobs(root, commit, links)
    targets = {path: (blobs[path] or b"").decode("utf-8", "surrogateescape") for path in links}
    escaping = []
    for link in sorted(links):
        if not tree.contains(link):
            continue
        resolved = resolve_in_tree(link, targets)
        if resolved is None:
            escaping.append(f"{link} -> {targets[link]} (leaves the repository)")
        elif resolved == ".git" or resolved.startswith(".git/"):
            escaping.append(f"{link} -> {targets[link]} (into .git)")
        elif not resolved:
            escaping.append(f"{link} -> {targets[link]} (the repository root, with .git)")
        elif not tree.contains(resolved):
            escaping.append(f"{link} -> {targets[link]} (outside the source tree: {resolved})")
        elif any(is_under(path, (resolved,)) for path in tree.governance):
            escaping.append(
                f"{link} -> {targets[link]} (a folder holding governance paths: {resolved})"
            )
    if not escaping:
        return []
    return [
        FreezeReason(
            Reason.ESCAPING_SYMLINK,
            "committed symlinks in the source tree point where the freeze does not reach, so "
            f"what runs could change after the pin: {'; '.join(escaping[:5])}"
            f"{f' and {len(escaping) - 5} more' if len(escaping) > 5 else ''}; "
            "commit the file itself instead of the link",
        )
    ]


def _tree_reasons(
    head: dict[str, git.TreeEntry], pin: dict[str, git.TreeEntry], tree: SourceTree
) -> list[FreezeReason]:
    if head is pin:
        return []
    differing = [
        path
        for path in set(head) | set(pin)
        if tree.contains(path) and head.get(path) != pin.get(path)
    ]
    if not differing:
        return []
    return [
        FreezeReason(
            Reason.TREE_DIFFERS,
            f"HEAD's source tree differs from the pin's in {len(differing)} path(s): "
            f"{_name_paths(differing)}",
            _named(differing),
        )
    ]


def _replacement_reasons(root: Path, found: _Resolution) -> list[FreezeReason]:
    """Name a `git replace` of the pin or HEAD: git commands would show the replacement."""
    replaced = git.replaced_objects(root)
    reasons = []
    for role, sha in (("the pin", found.pin), ("HEAD", found.head)):
        if sha and sha in replaced and not (role == "HEAD" and found.head == found.pin):
            reasons.append(
                FreezeReason(
                    Reason.REPLACED_OBJECT,
                    f"git replace: {role} {sha[:12]} reads as {replaced[sha][:12]} in other git "
                    f"commands; gates judges the original objects; remove it with "
                    f"`git replace -d {sha}`",
                )
            )
    return reasons


_FILTER_ATTRIBUTES = ("filter", "text", "eol", "ident", "working-tree-encoding")


def local_state_reasons(
    root: Path, raw_status: bytes, differing: list[str], tree: SourceTree
) -> list[FreezeReason]:
    """What `git status` cannot see because of local index flags, ignore rules or filters."""
    listing = git.list_index(root, tree.pathspecs())
    seen_by_status: dict[str, str] = {}
    for kind, _, path in parse_status(raw_status):
        seen_by_status[path] = kind
    reasons: list[FreezeReason] = []
    assumed = [path for path in listing.assume_unchanged if tree.contains(path)]
    if assumed:
        reasons.append(
            FreezeReason(
                Reason.ASSUME_UNCHANGED,
                "git's index marks source paths assume-unchanged, so git status does not look "
                f"at them: {_name_paths(assumed)}; run `git update-index "
                "--no-assume-unchanged -- <path>`",
                _named(assumed),
            )
        )
    skipped = [path for path in listing.skip_worktree if tree.contains(path)]
    if skipped:
        reasons.append(
            FreezeReason(
                Reason.SKIP_WORKTREE,
                "git's index marks source paths skip-worktree (or a sparse checkout leaves "
                f"them out), so git status does not look at them: {_name_paths(skipped)}; run "
                "`git update-index --no-skip-worktree -- <path>` (or `git sparse-checkout "
                "disable`)",
                _named(skipped),
            )
        )
    flagged = set(assumed) | set(skipped)
    unseen = [p for p in differing if p not in seen_by_status and p not in flagged]
    reasons += _content_reasons(root, unseen)
    hidden = [
        path
        for path in listing.untracked
        if tree.contains(path) and seen_by_status.get(path) != "?"
    ]
    hidden += [
        path for path in git.ignored_rule_files(root, tree.pathspecs()) if tree.contains(path)
    ]
    if hidden:
        reasons.append(
            FreezeReason(
                Reason.LOCAL_IGNORE_RULE,
                "untracked files inside the source tree hidden by ignore rules that are not "
                "part of the pinned tree (.git/info/exclude, core.excludesFile, or an "
                f"untracked .gitignore): {_name_paths(hidden)}; commit, move or delete them",
                _named(hidden),
            )
        )
    return reasons


def _content_reasons(root: Path, unseen: list[str]) -> list[FreezeReason]:
    """Files whose bytes are not HEAD's blob although git status says they are."""
    if not unseen:
        return []
    attributes = git.attributes(root, unseen, _FILTER_ATTRIBUTES)
    filtered = {path: attributes[path] for path in unseen if path in attributes}
    plain = [path for path in unseen if path not in filtered]
    reasons = []
    if filtered:
        described = [
            f"{path} ({', '.join(f'{k}={v}' for k, v in sorted(filtered[path].items()))})"
            for path in sorted(filtered)
        ]
        drivers = sorted({a["filter"] for a in filtered.values() if "filter" in a})
        origins = [
            f"{key}={value!r} in {origin}"
            for origin, key, value in git.config_entries(root, r"^filter\.")
            if any(key.startswith(f"filter.{name}.") for name in drivers)
        ]
        where = f"; configured as {'; '.join(origins)}" if origins else ""
        reasons.append(
            FreezeReason(
                Reason.FILTERED,
                "source files whose bytes on disk differ from HEAD's blobs while git's "
                "clean/smudge or line-ending conversion makes them look unchanged: "
                f"{', '.join(described[:5])}{where}; the freeze compares the bytes that run",
                tuple(sorted(filtered)[:5]),
            )
        )
    if plain:
        reasons.append(
            FreezeReason(
                Reason.CONTENT_DIFFERS,
                "source files whose bytes differ from HEAD's blobs although git status does "
                f"not show it (stale index stat data or fsmonitor state): {_name_paths(plain)}; "
                "run `git update-index --really-refresh` and look at the change",
                _named(plain),
            )
        )
    return reasons


def entrypoint_script_problems(
    root: Path, config: FreezeConfig, scripts: list[str]
) -> dict[str, str]:
    """Why each declared entrypoint script cannot be trusted to be what was frozen (absent
    when it can): it must be a regular file of the source tree, in the pinned commit (HEAD
    while no pin is set) and in the worktree, never a symlink whose target the freeze does
    not follow."""
    tree = SourceTree(config)
    revision = config.freeze.pin or "HEAD"
    listed: dict[str, git.TreeEntry] = {}
    commit = git.describe_objects(root, [f"{revision}^{{commit}}"])[0].sha if scripts else None
    if commit is not None:
        out = git.run_git(root, "ls-tree", "-z", "--full-tree", commit, "--", *scripts)
        for record in out.split(b"\0"):
            meta, _, path = record.partition(b"\t")
            if record:
                mode, kind, sha = meta.decode().split(" ")
                listed[path.decode("utf-8", "surrogateescape")] = git.TreeEntry(mode, kind, sha)
    problems: dict[str, str] = {}
    for script in scripts:
        entry = listed.get(script)
        on_disk = root / script
        if not tree.contains(script):
            problems[script] = f"{script} is not in the source tree (a governance path)"
        elif entry is None:
            problems[script] = f"{script} is not a file of the pinned commit {revision[:12]}"
        elif entry.mode == SYMLINK_MODE or on_disk.is_symlink():
            problems[script] = (
                f"{script} is a symlink; a declared entrypoint must be a regular file of the "
                "pinned tree"
            )
        elif entry.type != "blob" or not on_disk.is_file():
            problems[script] = f"{script} is not a regular file of the pinned tree"
    return problems
