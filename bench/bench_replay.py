"""Benchmark step commitments and replay on the example's models (CPU), as ratios.

In this process (medians of --repeats, CPU seconds of this process):
  * the reference: one training step of examples/glm52-minimal (forward, backward,
    optimizer step), on each side (Paddle, and torch where it is installed), and the
    same step's commitment, split in two: reading the state out to host arrays
    (parameters, optimizer, every RNG, data position, schedule) and digesting it; beside
    them the floor, one sha256 over the state's bytes (the time of hashing the state);
    target: the commitment adds at most 3% to a step, or at most the hashing floor;
  * saving the full state (one safetensors file), paid every K-th step only;
  * restoring a saved state (load, digest check, set into the model).
In subprocesses (one each, the interpreter and Paddle import included):
  * the full run (100 steps, K = --save-every) against `gates replay`-style windows:
    --windows launches of the replay protocol, each resuming from the latest saved
    state; the step work of the replay (n x (w + catch-up) steps + the restores) is
    reported beside the wall time, which per-window process start dominates; the floor
    of one window is a launch that restores and runs no step (--end = --start).

Usage: python bench/bench_replay.py [--repeats 20] [--windows 8] [--save-every 1]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OUT, median_cpu_seconds, median_seconds, report

MODEL = Path(__file__).resolve().parent.parent / "examples" / "glm52-minimal" / "model"
sys.path.insert(0, str(MODEL))

import paddle  # noqa: E402
import train_paddle as example  # noqa: E402
from official import config, official_weights, tokens  # noqa: E402

from gates.replay.capture import capture_paddle, capture_torch, restore_paddle  # noqa: E402
from gates.replay.state import TrainingState, load_state, save_state  # noqa: E402


def hash_floor(state: TrainingState) -> str:
    """One sha256 over every array's bytes: what hashing the state costs at the least."""
    hasher = hashlib.sha256()
    for arrays in state.parts.values():
        for array in arrays.values():
            hasher.update(array.data)
    return hasher.hexdigest()


def torch_figures(repeats: int) -> dict[str, object]:
    """The torch side's step and commitment, as the example's train_torch.py trains."""
    import torch  # noqa: PLC0415

    torch.set_num_threads(1)
    c = config()
    torch.manual_seed(c["seed"])
    weights = {
        n: torch.nn.Parameter(torch.from_numpy(a.copy())) for n, a in official_weights().items()
    }
    trained = [
        p for n, p in weights.items() if not n.startswith(f"model.layers.{c['num_hidden_layers']}.")
    ]
    optimizer = torch.optim.SGD(trained, lr=c["learning_rate"])
    inputs, labels = (torch.from_numpy(array) for array in tokens())
    experts = c["n_routed_experts"]

    def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * weight

    def step() -> None:
        hidden = torch.nn.functional.embedding(inputs, weights["model.embed_tokens.weight"])
        normed = rms(hidden, weights["model.layers.0.input_layernorm.weight"])
        scores = torch.softmax(normed @ weights["model.layers.0.mlp.gate.weight"].T, dim=-1)
        choice = torch.nn.functional.one_hot(scores.argmax(dim=-1), experts).to(scores.dtype)
        mixed = torch.zeros_like(hidden)
        for expert in range(experts):
            prefix = f"model.layers.0.mlp.experts.{expert}"
            gate = torch.nn.functional.linear(normed, weights[f"{prefix}.gate_proj.weight"])
            up = torch.nn.functional.linear(normed, weights[f"{prefix}.up_proj.weight"])
            out = torch.nn.functional.linear(
                torch.nn.functional.silu(gate) * up, weights[f"{prefix}.down_proj.weight"]
            )
            mixed = mixed + out * choice[..., expert : expert + 1]
        hidden = hidden + mixed * (scores * choice).sum(dim=-1, keepdim=True)
        logits = rms(hidden, weights["model.norm.weight"]) @ weights["lm_head.weight"].T
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
        )
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(3):
        step()
    step_s = median_cpu_seconds(step, repeats)
    readout_s = median_cpu_seconds(
        lambda: capture_torch(weights, optimizer, data_position=1), repeats
    )
    state = capture_torch(weights, optimizer, data_position=1)
    digest_s = median_cpu_seconds(state.digest, repeats)
    floor_s = median_cpu_seconds(lambda: hash_floor(state), repeats)
    return {
        "torch_train_step_ms": round(step_s * 1e3, 3),
        "torch_state_readout_ms": round(readout_s * 1e3, 3),
        "torch_state_digest_ms": round(digest_s * 1e3, 3),
        "torch_hash_floor_ms": round(floor_s * 1e3, 3),
        "torch_commitment_vs_step_pct": round((readout_s + digest_s) / step_s * 100, 2),
        "torch_digest_vs_step_pct": round(digest_s / step_s * 100, 2),
    }


def build() -> tuple[object, object, object, object]:
    c = config()
    paddle.set_device("cpu")
    paddle.seed(c["seed"])
    weights = example.paddle_checkpoint(official_weights(), c["num_hidden_layers"])
    model = example.TinyMoE(weights, c["n_routed_experts"])
    optimizer = paddle.optimizer.SGD(
        learning_rate=c["learning_rate"], parameters=list(model.weights.values())
    )
    inputs, labels = (paddle.to_tensor(array) for array in tokens())
    return model, optimizer, inputs, labels


