#!/usr/bin/env python3
"""Regenerate the artifacts of the glm5-real example from real runs.

    python examples/glm5-real/generate.py [--out DIR] [--torch-python PYTHON] [--weights]

Writes, under DIR (default: this folder):
  model/official/   the official weights (--weights only): transformers' save_pretrained of a
                    GlmMoeDsaForCausalLM built from model/config.json with torch.manual_seed(0)
  results/paddle/   the candidate's run (PaddleFormers), with --paddle only: `gates demo` runs
                    the candidate itself under `gates run`, so the example ships none
  results/torch/    the reference's run (transformers), with a Python that has torch and
                    transformers (--torch-python, or this one); otherwise the recorded run stays.
                    After regenerating it, run sign_recorded.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OFFICIAL = "model/official"
# what PaddleFormers' HF conversion leaves beside the weights it reads (outside a sandbox)
CONVERSION_LEFTOVERS = ("flex-ckpt.auto_generated.metadata", "*.lock")

WEIGHTS = """
import json, sys, torch
from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM
torch.manual_seed(0)
config = GlmMoeDsaConfig.from_dict(json.load(open(sys.argv[1])))
GlmMoeDsaForCausalLM(config).save_pretrained(sys.argv[2])
"""


def run_side(python: str, side: str, out: Path) -> None:
    folder = out / "results" / side
    if folder.exists():
        shutil.rmtree(folder)
    env = {
        **os.environ,
        "GATES_RUN_DIR": str(folder),
        "GATES_RUN_ID": "generate",  # receipts come later, from gates in a real workspace
        "GATES_FRAMEWORK": side,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    subprocess.run([python, str(out / "model" / f"train_{side}.py")], env=env, check=True)
    for pattern in CONVERSION_LEFTOVERS:
        for leftover in (out / OFFICIAL).glob(pattern):
            leftover.unlink()


def can_run_torch(python: str) -> bool:
    probe = subprocess.run(
        [python, "-c", "import torch, transformers"], capture_output=True, check=False
    )
    return probe.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--weights", action="store_true", help="rebuild model/official too")
    parser.add_argument("--paddle", action="store_true", help="run the candidate too")
    args = parser.parse_args()
    out = args.out.resolve()
    if out != HERE:
        shutil.copytree(HERE / "model", out / "model", dirs_exist_ok=True)
    if args.weights:
        shutil.rmtree(out / OFFICIAL, ignore_errors=True)
        config = str(out / "model/config.json")
        subprocess.run([args.torch_python, "-c", WEIGHTS, config, str(out / OFFICIAL)], check=True)
    if args.paddle:
        run_side(sys.executable, "paddle", out)
    if can_run_torch(args.torch_python):
        run_side(args.torch_python, "torch", out)
    else:
        print("torch not available: the recorded reference run is kept", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
