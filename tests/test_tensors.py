"""`gates check tensors`: dumps compared bit for bit through the naming rules, on dumps
written by the real writer and by a real Paddle run on the CPU, with the bad inputs."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from gates.tensors.layout import ORDER_FILE
from tests.helpers import Result, Workspace, write
from tests.tensorgen import glm_pair, train_paddle, write_dump

REF, CAND = "results/torch", "results/paddle"
PREFIX = "model.layers.0.mlp.experts.0"


def check(ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[Result, Any]:
    result = ws.gates(capsys, "check", "tensors", *args, "--format", "json")
    return result, (json.loads(result.out) if result.out.strip() else None)


def glm_dumps(ws: Workspace, steps: int = 3) -> tuple[dict[int, Any], dict[int, Any]]:
    ref, cand = glm_pair(np.random.default_rng(5), steps)
    write_dump(ws.root / REF, ref, framework="torch")
    write_dump(ws.root / CAND, cand)
    return ref, cand


def test_glm_rules_map_fusion_transpose_cast_and_slots(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    glm_dumps(ws)
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 0, result.err
    assert doc["aligned"] is True
    assert doc["first_divergence"] is None
    assert doc["totals"] == {"compared": 18, "equal": 18, "unequal": 0, "missing": 0}
    assert doc["rules"].endswith("contracts/tensor-inventory.toml")
    # no config.json sets {mtp} here: the MTP rules are left out, and said so
    assert any("left out" in note and "{mtp}" in note for note in doc["notes"])
    assert "ffn-fusion" not in doc["unmatched_rules"]
    receipt = json.loads((ws.root / "outputs/tensor_check.receipt.json").read_text())
    assert receipt["kind"] == "tensor_check"


def test_first_divergence_names_the_fused_part_and_element(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    ref, cand = glm_pair(np.random.default_rng(5), 3)
    fused = cand[2]["grad"][f"{PREFIX}.up_gate_proj.weight"]  # [in=4, gate 6 + up 6]
    fused.view(np.uint32)[1, 8] ^= 1  # one ULP in the up half, row 1
    cand[3]["activation"]["model.layers.0.mlp"][0, 0, 0] += 1.0
    write_dump(ws.root / REF, ref, framework="torch")
    write_dump(ws.root / CAND, cand)
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 1
    assert doc["first_divergence"] == {
        "step": 2,
        "phase": "grad",
        "reference": f"{PREFIX}.up_proj.weight",
        "candidate": f"{PREFIX}.up_gate_proj.weight",
        "index": 1 * 12 + 8,
    }
    step2 = next(t for t in doc["by_step"] if t["step"] == 2 and t["phase"] == "grad")
    assert (step2["unequal"], step2["max_ulp"]) == (1, 1)
    # the activation of step 3 comes before its grads, but step 2 is earlier
    assert [u["step"] for u in doc["unequal"]] == [2, 3]
    result, doc = check(ws, capsys, REF, CAND, "--steps", "3:3")
    assert doc["first_divergence"]["phase"] == "activation"
    result, doc = check(ws, capsys, REF, CAND, "--steps", "1", "--phase", "grad")
    assert result.code == 0 and doc["totals"]["compared"] == 3


def _single(ws: Workspace, ref: np.ndarray, cand: np.ndarray, **dtypes: str) -> None:
    write_dump(
        ws.root / REF,
        {1: {"grad": {"w": ref}}},
        dtypes={"w": dtypes.get("ref", "")} if dtypes.get("ref") else None,
    )
    write_dump(
        ws.root / CAND,
        {1: {"grad": {"w": cand}}},
        dtypes={"w": dtypes.get("cand", "")} if dtypes.get("cand") else None,
    )


def test_signed_zero_differs(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    _single(ws, np.array([1.0, 0.0], np.float32), np.array([1.0, -0.0], np.float32))
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 1
    assert doc["first_divergence"]["index"] == 1
    assert doc["unequal"][0]["max_ulp"] == 1
    assert doc["unequal"][0]["max_abs_diff"] == 0.0


def test_nan_payloads_and_inf_are_compared_as_bits(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet, payload = np.uint32(0x7FC00000), np.uint32(0x7FC00001)
    ref = np.array([quiet, 0x7F800000, 0x3F800000], np.uint32).view(np.float32)
    same = ref.copy()
    _single(ws, ref, same)
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 0, doc
    assert doc["by_step"][1]["nonfinite"] == 2  # grad of step 1: NaN and Inf, reported
    other = ref.copy()
    other.view(np.uint32)[0] = payload
    _single(ws, ref, other)
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 1
    bad = doc["unequal"][0]
    assert (bad["index"], bad["nonfinite_pairs"], bad["max_abs_diff"]) == (0, 1, None)


def _rules(ws: Workspace, rules: str) -> str:
    write(
        ws.root,
        "rules.toml",
        'id = "x.rules"\ntitle = "t"\ncheck = "tensor_inventory"\n'
        'discharge = "d"\n[params]\n' + rules,
    )
    return "rules.toml"


def test_a_cast_compares_in_the_wider_dtype_and_never_hides_a_difference(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = _rules(
        ws,
        '[[params.rules]]\nkind = "cast"\nmatch = "w"\ndtype = "BF16"\n'
        '[[params.rules]]\nkind = "cast"\nmatch = "v"\ndtype = "F32"\n',
    )
    precise = np.array([1.0 + 2**-20, 2.0], np.float32)  # low bits that BF16 cannot hold
    rounded = (precise.view(np.uint32) >> 16).astype(np.uint16)
    bf16 = np.array([0x3F80, 0xC000], np.uint16)  # 1.0, -2.0
    write_dump(ws.root / REF, {1: {"grad": {"w": precise, "v": bf16}}}, dtypes={"v": "BF16"})
    widened = np.array([1.0, -2.0], np.float32)
    write_dump(ws.root / CAND, {1: {"grad": {"w": rounded, "v": widened}}}, dtypes={"w": "BF16"})
    result, doc = check(ws, capsys, REF, CAND, "--rules", rules)
    assert result.code == 1
    assert [u["candidate"] for u in doc["unequal"]] == ["w"]  # v: BF16 widened exactly, equal
    assert doc["unequal"][0]["index"] == 0


def test_shape_and_dtype_that_cannot_match_are_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    write_dump(
        ws.root / REF,
        {1: {"grad": {"a": np.zeros((2, 3), np.float32), "b": np.zeros(3, np.float32)}}},
    )
    write_dump(
        ws.root / CAND,
        {1: {"grad": {"a": np.zeros((3, 2), np.float32), "b": np.zeros(3, np.float64)}}},
    )
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 1
    reasons = {u["candidate"]: u["reason"] for u in doc["unequal"]}
    assert "shape [2, 3] after the rules, [3, 2] in the candidate" in reasons["a"]
    assert "never cast silently" in reasons["b"]
    assert doc["first_divergence"]["index"] is None


def test_fused_parts_that_do_not_add_up_are_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = _rules(
        ws,
        '[[params.rules]]\nname = "fuse-gu"\nkind = "fuse"\n'
        'sources = ["{p}.gate", "{p}.up"]\ntarget = "{p}.gate_up"\naxis = 0\n',
    )
    write_dump(
        ws.root / REF,
        {
            1: {
                "grad": {
                    "m.gate": np.zeros((2, 3), np.float32),
                    "m.up": np.zeros((2, 4), np.float32),
                }
            }
        },
    )
    write_dump(ws.root / CAND, {1: {"grad": {"m.gate_up": np.zeros((4, 3), np.float32)}}})
    result, doc = check(ws, capsys, REF, CAND, "--rules", rules)
    assert result.code == 1
    assert any("fuse-gu" in p and "do not add up" in p for p in doc["problems"])


def test_a_rule_that_matches_nothing_is_named(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = _rules(
        ws,
        '[[params.rules]]\nname = "ghost"\nkind = "rename"\n'
        'source = "nothing.{x}"\ntarget = "else.{x}"\n',
    )
    _single(ws, np.ones(2, np.float32), np.ones(2, np.float32))
    result, doc = check(ws, capsys, REF, CAND, "--rules", rules, "--phase", "grad")
    assert result.code == 0
    assert doc["unmatched_rules"] == ["ghost"]
    text = ws.gates(capsys, "check", "tensors", REF, CAND, "--rules", rules)
    assert "unmatched_rule: ghost" in text.out


def test_missing_step_phase_and_tensor(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    _, cand = glm_dumps(ws)
    (ws.root / CAND / "tensors/step-000002/optimizer.safetensors").unlink()
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 1
    assert "step 2 optimizer: no optimizer.safetensors in the candidate dump" in doc["problems"]
    result, doc = check(ws, capsys, REF, CAND, "--steps", "1:4")
    assert "step 4: missing in the reference and candidate dump" in doc["problems"]
    assert doc["first_divergence"] is None and doc["aligned"] is False
    result, doc = check(ws, capsys, REF, CAND, "--steps", "3", "--phase", "grad")
    assert result.code == 0
    extra = dict(cand[1])
    extra["param"] = {**cand[1]["param"], "model.norm.weight": np.ones(4, np.float32)}
    write_dump(ws.root / CAND, {1: extra})
    result, doc = check(ws, capsys, REF, CAND, "--steps", "1")
    assert doc["missing"] == [
        "step 1 param: model.norm.weight has no reference tensor after the rules"
    ]


def test_unfinished_step_is_reported(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    glm_dumps(ws)
    (ws.root / CAND / "tensors/step-000003" / ORDER_FILE).unlink()
    result, doc = check(ws, capsys, REF, CAND)
    assert result.code == 1
    assert any("step-000003: no order.json" in p for p in doc["problems"])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:-4]), "incomplete metadata"),
        (lambda p: p.write_bytes(struct.pack("<Q", 2**62) + b"{}"), "header too large"),
        (lambda p: p.write_bytes(b"\x05\x00"), "shorter than 8 bytes"),
        (lambda p: p.write_bytes(struct.pack("<Q", 2) + b"[]"), "not an object"),
    ],
)
def test_truncated_or_hostile_files_are_errors_naming_the_file(
    ws: Workspace, capsys: pytest.CaptureFixture[str], damage: Any, message: str
) -> None:
    glm_dumps(ws, 1)
    target = ws.root / CAND / "tensors/step-000001/grad.safetensors"
    damage(target)
    result, _ = check(ws, capsys, REF, CAND)
    assert result.code == 2
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert "results/paddle/tensors/step-000001/grad.safetensors" in result.err
    assert message in result.err


def test_bad_layout_and_options_are_errors(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    glm_dumps(ws, 1)
    link = ws.root / CAND / "tensors/step-000001/param.safetensors"
    link.unlink()
    link.symlink_to(ws.root / REF / "tensors/step-000001/param.safetensors")
    result, _ = check(ws, capsys, REF, CAND)
    assert result.code == 2 and "symbolic link" in result.err
    write(ws.root, f"{CAND}/tensors/notes.txt", "x")
    result, _ = check(ws, capsys, REF, CAND)
    assert result.code == 2 and "notes.txt: is not a step folder" in result.err
    result, _ = check(ws, capsys, REF, "results/none")
    assert result.code == 2 and "results/none: no dump folder here" in result.err
    result, _ = check(ws, capsys, REF, REF, "--steps", "3:1")
    assert result.code == 2 and "--steps" in result.err
    order = ws.root / REF / "tensors/step-000001" / ORDER_FILE
    order.write_text('{"format": "gates.tensor_order/v1", "order": [["grad", "x"]]}')
    result, _ = check(ws, capsys, REF, REF)
    assert result.code == 2 and "order.json does not list the tensors" in result.err


def test_writer_output_is_read_alike_by_the_safetensors_library(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    for trial in range(20):
        arrays = {
            f"t{i}.{trial}": rng.standard_normal(
                tuple(rng.integers(0, 4, rng.integers(0, 4)))
            ).astype(rng.choice(["float32", "float64", "float16"]))
            for i in range(int(rng.integers(1, 5)))
        }
        write_dump(tmp_path / str(trial), {1: {"param": arrays}})
        loaded = load_file(tmp_path / str(trial) / "tensors/step-000001/param.safetensors")
        assert loaded.keys() == arrays.keys()
        for name, array in arrays.items():
            assert loaded[name].dtype == array.dtype
            assert loaded[name].tobytes() == array.tobytes()


@pytest.fixture(scope="module")
def paddle_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real Paddle runs: two repeats and one nudged by one ULP before step 2."""
    root = tmp_path_factory.mktemp("paddle")
    train_paddle(root / "a")
    train_paddle(root / "b")
    train_paddle(root / "c", perturb_step=2)
    train_paddle(
        root / "sel", record="2:3", modules=("proj*",), phases=("activation", "grad", "optimizer")
    )
    return root


