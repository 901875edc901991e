"""Each side's code, and whether a receipt's code is still the code in force.

The policy in force names which paths of the source tree are the reference's code and
which the candidate's (gates.toml ``[sides]``); everything else in the source tree is
shared. A receipt is judged by its own side's code and the shared code only, compared
blob by blob between the commit it was made at and the commit it must match:

- candidate evidence (and evidence of no side, such as a checker's output) against the
  pin: a PR that changes only candidate code re-runs only the candidate;
- reference evidence against the policy ref's commit, and the PR's pin must not change
  the reference's code either: the reference is anchored to the protected branch, so a
  PR that edits it gets "reference code changed in this PR: not in force until merged",
  and a PR that does not keeps the protected reference run formal.

Comparing the paths' blob ids, not a digest of the whole source tree, means a narrowed
``[freeze] exclude`` on the protected branch does not void evidence whose code is
unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from gates.core import git
from gates.core.errors import GitError
from gates.freeze.check import SourceTree
from gates.receipts.model import Receipt

SideName = Literal["reference", "candidate"]


def matches(path: str, pattern: str) -> bool:
    """``path`` is ``pattern`` (a path or a glob) or lies in a folder that it names."""
    pattern = pattern.rstrip("/")
    parts = path.split("/")
    return any(fnmatchcase("/".join(parts[:end]), pattern) for end in range(1, len(parts) + 1))


@dataclass(frozen=True)
class SidePaths:
    """The ``[sides]`` of the policy in force."""

    reference: tuple[str, ...] = ()
    candidate: tuple[str, ...] = ()

    def is_code_of(self, side: SideName | None, path: str) -> bool:
        """A path is a side's code unless it is only the other side's; all paths are the
        code of evidence that has no side."""
        if side is None:
            return True
        own, other = (
            (self.reference, self.candidate)
            if side == "reference"
            else (self.candidate, self.reference)
        )
        return any(matches(path, p) for p in own) or not any(matches(path, p) for p in other)


def _names(paths: Iterable[str], limit: int = 5) -> str:
    ordered = sorted(paths)
    more = len(ordered) - limit
    return ", ".join(ordered[:limit]) + (f" and {more} more" if more > 0 else "")


def run_commit(receipt: Receipt) -> str | None:
    """The commit the receipt's code came from: the sandbox's materialized commit where the
    run records one, else HEAD when the receipt was made (its freeze passed then)."""
    record = receipt.provenance.run
    isolation = getattr(record, "isolation", None) if record is not None else None
    commit = getattr(isolation, "commit", None)
    return commit if isinstance(commit, str) and commit else receipt.provenance.git_head


@dataclass
class CodeJudge:
    """Says why a receipt's code is not the code in force (None when it is)."""

    root: Path
    tree: SourceTree
    sides: SidePaths
    pin: str | None
    frameworks: Mapping[str, SideName]
    policy_commit: str | None = None
    policy_name: str = ""
    pin_source_tree: str | None = None
    _trees: dict[str, dict[str, git.TreeEntry] | None] = field(default_factory=dict)
    _answers: dict[tuple[str | None, SideName | None, str | None], str | None] = field(
        default_factory=dict
    )

    def _entries(self, commit: str) -> dict[str, git.TreeEntry] | None:
        if commit not in self._trees:
            try:
                self._trees[commit] = git.list_tree(self.root, f"{commit}^{{commit}}")
            except GitError:  # not in this clone
                self._trees[commit] = None
        return self._trees[commit]

    def _differing(
        self,
        first: dict[str, git.TreeEntry],
        second: dict[str, git.TreeEntry],
        side: SideName | None,
    ) -> list[str]:
        if first is second:
            return []
        changed = {path for path, entry in first.items() if second.get(path) != entry}
        changed |= second.keys() - first.keys()
        return [
            path
            for path in changed
            if self.tree.contains(path) and self.sides.is_code_of(side, path)
        ]

    def problem(self, receipt: Receipt) -> str | None:
        framework = receipt.framework.value if receipt.framework else None
        side = self.frameworks.get(framework) if framework else None
        key = (run_commit(receipt), side, receipt.provenance.source_tree)
        if key not in self._answers:  # one answer per commit and side: runs share them
            self._answers[key] = self._problem(receipt, side)
        return self._answers[key]

    def _problem(self, receipt: Receipt, side: SideName | None) -> str | None:
        trees = self._trees_of(receipt)
        if isinstance(trees, str):
            return trees
        made, pin = trees
        if side == "reference" and self.policy_commit:
            return self._reference_problem(made, pin, self.policy_commit)
        stale = self._differing(made, pin, side)
        if not stale:
            return None
        whose = f"{side} code" if side else "source tree"
        return (
            f"produced on a source tree that is not the pin's: its {whose} differs in "
            f"{_names(stale)}"
        )

    def _trees_of(
        self, receipt: Receipt
    ) -> tuple[dict[str, git.TreeEntry], dict[str, git.TreeEntry]] | str:
        """The trees the receipt was made at and of the pin, or why there are none."""
        commit = run_commit(receipt)
        if commit is None or receipt.provenance.source_tree is None:
            return "produced on a source tree that is not the pin's (no clean commit recorded)"
        pin = self._entries(self.pin) if self.pin else None
        if pin is None:
            return "produced on a source tree that is not the pin's (no pin resolves)"
        made = self._entries(commit)
        if made is None and receipt.provenance.source_tree == self.pin_source_tree:
            return pin, pin  # made elsewhere, on exactly the pin's whole source tree
        if made is None:
            return (
                f"made at commit {commit[:12]}, which is not in this clone, on a source tree "
                "that is not the pin's (fetch that commit to compare its sides' code)"
            )
        return made, pin

    def _reference_problem(
        self, made: dict[str, git.TreeEntry], pin: dict[str, git.TreeEntry], protected_at: str
    ) -> str | None:
        protected = self._entries(protected_at)
        if protected is None:
            return f"policy ref {self.policy_name} is not in this clone"
        changed = self._differing(pin, protected, "reference")
        if changed:
            return (
                "reference code changed in this PR: not in force until merged "
                f"({_names(changed)} differ from {self.policy_name})"
            )
        stale = self._differing(made, protected, "reference")
        if stale:
            return (
                f"its run's reference code is not the policy ref's ({_names(stale)} differ "
                f"from {self.policy_name} at {protected_at[:12]}); run the reference on the "
                "protected branch's code"
            )
        return None
