"""The small vocabularies of receipts, importable without pydantic (the CLI's choices)."""

from __future__ import annotations

from enum import StrEnum


class ArtifactKind(StrEnum):
    MANIFEST = "manifest"
    ENV = "env"
    LOSS = "loss"
    RAW_LOSS = "raw_loss"
    CHECKPOINT = "checkpoint"
    LOSS_CHECK = "loss_check"
    CHECKPOINT_CHECK = "checkpoint_check"
    STRUCTURE_PARITY = "structure_parity"
    TENSOR_DUMP = "tensor_dump"
    TENSOR_CHECK = "tensor_check"


class Framework(StrEnum):
    TORCH = "torch"
    PADDLE = "paddle"


class EvidenceClass(StrEnum):
    FORMAL = "formal"
    PROBE = "probe"
