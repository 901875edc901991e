"""The documented import path of the run recorder (docs/paddle.md); it lives in gates.training."""

from gates.training.recorder import (
    FRAMEWORK,
    FRAMEWORKS,
    GIT_HEAD,
    MODEL_CONFIG,
    RUN_DIR,
    RUN_ID,
    GatesCallback,
    RecorderError,
    RunRecorder,
    aggregate_ranks,
    rank_folder,
)

__all__ = [
    "FRAMEWORK",
    "FRAMEWORKS",
    "GIT_HEAD",
    "MODEL_CONFIG",
    "RUN_DIR",
    "RUN_ID",
    "GatesCallback",
    "RecorderError",
    "RunRecorder",
    "aggregate_ranks",
    "rank_folder",
]