def main() -> int:  # noqa: PLR0915  (one measurement after another, in order)
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--save-every", type=int, default=1)
    args = parser.parse_args()
    model, optimizer, inputs, labels = build()

    def step() -> None:
        logits = model(inputs)  # type: ignore[operator]
        loss = paddle.nn.functional.cross_entropy(
            logits.reshape([-1, logits.shape[-1]]),
            labels.reshape([-1]),  # type: ignore[attr-defined]
        )
        loss.backward()
        optimizer.step()  # type: ignore[attr-defined]
        optimizer.clear_grad()  # type: ignore[attr-defined]

    def commit() -> str:
        return capture_paddle(model.weights, optimizer, data_position=1).digest()  # type: ignore[attr-defined]

    for _ in range(3):
        step()
    step_s = median_cpu_seconds(step, args.repeats)
    step_and_commit_s = median_cpu_seconds(lambda: (step(), commit()), args.repeats)
    commit_s = median_cpu_seconds(commit, args.repeats)
    readout_s = median_cpu_seconds(
        lambda: capture_paddle(model.weights, optimizer, data_position=1),  # type: ignore[attr-defined]
        args.repeats,
    )
    captured = capture_paddle(model.weights, optimizer, data_position=1)  # type: ignore[attr-defined]
    digest_s = median_cpu_seconds(captured.digest, args.repeats)
    floor_s = median_cpu_seconds(lambda: hash_floor(captured), args.repeats)
    scratch = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    state_path = scratch / "state.safetensors"
    state = capture_paddle(model.weights, optimizer, data_position=1)  # type: ignore[attr-defined]
    save_s = median_seconds(lambda: save_state(state, state_path), args.repeats)

    def restore() -> None:
        loaded = load_state(state_path, "state")
        assert loaded.digest() == state.digest()
        restore_paddle(loaded, model.weights, optimizer)  # type: ignore[attr-defined]

    restore_s = median_seconds(restore, args.repeats)

    env = {**os.environ, "GATES_STATE_EVERY": str(args.save_every), "GATES_FRAMEWORK": "paddle"}
    script = str(MODEL / "train_paddle.py")
    start = time.perf_counter()
    subprocess.run([sys.executable, script, "--out", str(scratch / "run")], env=env, check=True,
                   capture_output=True)  # fmt: skip
    run_s = time.perf_counter() - start
    firsts = sorted(random.Random(4711).sample(range(1, 101), args.windows))
    replay_env = {**env, "GATES_STATE_EVERY": "0"}
    start = time.perf_counter()
    catch_up = 0
    for first in firsts:
        resume = (first - 1) // args.save_every * args.save_every
        catch_up += first - 1 - resume
        saved = scratch / "run" / "states" / f"step-{resume:06d}.safetensors"
        subprocess.run(
            [sys.executable, script, "--resume", str(saved), "--start", str(resume),
             "--end", str(first), "--out", str(scratch / f"w{first}")],
            env=replay_env, check=True, capture_output=True,
        )  # fmt: skip
    replay_s = time.perf_counter() - start
    saved = scratch / "run" / "states" / "step-000050.safetensors"
    floor_argv = [sys.executable, script, "--resume", str(saved), "--start", "50",
                  "--end", "50"]  # fmt: skip
    start = time.perf_counter()
    for index in range(3):
        subprocess.run([*floor_argv, "--out", str(scratch / f"floor{index}")], env=replay_env,
                       check=True, capture_output=True)  # fmt: skip
    launch_floor_s = (time.perf_counter() - start) / 3
    replay_work_s = (args.windows + catch_up) * step_and_commit_s + args.windows * restore_s
    run_work_s = 100 * step_and_commit_s + (100 // args.save_every + 1) * save_s
    results: dict[str, object] = {
        "train_step_ms": round(step_s * 1e3, 3),
        "commitment_ms": round(commit_s * 1e3, 3),
        "step_with_commitment_ms": round(step_and_commit_s * 1e3, 3),
        "commitment_vs_step_pct": round(commit_s / step_s * 100, 2),
        "state_readout_ms": round(readout_s * 1e3, 3),
        "state_digest_ms": round(digest_s * 1e3, 3),
        "hash_floor_ms": round(floor_s * 1e3, 3),
        "digest_vs_step_pct": round(digest_s / step_s * 100, 2),
        "state_save_ms": round(save_s * 1e3, 3),
        "state_restore_ms": round(restore_s * 1e3, 3),
        "state_bytes": state_path.stat().st_size,
        "save_every": args.save_every,
        "full_run_s": round(run_s, 2),
        "replay_windows": args.windows,
        "replay_wall_s": round(replay_s, 2),
        "replay_wall_vs_run_pct": round(replay_s / run_s * 100, 1),
        "replay_step_work_vs_run_step_work_pct": round(replay_work_s / run_work_s * 100, 2),
        "replay_launch_floor_s": round(launch_floor_s, 2),
        "replay_floor_vs_run_pct": round(args.windows * launch_floor_s / run_s * 100, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    if importlib.util.find_spec("torch") is not None:
        results.update(torch_figures(args.repeats))
    report(results, OUT / "bench_replay.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
