"""Tensor dumps for the tests: written by the real writer from numpy arrays, or recorded
from a real small Paddle training run on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gates.tensors.layout import TENSORS_FOLDER
from gates.tensors.writer import RawTensor, write_step

Phases = dict[str, dict[str, np.ndarray]]

_CODES = {"float32": "F32", "float64": "F64", "float16": "F16", "int64": "I64"}


def raw(name: str, array: np.ndarray, dtype: str | None = None) -> RawTensor:
    """``dtype`` BF16 takes ``array`` as uint16 bit patterns."""
    code = dtype or _CODES[str(array.dtype)]
    data = np.ascontiguousarray(array).tobytes()
    return RawTensor(name, code, tuple(array.shape), data)


def write_dump(
    run_folder: Path,
    steps: dict[int, Phases],
    *,
    dtypes: dict[str, str] | None = None,
    framework: str = "paddle",
) -> Path:
    """Write ``steps`` (step -> phase -> name -> array) as a dump; order = insertion order."""
    root = run_folder / TENSORS_FOLDER
    for step, phases in steps.items():
        tensors = {
            phase: [raw(n, a, (dtypes or {}).get(n)) for n, a in named.items()]
            for phase, named in phases.items()
        }
        order = [(phase, name) for phase, named in phases.items() for name in named]
        write_step(root, step, tensors, order, framework=framework)
    return run_folder


def glm_pair(
    rng: np.random.Generator, steps: int = 3
) -> tuple[dict[int, Phases], dict[int, Phases]]:
    """A reference dump in HF naming/layout and the candidate the GLM rules predict from it:
    gate/up fused into up_gate_proj (transposed, gate first), the embedding renamed, the
    router cast to F32 from F16, Adam moments as exp_avg/moment1."""
    ref_steps: dict[int, Phases] = {}
    cand_steps: dict[int, Phases] = {}
    for step in range(1, steps + 1):
        gate = rng.standard_normal((6, 4)).astype(np.float32)
        up = rng.standard_normal((6, 4)).astype(np.float32)
        embed = rng.standard_normal((10, 4)).astype(np.float32)
        router = rng.standard_normal((2, 4)).astype(np.float16)
        hidden = rng.standard_normal((2, 3, 4)).astype(np.float32)
        prefix = "model.layers.0.mlp.experts.0"
        ref: Phases = {
            "activation": {"model.layers.0.mlp": hidden},
            "grad": {
                f"{prefix}.gate_proj.weight": gate,
                f"{prefix}.up_proj.weight": up,
                "model.embed_tokens.weight": embed,
                "model.layers.0.mlp.gate.weight": router,
            },
            "optimizer": {
                f"{prefix}.gate_proj.weight:exp_avg": gate * 0.5,
                f"{prefix}.up_proj.weight:exp_avg": up * 0.5,
            },
            "param": {"model.embed_tokens.weight": embed + 1},
        }
        fused = np.concatenate([gate.T, up.T], axis=1)
        cand: Phases = {
            "activation": {"model.layers.0.mlp": hidden.copy()},
            "grad": {
                "model.layers.0.mlp.gate.weight": router.astype(np.float32),
                f"{prefix}.up_gate_proj.weight": np.ascontiguousarray(fused),
                "model.embedding.embed_tokens.weight": embed.copy(),
            },
            "optimizer": {
                f"{prefix}.up_gate_proj.weight:moment1": np.ascontiguousarray(fused * 0.5)
            },
            "param": {"model.embedding.embed_tokens.weight": embed + 1},
        }
        ref_steps[step], cand_steps[step] = ref, cand
    return ref_steps, cand_steps


def train_paddle(
    run_folder: Path,
    *,
    steps: int = 3,
    record: str | None = None,
    modules: tuple[str, ...] = ("*",),
    phases: tuple[str, ...] = ("activation", "grad", "optimizer", "param"),
    perturb_step: int | None = None,
) -> Any:
    """A real tiny Paddle model trained with Adam on the CPU, dumped by TensorRecorder.
    ``perturb_step`` nudges one weight by one ULP before that step's forward."""
    import paddle  # noqa: PLC0415

    from gates.tensors.recorder import TensorRecorder  # noqa: PLC0415

    paddle.set_device("cpu")
    paddle.seed(7)

    class Tiny(paddle.nn.Layer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.embed = paddle.nn.Embedding(16, 8)
            self.proj = paddle.nn.Linear(8, 8)
            self.head = paddle.nn.Linear(8, 16)

        def forward(self, ids: Any) -> Any:
            return self.head(paddle.nn.functional.silu(self.proj(self.embed(ids))))

    model = Tiny()
    optimizer = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    rng = np.random.default_rng(3)
    ids = paddle.to_tensor(rng.integers(0, 16, (4, 5)).astype("int64"))
    labels = paddle.to_tensor(rng.integers(0, 16, (4 * 5,)).astype("int64"))
    with TensorRecorder(run_folder, steps=record, modules=modules, phases=phases) as dump:
        dump.watch(model, optimizer)
        for step in range(1, steps + 1):
            if step == perturb_step:
                weight = model.proj.weight.numpy()
                weight.view(np.uint32)[0, 0] += 1
                model.proj.weight.set_value(weight)
            dump.start_step(step)
            loss = paddle.nn.functional.cross_entropy(model(ids).reshape([-1, 16]), labels)
            loss.backward()
            dump.record_grads()
            optimizer.step()
            dump.record_update()
            optimizer.clear_grad()
    return dump
