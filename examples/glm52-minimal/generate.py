#!/usr/bin/env python3
"""Regenerate the artifacts of the glm52-minimal example from real runs.

    python examples/glm52-minimal/generate.py [--out DIR] [--torch-python PYTHON]

Writes, under DIR (default: this folder):
  results/torch/checkpoint/     the official minimal checkpoint (HF naming), from numpy
  results/paddle/               the Paddle run: raw_loss.jsonl, loss.json, env.json, checkpoint/,
                                tensors/ (the dump of steps 1-3)
  experiments/e053-moe-determinism/runs/paddle_det/repeat-{1,2,3}/   three Paddle repeats
                                (raw_loss.jsonl and tensors/)
  results/torch/                the PyTorch run (losses, env.json, tensors/), when a Python
                                with torch is at hand
                                (--torch-python, or this one); otherwise the recorded
                                files stay as they are
  results/*/manifest.json and experiments/e055-.../manifest.json: manifests as the
                                PR's old bench tooling wrote them, without a `format` key

The Paddle side is deterministic on the CPU (one thread): regenerating gives the
same bytes for its losses, checkpoint and tensor dumps, which a test checks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE / "model"))

from official import official_weights  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

PROFILE = {
    "name": "minimum_complete",
    "mode": "optimizer",
    "device": "cpu",
    "dtype": "float32",
    "tp": 1,
    "pp": 1,
    "ep": 1,
    "etp": 1,
    "sp": False,
    "world": 1,
}


def run_script(python: str, script: str, folder: Path) -> None:
    env = {
        **os.environ,
        "GATES_RUN_DIR": str(folder),
        "GATES_RUN_ID": "generate",  # receipts come later, from gates in a real workspace
        "GATES_FRAMEWORK": "torch" if "torch" in script else "paddle",  # as `gates run` passes it
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    if folder.exists():
        shutil.rmtree(folder)
    subprocess.run([python, str(HERE / "model" / script)], env=env, check=True)


def old_manifest(framework: str, run_id: str) -> dict[str, object]:
    """What the PR's bench tooling wrote: everything but the `format` key."""
    return {
        "run_id": run_id,
        "entrypoint": f"{framework}_train.py",
        "framework": framework,
        "profile": PROFILE,
    }


def has_torch(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True, check=False)
    return probe.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--torch-python", default=sys.executable)
    args = parser.parse_args()
    out = args.out.resolve()
    reference = out / "results/torch/checkpoint"
    reference.mkdir(parents=True, exist_ok=True)
    save_file(official_weights(), str(reference / "model.safetensors"), metadata={"format": "pt"})
    run_script(sys.executable, "train_paddle.py", out / "results/paddle")
    for repeat in (1, 2, 3):
        folder = out / f"experiments/e053-moe-determinism/runs/paddle_det/repeat-{repeat}"
        run_script(sys.executable, "train_paddle.py", folder)
        shutil.rmtree(folder / "checkpoint")
        for name in ("loss.json", "env.json"):
            (folder / name).unlink()
    if has_torch(args.torch_python):
        checkpoint = reference.parent / "checkpoint"
        keep = checkpoint.rename(out / "checkpoint.keep")
        run_script(args.torch_python, "train_torch.py", out / "results/torch")
        keep.rename(checkpoint)
    else:
        print("torch not available: the recorded reference run is kept", file=sys.stderr)
    for side in ("torch", "paddle"):
        manifest = out / f"results/{side}/manifest.json"
        manifest.write_text(json.dumps(old_manifest(side, f"{side}-100"), indent=2) + "\n")
    e055 = out / "experiments/e055-acceptance-oracle-20260819/manifest.json"
    e055.parent.mkdir(parents=True, exist_ok=True)
    e055.write_text(json.dumps(old_manifest("paddle", "e055-checker"), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
