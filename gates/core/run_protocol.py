"""The run protocol between `gates run`, its sandbox and the recorder in the training
process: the variables' names, the rank folder, and the one reader of them.

Code users import into their training scripts (the recorders, the env capture, the step
commitments) reads its environment here and nowhere else (tests/test_edge.py): `protocol()`
for what `gates run` sets, `launch_variables()` for the launcher's rank and determinism
variables the env capture records. gates' own commands never read it: they take an
`Invocation`. At the bottom, so the sandbox and the tensor recorder need not import the
trainer API above them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

RUN_DIR = "GATES_RUN_DIR"
RUN_ID = "GATES_RUN_ID"
GIT_HEAD = "GATES_GIT_HEAD"
FRAMEWORK = "GATES_FRAMEWORK"  # set by `gates run --framework` (and the sandbox's launch)
MODEL_CONFIG = "GATES_MODEL_CONFIG"  # set by `gates run --model-config`
#: How often the full state is saved, set by `gates run` from the policy (0: only the last).
SAVE_EVERY = "GATES_STATE_EVERY"
#: The key a recorder used alone (no `gates run`) signs its own receipts with.
SIGNING_KEY = "GATES_SIGNING_KEY"

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


@dataclass(frozen=True)
class RunProtocol:
    """What `gates run` told this training process (each None when not set: a script run
    alone). ``signing_key`` is read only for a recorder used alone, which receipts its own
    files; under `gates run` (a run id) gates signs and the sandbox never passes a key."""

    run_dir: str | None = None
    run_id: str | None = None
    git_head: str | None = None
    framework: str | None = None
    model_config: str | None = None
    save_every: str | None = None
    signing_key: Path | None = None

    @property
    def under_gates_run(self) -> bool:
        return self.run_id is not None


def protocol() -> RunProtocol:
    """The run protocol of this process's environment, read now."""
    key = os.environ.get(SIGNING_KEY, "")
    return RunProtocol(
        run_dir=os.environ.get(RUN_DIR),
        run_id=os.environ.get(RUN_ID),
        git_head=os.environ.get(GIT_HEAD),
        framework=os.environ.get(FRAMEWORK) or None,
        model_config=os.environ.get(MODEL_CONFIG) or None,
        save_every=os.environ.get(SAVE_EVERY),
        signing_key=Path(key).expanduser() if key else None,
    )


def launch_variables(names: Iterable[str]) -> dict[str, str]:
    """This process's values of ``names`` (the launcher's rank and determinism variables),
    for the environment capture; unset ones are left out."""
    return {name: os.environ[name] for name in names if name in os.environ}


def rank_folder(folder: Path) -> Path:
    """`rank-<id>/` in a multi-rank paddle.distributed job, the folder itself otherwise."""
    world = os.environ.get("PADDLE_TRAINERS_NUM", "1")
    rank = os.environ.get("PADDLE_TRAINER_ID")
    if world.isdigit() and int(world) > 1 and rank is not None:
        return folder / f"rank-{rank}"
    return folder
