"""Content equality through the naming layer.

For each candidate tensor the rules explain, the expected content is computed
from the reference: a pure rename reuses the reference tensor's content
digest (no second read); a transpose, fusion, split or cast is materialized
with numpy, in the candidate's layout and dtype, and hashed like a stored
tensor. So pure naming and layout never break `hash_match`; a changed value
does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from gates.checkpoints.digest import checkpoint_digest, content_digest_of_bytes
from gates.checkpoints.layout import Checkpoint
from gates.checkpoints.survey import Survey
from gates.naming.rule_kinds import RuleError
from gates.naming.rules import Node
from gates.safetensors.header import DTYPE_BITS

_RAW = {8: "<u1", 16: "<u2", 32: "<u4", 64: "<u8"}


def _raw_dtype(dtype: str) -> np.dtype[np.unsignedinteger]:
    bits = DTYPE_BITS[dtype]
    if bits not in _RAW:
        raise RuleError(f"cannot transform {dtype} tensors (sub-byte elements)")
    raw: np.dtype[np.unsignedinteger] = np.dtype(_RAW[bits])
    return raw


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return raw.astype("<u4") << 16


def _f32_to_bf16(raw: np.ndarray) -> np.ndarray:
    # Round to nearest, ties to even, as frameworks cast float32 to bfloat16.
    bits = raw.astype("<u8")
    rounded: np.ndarray = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return rounded


def _via_float(raw: np.ndarray, source: str, target: str) -> np.ndarray:
    floats = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}
    values = raw.view(floats[source]).astype(floats[target])
    return values.view(_RAW[DTYPE_BITS[target]])


def cast(raw: np.ndarray, source: str, target: str) -> np.ndarray:
    """Convert raw little-endian elements between float dtypes."""
    if source == "BF16":
        return cast(_bf16_to_f32(raw), "F32", target) if target != "F32" else _bf16_to_f32(raw)
    if target == "BF16":
        return _f32_to_bf16(raw if source == "F32" else cast(raw, source, "F32"))
    if {source, target} <= {"F16", "F32", "F64"}:
        return _via_float(raw, source, target)
    raise RuleError(f"cannot compare through a cast from {source} to {target}")


class Materializer:
    """Builds a node's expected tensor from the reference checkpoint's bytes."""

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
        return np.frombuffer(data, _raw_dtype(node.dtype)).reshape(node.shape)

    def build(self, node: Node) -> np.ndarray:
        if node.op == "leaf":
            return self.leaf(node)
        children = [self.build(child) for child in node.children]
        if node.op == "rename":
            return children[0]
        if node.op == "transpose":
            return np.ascontiguousarray(children[0].T)
        if node.op == "fuse":
            return np.concatenate(children, axis=node.axis)
        if node.op == "split":
            index = [slice(None)] * children[0].ndim
            index[node.axis] = slice(node.offset, node.offset + node.shape[node.axis])
            return np.ascontiguousarray(children[0][tuple(index)])
        return cast(children[0], node.children[0].dtype, node.dtype)


def expected_content(node: Node, reference_contents: dict[str, str], builder: Materializer) -> str:
    if node.ops() <= {"rename"}:
        return reference_contents[node.leaves()[0].name]
    data = np.ascontiguousarray(builder.build(node)).tobytes()
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
    """hash_match: no structural difference and every mapped tensor's content equal."""
    builder = Materializer(reference)
    expected: dict[str, str] = {}
    problems = list(survey.rule_problems)
    for name, node in sorted(survey.matched.items()):
        try:
            expected[name] = expected_content(node, reference_contents, builder)
        except RuleError as exc:
            problems.append(f"{name}: {exc}")
    unequal = tuple(n for n, digest in expected.items() if candidate_contents.get(n) != digest)
    matched_digests = {n: candidate_contents[n] for n in expected if n in candidate_contents}
    return ContentComparison(
        mapped_reference_digest=checkpoint_digest(expected),
        candidate_digest=checkpoint_digest(candidate_contents),
        unequal=unequal,
        problems=tuple(problems),
        hash_match=not unequal
        and not problems
        and not survey.structural
        and len(matched_digests) == len(candidate_contents),
    )
