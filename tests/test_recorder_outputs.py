"""The tensor recorder on what real forwards return: ModelOutput objects of transformers and
PaddleFormers, dicts, nested tuples with None, values that are no tensor, dtypes that cannot
be dumped. The run never dies for the recorder: what it cannot dump is named in the step's
order.json (`not_dumped`) and on the recorder, and the step is written."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from gates.tensors.layout import ORDER_FILE
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.slow


def _order(run: Path, step: int = 1) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / f"tensors/step-{step:06d}" / ORDER_FILE).read_text())
    return loaded


def test_torch_forwards_of_every_shape_are_recorded_or_named(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from transformers.modeling_outputs import BaseModelOutputWithPast  # noqa: PLC0415

    from gates.tensors.recorder import TensorRecorder  # noqa: PLC0415

    class Shapes(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, kind: str, x: Any) -> Any:
            hidden = self.linear(x)
            return {
                "model_output": BaseModelOutputWithPast(last_hidden_state=hidden),
                "dict": {"aux": None, "hidden": hidden * 2},
                "nested": (None, ((None, hidden + 1), 3)),
                "nothing": (None, 7, "text"),
                "complex": torch.complex(hidden, hidden),
            }[kind]

    model = torch.nn.ModuleDict({k: Shapes() for k in ("a", "b", "c", "d", "e")})
    kinds = {"a": "model_output", "b": "dict", "c": "nested", "d": "nothing", "e": "complex"}
    x = torch.ones(2, 4)
    with TensorRecorder(tmp_path / "run", framework="torch", phases=("activation",)) as dump:
        dump.watch(model)
        dump.start_step(1)
        outputs = {name: model[name](kind, x) for name, kind in kinds.items()}
        dump.record_update()
    dumped = load_file(tmp_path / "run/tensors/step-000001/activation.safetensors")
    hidden = outputs["a"].last_hidden_state.detach().numpy()
    assert np.array_equal(dumped["a"], model["a"].linear(x).detach().numpy())
    assert np.array_equal(dumped["a"], hidden)
    assert np.array_equal(dumped["b"], outputs["b"]["hidden"].detach().numpy())
    assert np.array_equal(dumped["c"], outputs["c"][1][0][1].detach().numpy())
    assert "d" not in dumped and "e" not in dumped
    not_dumped = {name: why for _, name, why in _order(tmp_path / "run")["not_dumped"]}
    assert not_dumped["d"] == "the output holds no tensor (tuple)"
    assert "complex64 cannot be dumped" in not_dumped["e"]
    assert [(s, n) for s, _, n, _ in dump.not_dumped] == [(1, "d"), (1, "e")]


def test_a_name_given_twice_in_a_step_keeps_the_first(tmp_path: Path) -> None:
    from gates.tensors.recorder import TensorRecorder  # noqa: PLC0415

    with TensorRecorder(tmp_path / "run", framework="torch", phases=("activation",)) as dump:
        dump.start_step(1)
        dump.activation("m", np.zeros(3, np.float32))
        dump.activation("m", np.ones(3, np.float32))  # recorded as m#2
        dump.activation("m#2", np.full(3, 2, np.float32))  # by hand: the name is taken
        dump.record_update()
    dumped = load_file(tmp_path / "run/tensors/step-000001/activation.safetensors")
    assert sorted(dumped) == ["m", "m#2"] and np.array_equal(dumped["m#2"], np.ones(3))
    assert _order(tmp_path / "run")["not_dumped"] == [
        ["activation", "m#2", "recorded twice in this step: the first is kept"]
    ]


PADDLE_SCRIPT = """
import sys
import paddle
from paddleformers.transformers.model_outputs import BaseModelOutputWithPastAndMTP
from gates.tensors.recorder import TensorRecorder

class Shapes(paddle.nn.Layer):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.linear = paddle.nn.Linear(4, 4)

    def forward(self, x):
        hidden = self.linear(x)
        return {
            "model_output": BaseModelOutputWithPastAndMTP(last_hidden_state=hidden, mtp_outputs=[]),
            "dict": {"aux": None, "hidden": hidden * 2},
            "nested": (None, ((None, hidden + 1), 3)),
            "nothing": None,
        }[self.kind]

class Model(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.a, self.b = Shapes("model_output"), Shapes("dict")
        self.c, self.d = Shapes("nested"), Shapes("nothing")

    def forward(self, x):
        self.d(x)
        total = self.a(x).last_hidden_state.sum() + self.b(x)["hidden"].sum()
        return total + self.c(x)[1][0][1].sum()

model = Model()
optimizer = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
with TensorRecorder(sys.argv[1], framework="paddle") as dump:
    dump.watch(model, optimizer)
    for step in (1, 2):
        dump.start_step(step)
        model(paddle.ones([2, 4])).backward()
        dump.record_grads()
        optimizer.step()
        dump.record_update()
        optimizer.clear_grad()
print("trained")
"""


@pytest.mark.skipif(
    importlib.util.find_spec("paddleformers") is None,
    reason="paddleformers is not installed (`make test` installs the real extra)",
)
def test_paddleformers_model_output_and_friends(tmp_path: Path) -> None:
    # paddleformers is imported in the subprocess only: in this process it would turn off
    # transformers' torch support for the tests that share the worker
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PADDLE_SCRIPT), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trained" in done.stdout
    for step in (1, 2):
        order = _order(tmp_path / "run", step)
        activations = [n for p, n in order["order"] if p == "activation"]
        assert activations == ["d.linear", "a.linear", "a", "b.linear", "b", "c.linear", "c"]
        assert order["not_dumped"] == [["activation", "d", "the output holds no tensor (NoneType)"]]
    dumped = load_file(tmp_path / "run/tensors/step-000002/activation.safetensors")
    assert np.array_equal(dumped["b"], dumped["b.linear"] * 2)
    assert np.array_equal(dumped["c"], dumped["c.linear"] + 1)
