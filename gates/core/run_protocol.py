"""The environment variables between `gates run`, its sandbox and the recorder in the child:
names and the rank folder, at the bottom: the sandbox and the tensor recorder need not
import the trainer API above them."""

from __future__ import annotations

import os
from pathlib import Path

RUN_DIR = "GATES_RUN_DIR"
RUN_ID = "GATES_RUN_ID"
GIT_HEAD = "GATES_GIT_HEAD"
FRAMEWORK = "GATES_FRAMEWORK"  # set by `gates run --framework` (and the sandbox's launch)
MODEL_CONFIG = "GATES_MODEL_CONFIG"  # set by `gates run --model-config`
#: How often the full state is saved, set by `gates run` from the policy (0: only the last).
SAVE_EVERY = "GATES_STATE_EVERY"

RANK_VARIABLES = (
    "PADDLE_TRAINER_ID",
    "PADDLE_TRAINERS_NUM",
    "PADDLE_CURRENT_ENDPOINT",
    "PADDLE_TRAINER_ENDPOINTS",
    "PADDLE_RANK_IN_NODE",
    "PADDLE_LOCAL_SIZE",
    "FLAGS_selected_gpus",
    "CUDA_VISIBLE_DEVICES",
)


def rank_folder(folder: Path) -> Path:
    """`rank-<id>/` in a multi-rank paddle.distributed job, the folder itself otherwise."""
    world = os.environ.get("PADDLE_TRAINERS_NUM", "1")
    rank = os.environ.get("PADDLE_TRAINER_ID")
    if world.isdigit() and int(world) > 1 and rank is not None:
        return folder / f"rank-{rank}"
    return folder
