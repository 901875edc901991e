"""The tiny GLM-like MoE model trained on the CPU with PaddlePaddle (the candidate side).

Loads the official checkpoint (HF naming) through the same conversion as
PaddleFormers' AOA: gate/up fused into `up_gate_proj` (gate first), linear
weights in Paddle's `[in, out]` layout, PaddleFleet names, the MTP decoder keys
under `transformer_layer`. Like the PR this example recreates, the Paddle MTP
layer builds no DSA indexer. Trains 100 SGD steps, records every loss
unrounded through `gates.recorder.RunRecorder`, dumps the tensors of steps 1-3
(boundary activations, gradients, optimizer state, updated parameters) through
`gates.tensors.recorder.TensorRecorder`, and saves the loaded weights as
safetensors in Paddle naming. Every step commits the training state's digest
(parameters, optimizer, RNGs, data position, schedule; `gates.replay.capture`)
and the full state is saved as the policy asks:

    gates run --framework paddle -- python model/train_paddle.py

The replay protocol (docs/replay.md): resume from a saved state, run steps
START+1..END, record them into OUT:

    python model/train_paddle.py --resume STATE --start START --end END --out OUT
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one reduction order, run after run
os.environ.setdefault("FLAGS_cudnn_deterministic", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import paddle
from official import CONFIG, config, official_weights, tokens
from safetensors.paddle import save_file

from gates.recorder import RunRecorder
from gates.replay.capture import capture_paddle, restore_paddle
from gates.replay.state import load_state
from gates.tensors.recorder import TensorRecorder

DUMPED_STEPS = "1:3"


def paddle_name(name: str, mtp: int) -> str:
    """The PaddleFleet name of an HF tensor name (gate/up fusion aside)."""
    renamed = {
        "model.embed_tokens.weight": "model.embedding.embed_tokens.weight",
        "lm_head.weight": "model.lm_head.weight",
        f"model.layers.{mtp}.shared_head.norm.weight": f"model.layers.{mtp}.norm.weight",
    }
    if name in renamed:
        return renamed[name]
    prefix = f"model.layers.{mtp}."
    if name.startswith(prefix + "input_layernorm"):
        return f"{prefix}transformer_layer.{name.removeprefix(prefix)}"
    return name


def paddle_checkpoint(official: dict[str, np.ndarray], mtp: int) -> dict[str, np.ndarray]:
    """HF names and layout -> PaddleFleet names and layout (no MTP indexer)."""
    converted: dict[str, np.ndarray] = {}
    for name, array in official.items():
        if ".indexer." in name or name.endswith("up_proj.weight"):
            continue  # no indexer on the Paddle side; up_proj is fused with gate_proj
        if name.endswith("gate_proj.weight"):
            up = official[name.replace("gate_proj", "up_proj")]
            fused = np.concatenate([array.T, up.T], axis=1)  # gate first, [in, out]
            converted[name.replace("gate_proj", "up_gate_proj")] = fused
        elif name.endswith("_proj.weight"):
            converted[paddle_name(name, mtp)] = np.ascontiguousarray(array.T)
        else:
            converted[paddle_name(name, mtp)] = array
    return converted


class TinyMoE(paddle.nn.Layer):
    def __init__(self, weights: dict[str, np.ndarray], experts: int) -> None:
        super().__init__()
        self.weights = {}
        for name, array in weights.items():
            parameter = self.create_parameter(list(array.shape), dtype="float32")
            parameter.set_value(array)
            self.add_parameter(name.replace(".", "__"), parameter)
            self.weights[name] = parameter
        self.experts = experts
        self.tap: Callable[[str, paddle.Tensor], None] = lambda name, tensor: None

    def w(self, name: str) -> paddle.Tensor:
        return self.weights[name]

    @staticmethod
    def rms(x: paddle.Tensor, weight: paddle.Tensor) -> paddle.Tensor:
        return x * paddle.rsqrt((x * x).mean(axis=-1, keepdim=True) + 1e-6) * weight

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        tap = self.tap  # module boundaries, named as PaddleFleet names the modules
        hidden = paddle.nn.functional.embedding(ids, self.w("model.embedding.embed_tokens.weight"))
        tap("model.embedding.embed_tokens", hidden)
        normed = self.rms(hidden, self.w("model.layers.0.input_layernorm.weight"))
        tap("model.layers.0.input_layernorm", normed)
        router = self.w("model.layers.0.mlp.gate.weight")
        scores = paddle.nn.functional.softmax(
            paddle.matmul(normed, router, transpose_y=True), axis=-1
        )
        tap("model.layers.0.mlp.gate", scores)
        choice = paddle.nn.functional.one_hot(scores.argmax(axis=-1), self.experts)
        weight = (scores * choice).sum(axis=-1, keepdim=True)
        mixed = paddle.zeros_like(hidden)
        for expert in range(self.experts):
            prefix = f"model.layers.0.mlp.experts.{expert}"
            gate_up = paddle.matmul(normed, self.w(f"{prefix}.up_gate_proj.weight"))
            tap(f"{prefix}.up_gate_proj", gate_up)
            half = gate_up.shape[-1] // 2
            gate, up = gate_up[..., :half], gate_up[..., half:]  # gate first
            out = paddle.matmul(
                paddle.nn.functional.silu(gate) * up, self.w(f"{prefix}.down_proj.weight")
            )
            tap(f"{prefix}.down_proj", out)
            mixed = mixed + out * choice[..., expert : expert + 1]
        moe = mixed * weight
        tap("model.layers.0.mlp", moe)
        hidden = hidden + moe
        final = self.rms(hidden, self.w("model.norm.weight"))
        tap("model.norm", final)
        logits = paddle.matmul(final, self.w("model.lm_head.weight"), transpose_y=True)
        tap("model.lm_head", logits)
        return logits


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resume", type=Path, help="a saved training state to resume from")
    parser.add_argument("--start", type=int, default=0, help="the step the state is after")
    parser.add_argument("--end", type=int, help="the last step to run (default: train_steps)")
    parser.add_argument("--out", type=Path, help="the run folder (default: GATES_RUN_DIR)")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    c = config()
    paddle.set_device("cpu")
    paddle.seed(c["seed"])
    weights = paddle_checkpoint(official_weights(), c["num_hidden_layers"])
    model = TinyMoE(weights, c["n_routed_experts"])
    trained = [
        p
        for n, p in model.weights.items()
        if n.startswith(("model.embedding", "model.layers.0", "model.norm", "model.lm_head"))
    ]
    optimizer = paddle.optimizer.SGD(learning_rate=c["learning_rate"], parameters=trained)
    inputs, labels = (paddle.to_tensor(array) for array in tokens())
    start = args.start
    if args.resume is not None:  # the replay protocol: state after step `start`
        start = restore_paddle(load_state(args.resume, str(args.resume)), model.weights, optimizer)
    end = c["train_steps"] if args.end is None else args.end
    replaying = args.resume is not None
    with (
        RunRecorder(
            args.out, model_config=CONFIG, weights_loaded=True, first_step=start + 1
        ) as run,
        TensorRecorder(args.out, steps=() if replaying else DUMPED_STEPS) as dump,
    ):
        if not replaying:
            dump.watch(
                optimizer=optimizer,
                parameters={n: p for n, p in model.weights.items() if any(p is t for t in trained)},
            )
            model.tap = dump.activation
            folder = run.folder / "checkpoint"
            folder.mkdir(exist_ok=True)
            save_file(
                {n: paddle.to_tensor(a) for n, a in weights.items()},
                str(folder / "model.safetensors"),
                metadata={"format": "paddle"},
            )
        run.start(capture_paddle(model.weights, optimizer, data_position=start))
        for step in range(start + 1, end + 1):
            dump.start_step(step)
            logits = model(inputs)
            flat = logits.reshape([-1, logits.shape[-1]])
            loss = paddle.nn.functional.cross_entropy(flat, labels.reshape([-1]))
            loss.backward()
            dump.record_grads()
            optimizer.step()
            dump.record_update()
            optimizer.clear_grad()
            state = capture_paddle(model.weights, optimizer, data_position=step)
            run.record(step, loss, state=state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
