"""Loss curves from a real small computation: a two-layer MLP trained by SGD in numpy.

`train_losses` runs float32 forward/backward passes and records float(loss),
an unrounded float64 value, per step. The same seed gives bit-identical
curves; `diverge_at` switches the loss reduction to another summation order
from that step on, the kind of kernel change that breaks bit-exactness while
staying within a few ULPs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def train_losses(steps: int, *, seed: int = 0, diverge_at: int | None = None) -> list[float]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x @ rng.standard_normal((8, 1)).astype(np.float32)) ** 2
    w1 = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((16, 1)) * 0.3).astype(np.float32)
    losses = []
    for step in range(1, steps + 1):
        hidden = np.maximum(x @ w1, np.float32(0))
        error = hidden @ w2 - y
        squared = error * error
        if diverge_at is not None and step >= diverge_at:
            loss = np.float32(0)
            for value in squared[::-1, 0]:  # sequential, reversed: another summation order
                loss += value
            loss /= np.float32(len(squared))
        else:
            loss = squared.mean(dtype=np.float32)
        losses.append(float(loss))
        grad_out = (np.float32(2) / np.float32(len(x))) * error
        grad_w2 = hidden.T @ grad_out
        grad_hidden = (grad_out @ w2.T) * (hidden > 0)
        grad_w1 = x.T @ grad_hidden
        w1 -= np.float32(0.01) * grad_w1
        w2 -= np.float32(0.01) * grad_w2
    return losses


def write_loss_json(path: Path, losses: list[float]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"losses": losses}) + "\n")
    return path


def write_raw_loss(path: Path, losses: list[float]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": step, "loss": loss}) for step, loss in enumerate(losses, 1)]
    path.write_text("\n".join(lines) + "\n")
    return path
