"""The same tiny GLM-like MoE model in PyTorch (the reference side), on the CPU.

Starts from the official checkpoint in its own HF naming and `[out, in]`
layout, trains the same 100 SGD steps on the same tokens, and records every
loss unrounded through `gates.recorder.RunRecorder(framework="torch")`, and dumps
the tensors of steps 1-3 through `gates.tensors.recorder.TensorRecorder`:

    gates run --framework torch -- python model/train_torch.py

Every step commits the training state's digest (`gates.replay.capture`); the
replay protocol (docs/replay.md) resumes a saved state and runs a window:

    python model/train_torch.py --resume STATE --start START --end END --out OUT
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from official import CONFIG, config, official_weights, tokens

from gates.recorder import RunRecorder
from gates.replay.capture import capture_torch, restore_torch
from gates.replay.state import load_state
from gates.tensors.recorder import TensorRecorder

DUMPED_STEPS = "1:3"


def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * weight


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resume", type=Path, help="a saved training state to resume from")
    parser.add_argument("--start", type=int, default=0, help="the step the state is after")
    parser.add_argument("--end", type=int, help="the last step to run (default: train_steps)")
    parser.add_argument("--out", type=Path, help="the run folder (default: GATES_RUN_DIR)")
    return parser.parse_args()


def steps(
    args: argparse.Namespace,
    train_steps: int,
    weights: dict[str, torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
) -> tuple[int, int]:
    """The step the run starts after (restoring the state, under the replay protocol) and
    its last step."""
    start = args.start
    if args.resume is not None:
        start = restore_torch(load_state(args.resume, str(args.resume)), weights, optimizer)
    return start, train_steps if args.end is None else args.end


def main() -> int:
    args = arguments()
    c = config()
    torch.manual_seed(c["seed"])
    torch.use_deterministic_algorithms(True)
    weights = {
        n: torch.nn.Parameter(torch.from_numpy(a.copy())) for n, a in official_weights().items()
    }
    trained = [
        p for n, p in weights.items() if not n.startswith(f"model.layers.{c['num_hidden_layers']}.")
    ]
    optimizer = torch.optim.SGD(trained, lr=c["learning_rate"])
    inputs, labels = (torch.from_numpy(array) for array in tokens())
    experts = c["n_routed_experts"]
    names = {id(p): n for n, p in weights.items()}
    start, end = steps(args, c["train_steps"], weights, optimizer)
    replaying = args.resume is not None
    with (
        RunRecorder(
            args.out,
            framework="torch",
            model_config=CONFIG,
            weights_loaded=True,
            first_step=start + 1,
        ) as run,
        TensorRecorder(
            args.out, framework="torch", steps=() if replaying else DUMPED_STEPS
        ) as dump,
    ):
        if not replaying:
            dump.watch(optimizer=optimizer, parameters={names[id(p)]: p for p in trained})
        tap = dump.activation  # module boundaries, named as HF names the modules
        run.start(capture_torch(weights, optimizer, data_position=start))
        for step in range(start + 1, end + 1):
            dump.start_step(step)
            hidden = torch.nn.functional.embedding(inputs, weights["model.embed_tokens.weight"])
            tap("model.embed_tokens", hidden)
            normed = rms(hidden, weights["model.layers.0.input_layernorm.weight"])
            tap("model.layers.0.input_layernorm", normed)
            scores = torch.softmax(normed @ weights["model.layers.0.mlp.gate.weight"].T, dim=-1)
            tap("model.layers.0.mlp.gate", scores)
            choice = torch.nn.functional.one_hot(scores.argmax(dim=-1), experts).to(scores.dtype)
            weight = (scores * choice).sum(dim=-1, keepdim=True)
            mixed = torch.zeros_like(hidden)
            for expert in range(experts):
                prefix = f"model.layers.0.mlp.experts.{expert}"
                gate = torch.nn.functional.linear(normed, weights[f"{prefix}.gate_proj.weight"])
                tap(f"{prefix}.gate_proj", gate)
                up = torch.nn.functional.linear(normed, weights[f"{prefix}.up_proj.weight"])
                tap(f"{prefix}.up_proj", up)
                out = torch.nn.functional.linear(
                    torch.nn.functional.silu(gate) * up, weights[f"{prefix}.down_proj.weight"]
                )
                tap(f"{prefix}.down_proj", out)
                mixed = mixed + out * choice[..., expert : expert + 1]
            moe = mixed * weight
            tap("model.layers.0.mlp", moe)
            hidden = hidden + moe
            final = rms(hidden, weights["model.norm.weight"])
            tap("model.norm", final)
            logits = final @ weights["lm_head.weight"].T
            tap("lm_head", logits)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
            )
            loss.backward()
            dump.record_grads()
            optimizer.step()
            dump.record_update()
            optimizer.zero_grad()
            state = capture_torch(weights, optimizer, data_position=step)
            run.record(step, loss.item(), state=state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