def _copy_runs(ws: Workspace, source: Path) -> None:
    import shutil  # noqa: PLC0415

    for name in ("a", "b", "c", "sel"):
        shutil.copytree(source / name, ws.root / "runs" / name)


@pytest.mark.slow
def test_paddle_recorder_layout_order_and_selection(paddle_runs: Path) -> None:
    steps = sorted(p.name for p in (paddle_runs / "a/tensors").iterdir())
    assert steps == ["step-000001", "step-000002", "step-000003"]
    folder = paddle_runs / "a/tensors/step-000001"
    assert sorted(p.name for p in folder.iterdir()) == [
        "activation.safetensors",
        "grad.safetensors",
        "optimizer.safetensors",
        ORDER_FILE,
        "param.safetensors",
    ]
    order = json.loads((folder / ORDER_FILE).read_text())["order"]
    activations = [n for p, n in order if p == "activation"]
    assert activations == ["embed", "proj", "head"]
    phases = [p for p, _ in order]
    assert phases == sorted(phases, key=["activation", "grad", "optimizer", "param"].index)
    grads = [n for p, n in order if p == "grad"]
    assert grads[0].startswith("head.")  # backward runs from the output back
    optimizer = load_file(folder / "optimizer.safetensors")
    assert "proj.weight:moment1" in optimizer and "proj.weight:moment2" in optimizer
    params = load_file(folder / "param.safetensors")
    assert params["proj.weight"].shape == (8, 8)
    selected = paddle_runs / "sel/tensors"
    assert sorted(p.name for p in selected.iterdir()) == ["step-000002", "step-000003"]
    sel_order = json.loads((selected / "step-000002" / ORDER_FILE).read_text())["order"]
    assert {p for p, _ in sel_order} == {"activation", "grad", "optimizer"}
    assert all(n.startswith("proj") for _, n in sel_order)
    assert not list(paddle_runs.rglob("*.tmp"))


