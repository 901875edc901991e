"""The torch recorder, where torch is importable (it is not installed by the project's test
extra: the example's torch side is a recorded run). Run with a Python that has torch:

    PYTHONPATH=. /path/to/python-with-torch -m pytest tests/test_tensor_torch.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from gates.tensors.layout import ORDER_FILE
from tests.helpers import Workspace

pytestmark = pytest.mark.slow


def train_torch(run_folder: Path, *, nudge_step: int | None = None, bf16: bool = False) -> None:
    from gates.tensors.recorder import TensorRecorder  # noqa: PLC0415

    torch = pytest.importorskip("torch")  # here, not at import: collecting stays fast
    torch.manual_seed(7)
    model = torch.nn.Sequential(
        torch.nn.Embedding(16, 8), torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 16)
    )
    if bf16:
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(3)
    ids = torch.from_numpy(rng.integers(0, 16, (4, 5)))
    labels = torch.from_numpy(rng.integers(0, 16, (20,)))
    with TensorRecorder(run_folder, framework="torch") as dump:
        dump.watch(model, optimizer)
        for step in range(1, 4):
            if step == nudge_step:
                with torch.no_grad():
                    weight: Any = model[1].weight
                    weight.view(torch.int32)[0, 0] += 1
            dump.start_step(step)
            loss = torch.nn.functional.cross_entropy(model(ids).reshape(-1, 16).float(), labels)
            loss.backward()
            dump.record_grads()
            optimizer.step()
            dump.record_update()
            optimizer.zero_grad()


def test_torch_dump_layout_slots_and_order(tmp_path: Path) -> None:
    train_torch(tmp_path / "run")
    step = tmp_path / "run/tensors/step-000002"
    order = json.loads((step / ORDER_FILE).read_text())["order"]
    assert [n for p, n in order if p == "activation"] == ["0", "1", "2", "3"]
    assert next(n for p, n in order if p == "grad").startswith("3.")  # backward order
    optimizer = load_file(step / "optimizer.safetensors")
    assert {"1.weight:exp_avg", "1.weight:exp_avg_sq"} <= set(optimizer)
    param = load_file(step / "param.safetensors")
    assert param["1.weight"].shape == (8, 8) and param["1.weight"].dtype == np.float32


def test_torch_bf16_is_dumped_as_bits(tmp_path: Path) -> None:
    train_torch(tmp_path / "run", bf16=True)
    header_length = int.from_bytes(
        (tmp_path / "run/tensors/step-000001/param.safetensors").read_bytes()[:8], "little"
    )
    header = json.loads(
        (tmp_path / "run/tensors/step-000001/param.safetensors").read_bytes()[8 : 8 + header_length]
    )
    assert header["1.weight"]["dtype"] == "BF16"


def test_torch_repeats_and_a_nudge(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    for name, nudge in (("a", None), ("b", None), ("c", 2)):
        train_torch(ws.root / "experiments" / name, nudge_step=nudge)
    same = ws.gates(
        capsys, "check", "tensors", "experiments/a", "experiments/b", "--format", "json"
    )
    assert same.code == 0, same.err
    nudged = ws.gates(
        capsys, "check", "tensors", "experiments/a", "experiments/c", "--format", "json"
    )
    assert nudged.code == 1
    stamped = json.loads((ws.root / "experiments/a/tensors.receipt.json").read_text())
    assert (stamped["kind"], stamped["framework"]) == ("tensor_dump", "torch")
    first = json.loads(nudged.out)["first_divergence"]
    assert (first["step"], first["phase"], first["candidate"]) == (2, "activation", "1")
    assert first["index"] % 8 == 0  # output column 0: the nudged weight's row
