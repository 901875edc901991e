"""The source freeze of a commit, not of the worktree: what a pre-push hook checks.

At pre-push the question is whether the ref being pushed holds the pinned source
tree, whatever the worktree holds meanwhile (an edit in progress is not pushed).
The pin and the freeze settings are read from the pushed commit's own gates.toml,
so a push that moves the pin is judged by the pin it carries.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from gates.core import git
from gates.core.errors import ConfigError
from gates.freeze.check import (
    FreezeConfig,
    FreezeReason,
    FreezeReport,
    Reason,
    SourceTree,
    _replacement_reasons,
    _resolve,
    _tree_reasons,
    source_tree_digest,
)
from gates.workspace.root import CONFIG_NAME


@dataclass(frozen=True)
class FreezeSection:
    pin: str
    strict: bool
    paths: tuple[str, ...]
    exclude: tuple[str, ...]


@dataclass(frozen=True)
class FreezeSettings:
    """What the freeze check reads of a committed gates.toml (the attributes of GatesConfig
    it reads)."""

    freeze: FreezeSection
    governance: tuple[str, ...]

    def governance_paths(self) -> tuple[str, ...]:
        return self.governance


def settings_at(root: Path, commit: str, worktree: FreezeConfig) -> FreezeSettings:
    """The [freeze] section of gates.toml as committed at ``commit`` (the worktree's
    governance paths: the evidence locations are not part of what is pushed)."""
    blob = git.read_blobs(root, commit, [CONFIG_NAME])[CONFIG_NAME]
    if blob is None:
        raise ConfigError(f"commit {commit[:12]} has no {CONFIG_NAME}", file=root)
    try:
        section = tomllib.loads(blob.decode("utf-8")).get("freeze", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{CONFIG_NAME} at {commit[:12]} is not valid TOML: {exc}") from None
    if not isinstance(section, dict):
        raise ConfigError(f"{CONFIG_NAME} at {commit[:12]}: [freeze] is not a table")
    freeze = FreezeSection(
        str(section.get("pin", "")),
        bool(section.get("strict", False)),
        tuple(str(p) for p in section.get("paths", [])),
        tuple(str(p) for p in section.get("exclude", [])),
    )
    return FreezeSettings(freeze, tuple(worktree.governance_paths()))


def evaluate_freeze_at(root: Path, ref: str, worktree: FreezeConfig) -> FreezeReport:
    """Judge the commit ``ref`` names against the pin it carries (no worktree reasons)."""
    commit = git.describe_objects(root, [f"{ref}^{{commit}}"])[0].sha
    if commit is None:
        raise ConfigError(
            f"{ref} does not name a commit in this clone",
            file=root,
            hint="give the commit being pushed (pre-commit passes it as PRE_COMMIT_TO_REF)",
        )
    config = settings_at(root, commit, worktree)
    tree = SourceTree(config)
    found = _resolve(root, config.freeze.pin)
    reasons = [r for r in found.reasons if r.code is not Reason.UNBORN_HEAD]
    reasons += _replacement_reasons(root, found)
    entries = git.list_tree(root, commit)
    pin_digest = None
    if found.pin:
        pin_entries = entries if found.pin == commit else git.list_tree(root, found.pin)
        pin_digest = source_tree_digest(pin_entries, tree)
        reasons += [
            FreezeReason(r.code, r.message.replace("HEAD's", f"{ref}'s", 1), r.paths)
            for r in _tree_reasons(entries, pin_entries, tree)
        ]
        if config.freeze.strict and found.pin != commit:
            reasons.append(
                FreezeReason(
                    Reason.HEAD_NOT_PIN,
                    f"strict freeze: {ref} {commit[:12]} is not the pin {found.pin[:12]}",
                )
            )
    return FreezeReport(
        head=commit,
        pin=found.pin or (config.freeze.pin or None),
        head_equals_pin=found.pin == commit,
        reasons=tuple(reasons),
        head_source_tree=source_tree_digest(entries, tree),
        pin_source_tree=pin_digest,
        governance_paths=tree.governance,
    )
