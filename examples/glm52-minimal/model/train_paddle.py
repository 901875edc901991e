"""A tiny GLM-like MoE language model trained on the CPU with PaddlePaddle.

Embedding, RMSNorm, a routed MoE FFN (top-1 of two experts, gate and up fused
into `up_gate_proj` in Paddle's `[in, out]` layout, an F32 router), a final
norm and an lm_head; 100 SGD steps on fixed synthetic tokens. Every loss is
recorded unrounded through `gates.recorder.RunRecorder`, and the final weights
are saved as safetensors in PaddleFleet naming. Run it under `gates run`:

    gates run --framework paddle -- python model/train_paddle.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one reduction order, run after run
os.environ.setdefault("FLAGS_cudnn_deterministic", "1")

import numpy as np
import paddle
from safetensors.paddle import save_file

from gates.recorder import RunRecorder

CONFIG = Path(__file__).with_name("config.json")


def tokens(config: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(config["seed"])
    data = rng.integers(0, config["vocab_size"], (config["batch_size"], config["seq_len"] + 1))
    return data[:, :-1].astype("int64"), data[:, 1:].astype("int64")


class TinyMoE(paddle.nn.Layer):
    def __init__(self, config: dict[str, int]) -> None:
        super().__init__()
        hidden, ffn, experts = (
            config["hidden_size"],
            config["moe_intermediate_size"],
            config["n_routed_experts"],
        )
        normal = paddle.nn.initializer.Normal(std=0.2)
        self.embed = self.create_parameter(
            [config["vocab_size"], hidden], default_initializer=normal
        )
        self.input_norm = self.create_parameter(
            [hidden], default_initializer=paddle.nn.initializer.Constant(1.0)
        )
        self.router = self.create_parameter([experts, hidden], default_initializer=normal)
        self.up_gate = paddle.nn.ParameterList(
            [
                self.create_parameter([hidden, 2 * ffn], default_initializer=normal)
                for _ in range(experts)
            ]
        )
        self.down = paddle.nn.ParameterList(
            [
                self.create_parameter([ffn, hidden], default_initializer=normal)
                for _ in range(experts)
            ]
        )
        self.norm = self.create_parameter(
            [hidden], default_initializer=paddle.nn.initializer.Constant(1.0)
        )
        self.lm_head = self.create_parameter(
            [config["vocab_size"], hidden], default_initializer=normal
        )
        self.ffn = ffn

    @staticmethod
    def rms(x: paddle.Tensor, weight: paddle.Tensor) -> paddle.Tensor:
        return x * paddle.rsqrt((x * x).mean(axis=-1, keepdim=True) + 1e-6) * weight

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        hidden = paddle.nn.functional.embedding(ids, self.embed)
        normed = self.rms(hidden, self.input_norm)
        scores = paddle.nn.functional.softmax(
            paddle.matmul(normed, self.router, transpose_y=True), axis=-1
        )
        choice = paddle.nn.functional.one_hot(scores.argmax(axis=-1), scores.shape[-1])
        weight = (scores * choice).sum(axis=-1, keepdim=True)
        mixed = paddle.zeros_like(hidden)
        for index in range(len(self.down)):
            gate_up = paddle.matmul(normed, self.up_gate[index])
            gate, up = gate_up[..., : self.ffn], gate_up[..., self.ffn :]  # gate first
            out = paddle.matmul(paddle.nn.functional.silu(gate) * up, self.down[index])
            mixed = mixed + out * choice[..., index : index + 1]
        hidden = hidden + mixed * weight
        return paddle.matmul(self.rms(hidden, self.norm), self.lm_head, transpose_y=True)

    def checkpoint(self) -> dict[str, paddle.Tensor]:
        """Weights in PaddleFleet naming (the MTP layer is not built in this tiny model)."""
        named = {
            "model.embedding.embed_tokens.weight": self.embed,
            "model.layers.0.input_layernorm.weight": self.input_norm,
            "model.layers.0.mlp.gate.weight": self.router,
            "model.norm.weight": self.norm,
            "model.lm_head.weight": self.lm_head,
        }
        for index in range(len(self.down)):
            named[f"model.layers.0.mlp.experts.{index}.up_gate_proj.weight"] = self.up_gate[index]
            named[f"model.layers.0.mlp.experts.{index}.down_proj.weight"] = self.down[index]
        return {name: tensor.detach().clone() for name, tensor in named.items()}


def main() -> int:
    config = json.loads(CONFIG.read_text())
    paddle.set_device("cpu")
    paddle.seed(config["seed"])
    model = TinyMoE(config)
    optimizer = paddle.optimizer.SGD(
        learning_rate=config["learning_rate"], parameters=model.parameters()
    )
    inputs, labels = (paddle.to_tensor(array) for array in tokens(config))
    with RunRecorder(model_config=CONFIG) as run:
        for step in range(1, config["train_steps"] + 1):
            logits = model(inputs)
            loss = paddle.nn.functional.cross_entropy(
                logits.reshape([-1, logits.shape[-1]]), labels.reshape([-1])
            )
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
            run.record(step, loss)
        folder = run.folder / "checkpoint"
        folder.mkdir(exist_ok=True)
        save_file(
            model.checkpoint(), str(folder / "model.safetensors"), metadata={"format": "paddle"}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
