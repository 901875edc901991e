"""A CPU is told apart by the extensions that pick its kernels: the same build computes other
last bits with AMX or AVX512-FP16 (tests/kernels.py), so a replay there is on other hardware."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from gates.replay.environments import environment_differences
from gates.training.env import capture, cpu_kernels
from tests.kernels import assert_close_files

X86 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f amx_tile avx512_fp16 ht\nbugs\t: x\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve i8mm bf16\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (X86, "amx_tile avx2 avx512_fp16 avx512f fma"),
        (ARM, "asimd bf16 i8mm sve"),
        ("processor\t: 0\n", None),  # no flags line: not known, never "none"
        ("flags\t\t: fpu sse2\n", ""),  # known, and none that picks a kernel
    ],
)
def test_the_kernel_deciding_extensions_are_read_from_cpuinfo(
    tmp_path: Path, text: str, expected: str | None
) -> None:
    (tmp_path / "cpuinfo").write_text(text)
    assert cpu_kernels(tmp_path / "cpuinfo") == expected


def test_no_cpuinfo_is_unknown(tmp_path: Path) -> None:
    assert cpu_kernels(tmp_path / "absent") is None


def test_a_replay_on_other_extensions_is_on_other_hardware() -> None:
    run = {"framework": "torch", "device_name": "cpu", "cpu_kernels": "avx2 avx512f fma"}
    replay = {**run, "cpu_kernels": "amx_tile avx2 avx512_fp16 avx512f fma"}
    (found,) = environment_differences(run, replay)
    assert (found.field, found.kind) == ("cpu_kernels", "hardware")
    assert environment_differences(run, dict(run)) == ()
    older = {k: v for k, v in run.items() if k != "cpu_kernels"}  # recorded before the field
    assert environment_differences(older, replay) == ()


def test_the_capture_records_this_cpu() -> None:
    assert capture(framework=None)["cpu_kernels"] == cpu_kernels()


def test_the_comparison_on_other_kernels_takes_last_bits_and_refuses_more(tmp_path: Path) -> None:
    """tests/kernels.py's `assert_close_files`, which the byte tests fall back to on such a
    CPU: a last-bit change passes, a change of one part in a thousand, a missing tensor or
    another shape fails, and so does any change to a file that holds no floats."""
    weights = {"w": np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)}
    save_file(weights, str(tmp_path / "recorded.safetensors"))
    nudged = {"w": np.nextafter(weights["w"], np.float32(2))}
    save_file(nudged, str(tmp_path / "nudged.safetensors"))
    assert_close_files(tmp_path / "nudged.safetensors", tmp_path / "recorded.safetensors")
    spoiled = [
        {"w": weights["w"] * np.float32(1.001)},
        {"w": weights["w"].reshape(4, 16)},
        {"v": weights["w"]},
    ]
    for number, tensors in enumerate(spoiled):
        save_file(tensors, str(tmp_path / f"spoiled{number}.safetensors"))
        with pytest.raises(AssertionError):
            assert_close_files(
                tmp_path / f"spoiled{number}.safetensors", tmp_path / "recorded.safetensors"
            )
    losses = [4.473308086395264, 4.391336441040039]
    (tmp_path / "recorded.json").write_text(json.dumps({"losses": losses, "run_id": "a"}))
    (tmp_path / "last_bit.json").write_text(
        json.dumps({"losses": [math.nextafter(x, 9) for x in losses], "run_id": "a"})
    )
    assert_close_files(tmp_path / "last_bit.json", tmp_path / "recorded.json")
    for other in ({"losses": [4.48, losses[1]], "run_id": "a"}, {"losses": losses, "run_id": "b"}):
        (tmp_path / "other.json").write_text(json.dumps(other))
        with pytest.raises(AssertionError):
            assert_close_files(tmp_path / "other.json", tmp_path / "recorded.json")
    (tmp_path / "recorded.jsonl").write_text('{"step": 1, "loss": 4.47}\n')
    (tmp_path / "other.jsonl").write_text('{"step": 2, "loss": 4.47}\n')
    with pytest.raises(AssertionError):
        assert_close_files(tmp_path / "other.jsonl", tmp_path / "recorded.jsonl")
