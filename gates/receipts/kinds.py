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
    CONFIG_CHECK = "config_check"
    RUN = "run"  # the run attestation `gates run` signs: argv, times, exit status, outputs
    COMMITMENTS = "commitments"  # per step: loss bits and the training state's digest
    TRAINING_STATE = "training_state"  # the saved full states a replay resumes from
    REPLAY = "replay"  # a verifier's replay of sampled windows (gates replay)


#: What a training entrypoint writes: formal only through a signed run of its side's entrypoint.
RUN_OUTPUT_KINDS = frozenset(
    {
        ArtifactKind.MANIFEST,
        ArtifactKind.ENV,
        ArtifactKind.LOSS,
        ArtifactKind.RAW_LOSS,
        ArtifactKind.CHECKPOINT,
        ArtifactKind.TENSOR_DUMP,
        ArtifactKind.COMMITMENTS,
        ArtifactKind.TRAINING_STATE,
    }
)


#: The trust-file role (beside the frameworks) of a signer whose replays count.
REPLAY_ROLE = "replay"


class Framework(StrEnum):
    TORCH = "torch"
    PADDLE = "paddle"


class EvidenceClass(StrEnum):
    FORMAL = "formal"
    PROBE = "probe"
