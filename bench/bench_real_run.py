"""What `gates run` costs on the real port: each side of examples/glm5-real (transformers'
GlmMoeDsaForCausalLM, PaddleFormers' DeepseekV3ForCausalLM; 20 SGD steps, dumps of steps
1-2, step commitments, checkpoints) run bare (the entrypoint with the run protocol's
variables, outside gates) against the same run under `gates run` in the sandbox, signed.

The two alternate; medians of --repeats runs. Target (issue 35): gated <= 1.2 x bare.

Usage: python bench/bench_real_run.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gates.commands.demo import _trust_demo_key, lay_out
from gates.commands.freeze import pin
from gates.core.resources import real_example_dir
from gates.workspace.repository import open_workspace

REPO = Path(__file__).resolve().parent.parent
PROFILE = [
    "name=minimum_complete",
    "mode=optimizer",
    "device=cpu",
    "dtype=float32",
    "tp=1",
    "pp=1",
    "ep=1",
    "etp=1",
    "sp=false",
    "world=1",
]


def _bare(root: Path, side: str, out: Path) -> float:
    env = {
        **os.environ,
        "GATES_RUN_DIR": str(out),
        "GATES_RUN_ID": "bare",
        "GATES_FRAMEWORK": side,
        "PYTHONPATH": str(REPO),
    }
    started = time.monotonic()
    subprocess.run(
        [sys.executable, f"model/train_{side}.py"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )
    elapsed = time.monotonic() - started
    for pattern in ("flex-ckpt*", "*.lock"):  # what the conversion left, outside a sandbox
        for leftover in (root / "model/official").glob(pattern):
            leftover.unlink()
    return elapsed


def _gated(root: Path, side: str, trust: dict[str, str]) -> float:
    gates = str(Path(sys.executable).parent / "gates")
    profile = [arg for pair in PROFILE for arg in ("--profile", pair)]
    command = [gates, "-C", str(root), "run", "--framework", side, "--clean", *profile, "--"]
    started = time.monotonic()
    subprocess.run(
        [*command, sys.executable, f"model/train_{side}.py"],
        env={**os.environ, **trust},
        check=True,
        capture_output=True,
    )
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-real-") as scratch:
        folder = Path(scratch)
        root = folder / "glm5-port"
        lay_out(root, example=real_example_dir())
        pin(open_workspace(root), "HEAD", echo=lambda _: None)
        trust = _trust_demo_key(folder)
        for side in ("paddle", "torch"):
            bare, gated = [], []
            for repeat in range(args.repeats):
                bare.append(_bare(root, side, folder / f"bare-{side}-{repeat}"))
                gated.append(_gated(root, side, trust))
            ratio = statistics.median(gated) / statistics.median(bare)
            print(
                f"{side}: bare {statistics.median(bare):.1f} s, gates run "
                f"{statistics.median(gated):.1f} s: {ratio:.2f}x (target 1.20x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
