"""examples/glm52-minimal: regenerating it reproduces its committed artifacts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, run_script
from tests.kernels import assert_close_files, kernels_as_recorded

EXAMPLE = REPO_ROOT / "examples" / "glm52-minimal"
DETERMINISTIC = [
    "results/torch/checkpoint/model.safetensors",
    "results/paddle/loss.json",
    "results/paddle/raw_loss.jsonl",
    "results/paddle/checkpoint/model.safetensors",
    "results/paddle/manifest.json",
    "results/torch/manifest.json",
    "experiments/e055-acceptance-oracle-20260819/manifest.json",
    *(
        f"experiments/e053-moe-determinism/runs/paddle_det/repeat-{i}/raw_loss.jsonl"
        for i in (1, 2, 3)
    ),
    *(
        f"{run}/tensors/step-{step:06d}/{name}"
        for run in (
            "results/paddle",
            *(f"experiments/e053-moe-determinism/runs/paddle_det/repeat-{i}" for i in (1, 2, 3)),
        )
        for step in (1, 2, 3)
        for name in (
            "activation.safetensors",
            "grad.safetensors",
            "optimizer.safetensors",
            "param.safetensors",
            "order.json",
        )
    ),
]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("regenerated")
    done = run_script(
        str(EXAMPLE / "generate.py"), "--out", str(out), "--torch-python", sys.executable
    )
    assert done.code == 0, done.err
    return out


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("relpath", DETERMINISTIC)
def test_regeneration_reproduces_the_committed_bytes(regenerated: Path, relpath: str) -> None:
    """Bit for bit on the kernels the example was recorded with; elsewhere the same numbers
    but for their last bits (tests/kernels.py)."""
    if kernels_as_recorded():
        assert (regenerated / relpath).read_bytes() == (EXAMPLE / relpath).read_bytes()
    else:
        assert_close_files(regenerated / relpath, EXAMPLE / relpath)


@pytest.mark.slow
@pytest.mark.heavy
def test_the_regenerated_repeats_are_bit_identical_on_this_machine(regenerated: Path) -> None:
    """The determinism experiment's three repeats, regenerated here, agree bit for bit with
    each other whatever kernels this CPU has."""
    runs = regenerated / "experiments/e053-moe-determinism/runs/paddle_det"
    first_run = runs / "repeat-1"
    # the losses and the tensor dumps (the states also hold Python's and NumPy's unseeded
    # global generators, which differ run to run and which the example never draws from)
    dumps = sorted(p.relative_to(first_run) for p in (first_run / "tensors").rglob("*.*"))
    compared = [Path("raw_loss.jsonl"), *dumps]
    assert sum(f.suffix == ".safetensors" for f in compared) == 12
    for relpath in compared:
        first = (runs / "repeat-1" / relpath).read_bytes()
        for repeat in (2, 3):
            assert (runs / f"repeat-{repeat}" / relpath).read_bytes() == first, relpath


def test_the_recorded_runs_tell_the_seed_story() -> None:
    torch = json.loads((EXAMPLE / "results/torch/loss.json").read_text())["losses"]
    paddle = json.loads((EXAMPLE / "results/paddle/loss.json").read_text())["losses"]
    assert len(torch) == len(paddle) == 100
    first_difference = next(i for i, (a, b) in enumerate(zip(torch, paddle, strict=True)) if a != b)
    assert first_difference == 4  # bit-identical for steps 1-4, diverging at step 5
    env = json.loads((EXAMPLE / "results/torch/env.json").read_text())
    assert env["framework"] == "torch" and env["framework_version"].startswith("2.")
