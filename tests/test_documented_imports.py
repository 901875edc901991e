"""What users import in their training scripts keeps working at the paths the docs give
(docs/paddle.md, docs/tensors.md, docs/replay.md), wherever the modules live now."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gates.commands.checkpoint import verify_saved_checkpoint
from gates.env import capture
from gates.recorder import GatesCallback, RunRecorder, aggregate_ranks
from gates.tensors.recorder import TensorRecorder
from gates.training import env, recorder
from tests.helpers import REPO_ROOT

DOCUMENTED = (
    "from gates.recorder import RunRecorder, GatesCallback, aggregate_ranks",
    "from gates.tensors.recorder import TensorRecorder",
    "from gates.env import capture",
    "from gates.commands.checkpoint import verify_saved_checkpoint",
    "from gates.replay.capture import capture_paddle, capture_torch",
)


@pytest.mark.slow
def test_each_documented_import_path_works_in_a_fresh_interpreter() -> None:
    for line in DOCUMENTED:
        names = line.split(" import ")[1].split(", ")
        check = f"{line}; assert all(callable(x) for x in ({', '.join(names)},))"
        done = subprocess.run(
            [sys.executable, "-c", check],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{line}: {done.stderr}"


def test_the_documented_paths_are_the_modules_that_do_the_work() -> None:
    assert RunRecorder is recorder.RunRecorder
    assert GatesCallback is recorder.GatesCallback
    assert aggregate_ranks is recorder.aggregate_ranks
    assert capture is env.capture
    assert TensorRecorder.__module__ == "gates.tensors.recorder"
    assert verify_saved_checkpoint.__module__ == "gates.commands.checkpoint"


def test_the_docs_still_name_those_paths() -> None:
    paddle = (REPO_ROOT / "docs" / "paddle.md").read_text(encoding="utf-8")
    tensors = (REPO_ROOT / "docs" / "tensors.md").read_text(encoding="utf-8")
    assert "from gates.recorder import RunRecorder" in paddle
    assert "gates.commands.checkpoint.verify_saved_checkpoint" in paddle
    assert "gates.env.capture" in paddle
    assert "from gates.tensors.recorder import TensorRecorder" in tensors
    replay = (REPO_ROOT / "docs" / "replay.md").read_text(encoding="utf-8")
    assert "from gates.replay.capture import capture_paddle" in replay
