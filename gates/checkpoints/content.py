"""Content equality through the naming layer.

For each candidate tensor the rules explain, the expected content is computed
from the reference: a pure rename reuses the reference tensor's content
digest (no second read); a transpose, fusion, split or cast is materialized
with numpy, in the candidate's layout and dtype, and hashed like a stored
tensor. So pure naming and layout never break `hash_match`; a changed value
does. Tensors declared candidate-only and reference tensors explained as absent are outside
the comparison, never counted equal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from gates.checkpoints.digest import checkpoint_digest, content_digest_of_bytes
from gates.checkpoints.layout import Checkpoint
from gates.checkpoints.survey import Survey
from gates.naming.interpret import Arrays
from gates.naming.rule_kinds import RuleError
from gates.naming.rules import Node
from gates.safetensors.dtypes import DtypeError, cast, raw_dtype


class Materializer(Arrays):
    """Builds a node's expected tensor from the reference checkpoint's bytes, in the
    candidate's layout and dtype."""

    def __init__(self, reference: Checkpoint) -> None:
        self.reference = reference

    def leaf(self, node: Node) -> np.ndarray:
        located = self.reference.tensors[node.name]
        header = self.reference.shards[located.shard]
        fd = os.open(self.reference.folder / located.shard, os.O_RDONLY)
        try:
            data = os.pread(fd, located.entry.nbytes, header.data_start + located.entry.start)
        finally:
            os.close(fd)
        return np.frombuffer(data, raw_dtype(node.dtype, "transform")).reshape(node.shape)

    def cast(self, node: Node, value: np.ndarray) -> np.ndarray:
        return cast(value, node.children[0].dtype, node.dtype)


def expected_content(node: Node, reference_contents: dict[str, str], builder: Materializer) -> str:
    if node.ops() <= {"rename"}:
        return reference_contents[node.leaves()[0].name]
    data = np.ascontiguousarray(builder.run(node)).tobytes()
    return content_digest_of_bytes(node.dtype, node.shape, data)


@dataclass(frozen=True)
class ContentComparison:
    mapped_reference_digest: str
    candidate_digest: str
    unequal: tuple[str, ...]
    problems: tuple[str, ...]
    hash_match: bool


def compare_content(
    survey: Survey,
    reference: Checkpoint,
    reference_contents: dict[str, str],
    candidate_contents: dict[str, str],
) -> ContentComparison:
    """hash_match: no structural difference and every mapped tensor's content equal; every
    candidate tensor is a mapped one or declared candidate-only (a reference tensor the
    contract's evidence explains as absent has no content to compare)."""
    builder = Materializer(reference)
    expected: dict[str, str] = {}
    problems = list(survey.rule_problems)
    for name, node in sorted(survey.matched.items()):
        try:
            expected[name] = expected_content(node, reference_contents, builder)
        except (RuleError, DtypeError) as exc:
            problems.append(f"{name}: {exc}")
    unequal = tuple(n for n, digest in expected.items() if candidate_contents.get(n) != digest)
    matched_digests = {n: candidate_contents[n] for n in expected if n in candidate_contents}
    declared = sum(d.klass == "candidate_only" for d in survey.differences)
    return ContentComparison(
        mapped_reference_digest=checkpoint_digest(expected),
        candidate_digest=checkpoint_digest(candidate_contents),
        unequal=unequal,
        problems=tuple(problems),
        hash_match=not unequal
        and not problems
        and not survey.structural
        and len(matched_digests) + declared == len(candidate_contents),
    )