@pytest.mark.slow
def test_paddle_repeats_and_a_one_ulp_nudge(
    ws: Workspace, capsys: pytest.CaptureFixture[str], paddle_runs: Path
) -> None:
    _copy_runs(ws, paddle_runs)
    result, doc = check(ws, capsys, "runs/a", "runs/b")
    assert result.code == 0, result.err
    assert doc["totals"]["compared"] == doc["totals"]["equal"] > 30
    result, doc = check(ws, capsys, "runs/a", "runs/c")
    assert result.code == 1
    assert doc["first_divergence"] == {
        "step": 2,
        "phase": "activation",
        "reference": "proj",
        "candidate": "proj",
        "index": 0,
    }
    step1 = [t for t in doc["by_step"] if t["step"] == 1]
    assert all(t["unequal"] == 0 for t in step1)
    result = ws.gates(
        capsys, "check", "determinism", "runs/a", "runs/b", "runs/c", "--format", "json"
    )
    assert result.code == 1
    found = json.loads(result.out)
    assert found["deterministic"] is False
    assert found["first_divergence"]["run"] == "runs/c"
    assert found["first_divergence"]["candidate"] == "proj"
    result = ws.gates(capsys, "check", "determinism", "runs/a", "runs/b")
    assert result.code == 0, result.out
    assert "deterministic=true" in result.out


@pytest.mark.slow
def test_frozen_parameters_are_dumped_without_gradients(tmp_path: Path) -> None:
    import paddle  # noqa: PLC0415

    from gates.tensors.recorder import TensorRecorder  # noqa: PLC0415

    paddle.seed(1)
    layer = paddle.nn.Linear(3, 2)
    layer.bias.stop_gradient = True
    optimizer = paddle.optimizer.SGD(learning_rate=0.1, parameters=[layer.weight])
    with TensorRecorder(tmp_path, steps="1") as dump:
        dump.watch(layer, optimizer)
        dump.start_step(1)
        layer(paddle.ones([4, 3])).sum().backward()
        dump.record_grads()
        optimizer.step()
        dump.record_update()
    folder = tmp_path / "tensors/step-000001"
    assert set(load_file(folder / "grad.safetensors")) == {"weight"}
    assert set(load_file(folder / "param.safetensors")) == {"weight", "bias"}
    assert set(load_file(folder / "activation.safetensors")) == set()  # the layer itself
