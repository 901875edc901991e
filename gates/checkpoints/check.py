"""The checkpoint checker's API: validity, hygiene, tensor count, digest; and pairs.

Used by `gates check checkpoint`, `gates inventory diff` and the
tensor-inventory contract, so all three see the same checkpoint the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gates.checkpoints.digest import checkpoint_digest, default_threads, hash_shards
from gates.checkpoints.hygiene import Finding, hygiene
from gates.checkpoints.incomplete import changed_while_checked, incomplete_findings, stat_keys
from gates.checkpoints.layout import Checkpoint, load_checkpoint_and_index
from gates.checkpoints.survey import Survey, survey
from gates.core.hashing import StatCache
from gates.core.progress import QUIET, Progress
from gates.naming.rules import RuleSet

if TYPE_CHECKING:
    from gates.checkpoints.content import ContentComparison


@dataclass(frozen=True)
class ShardRange:
    """Slice `index` of `count`: every shard whose position p (sorted) has p % count == index."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> ShardRange:
        left, sep, right = text.partition("/")
        if not sep or not left.isdigit() or not right.isdigit():
            raise ValueError(f"{text!r} is not i/n (e.g. 0/4)")
        index, count = int(left), int(right)
        if count < 1 or not 0 <= index < count:
            raise ValueError(f"{text!r}: need 0 <= i < n")
        return cls(index, count)

    def select(self, shards: list[str]) -> list[str]:
        return [
            s for position, s in enumerate(sorted(shards)) if position % self.count == self.index
        ]


@dataclass(frozen=True)
class CheckpointReport:
    path: str
    checkpoint: Checkpoint
    hygiene: tuple[Finding, ...]
    contents: dict[str, str]
    shards_hashed: tuple[str, ...]
    incomplete: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return self.checkpoint.valid

    @property
    def digest(self) -> str | None:
        return checkpoint_digest(self.contents) if self.valid else None

    def figures(self) -> dict[str, object]:
        return {
            "path": self.path,
            "valid": self.valid,
            "problems": list(self.checkpoint.problems),
            "hygiene": [f.line() for f in self.hygiene],
            "hygiene_clean": not self.hygiene,
            "tensor_count": len(self.checkpoint.shard_of),
            "shard_count": len(self.checkpoint.shards),
            "digest": self.digest,
        }


def inspect_checkpoint(folder: Path) -> tuple[Checkpoint, tuple[Finding, ...], tuple[str, ...]]:
    """Headers, hygiene and signs of an unfinished write; an unfinished checkpoint is invalid."""
    checkpoint, index = load_checkpoint_and_index(folder)
    findings = tuple(hygiene(folder, index))
    incomplete = tuple(incomplete_findings(folder, checkpoint.index_present, checkpoint.shards))
    checkpoint.problems.extend(f"incomplete: {finding}" for finding in incomplete)
    return checkpoint, findings, incomplete


def check_checkpoint(
    root: Path,
    relpath: str,
    *,
    cache: StatCache,
    threads: int | None = None,
    shard_range: ShardRange | None = None,
    hash_contents: bool = True,
    label: str | None = None,
    progress: Progress = QUIET,
) -> CheckpointReport:
    """Read headers, check hygiene, and hash the (selected) shards of one checkpoint.

    ``label`` names the checkpoint in reports and the cache (``external:<root>/...`` for a
    checkpoint below an external root, whose ``root`` is then that root).
    """
    folder = root / relpath if relpath else root
    name = label if label is not None else relpath
    checkpoint, findings, incomplete = inspect_checkpoint(folder)
    shards = sorted(checkpoint.shards)
    selected = shard_range.select(shards) if shard_range else shards
    contents: dict[str, str] = {}
    if hash_contents and checkpoint.valid:
        before = stat_keys(folder, selected)
        contents = hash_shards(
            checkpoint,
            selected,
            cache=cache,
            cache_prefix=name,
            threads=threads or default_threads(),
            progress=progress,
        )
        changed = changed_while_checked(before, stat_keys(folder, selected))
        if changed:
            checkpoint.problems.extend(f"incomplete: {finding}" for finding in changed)
            incomplete += tuple(changed)
    return CheckpointReport(name, checkpoint, findings, contents, tuple(selected), incomplete)


@dataclass(frozen=True)
class PairReport:
    reference: CheckpointReport
    candidate: CheckpointReport
    survey: Survey
    content: ContentComparison | None

    def figures(self) -> dict[str, object]:
        content = self.content
        return {
            "structural_differences": len(self.survey.structural),
            "hash_match": content.hash_match if content else None,
            "mapped_reference_digest": content.mapped_reference_digest if content else None,
            "unequal_tensors": list(content.unequal) if content else [],
            "mapping_problems": list(content.problems)
            if content
            else list(self.survey.rule_problems),
            "declared": [
                f"{(d.reference or d.candidate)[0]}: {d.detail}"
                for d in self.survey.differences
                if d.klass in ("candidate_only", "expected_absent")
            ],
        }


def compare_pair(
    reference: CheckpointReport,
    candidate: CheckpointReport,
    ruleset: RuleSet,
    *,
    absent: Mapping[str, str] | None = None,
    saved_layout: bool = False,
) -> PairReport:
    """Survey the two inventories through the rules; compare content when both were hashed.
    ``absent`` and ``saved_layout``: the survey's (the contract's declarations)."""
    labels = (reference.path, candidate.path)
    found = survey(
        reference.checkpoint,
        candidate.checkpoint,
        ruleset,
        labels,
        absent=absent,
        saved_layout=saved_layout,
    )
    content = None
    if reference.valid and candidate.valid and reference.contents and candidate.contents:
        from gates.checkpoints.content import compare_content  # noqa: PLC0415  (numpy: only here)

        content = compare_content(
            found, reference.checkpoint, reference.contents, candidate.contents
        )
    return PairReport(reference, candidate, found, content)
