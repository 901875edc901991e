"""The source-freeze check: is HEAD's source tree the pin's, and is the worktree clean?

`evaluate_freeze` gathers every reason at once (never stops at the first) and
reads the worktree state twice, so a concurrent writer is named instead of
being silently half-seen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal

from gates import git
from gates.config import GatesConfig
from gates.errors import ConfigError
from gates.paths import is_under
from gates.precommit import stashed_paths


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


#: The criteria of the source-freeze contract and the reasons that fail each.
CRITERIA: dict[str, tuple[Reason, ...]] = {
    "pin_resolves": (Reason.NO_PIN, Reason.PIN_MISSING, Reason.PIN_NOT_COMMIT, Reason.UNBORN_HEAD),
    "source_tree_equals_pin": (Reason.TREE_DIFFERS, Reason.HEAD_NOT_PIN),
    "worktree_clean": (
        Reason.STAGED,
        Reason.UNSTAGED,
        Reason.UNTRACKED,
        Reason.UNMERGED,
        Reason.SUBMODULE,
        Reason.HIDDEN_BY_PRE_COMMIT,
    ),
    "worktree_stable": (Reason.CONCURRENT_WRITER,),
}


@dataclass(frozen=True)
class FreezeReason:
    code: Reason
    message: str


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

    def __init__(self, config: GatesConfig) -> None:
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
        FreezeReason(code, f"{wording[code]}: {_name_paths(paths)}")
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


def hidden_by_pre_commit(tree: SourceTree) -> list[FreezeReason]:
    """Unstaged changes that pre-commit stashed away while this hook runs."""
    hidden = [path for path in stashed_paths() or [] if tree.contains(path)]
    if not hidden:
        return []
    return [
        FreezeReason(
            Reason.HIDDEN_BY_PRE_COMMIT,
            "pre-commit stashed unstaged changes inside the source tree while hooks run "
            f"({_name_paths(hidden)}): the worktree only looks clean; commit or stash them, "
            "and run the strict check at pre-push and in CI",
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
        shallow = " (shallow clone? run `git fetch --unshallow`)" if git.is_shallow(root) else ""
        found.reasons.append(
            FreezeReason(Reason.PIN_MISSING, f"pin {pin} is not in this clone{shallow}")
        )
    return found


def evaluate_freeze(
    root: Path,
    config: GatesConfig,
    *,
    between_reads: Callable[[], None] | None = None,
) -> FreezeReport:
    """Judge the source freeze of the repository at ``root`` (which must be its top level).

    ``between_reads`` runs between the two reads of the worktree state; tests
    use it to play a concurrent writer deterministically.
    """
    if not (root / ".git").exists():
        raise ConfigError(
            "gates.toml must sit at the root of a git repository (no .git here)", file=root
        )
    tree = SourceTree(config)
    first_status = git.status_porcelain(root, tree.pathspecs())
    found = _resolve(root, config.freeze.pin)
    reasons = list(found.reasons)
    head_digest = pin_digest = None
    if found.head:
        head_entries = git.list_tree(root, found.head)
        head_digest = source_tree_digest(head_entries, tree)
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
    reasons += hidden_by_pre_commit(tree)
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
        )
    ]
