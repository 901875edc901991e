"""The documented import path of the run recorder (docs/paddle.md); it lives in gates.training."""

from gates.core.run_protocol import FRAMEWORK, GIT_HEAD, MODEL_CONFIG, RUN_DIR, RUN_ID, rank_folder
from gates.training.recorder import (
    FRAMEWORKS,
    GatesCallback,
    RecorderError,
    RunRecorder,
    aggregate_ranks,
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
