"""A CPU is told apart by the extensions that pick its kernels: the same build computes other
last bits with AMX or AVX512-FP16 (tests/kernels.py), so a replay there is on other hardware."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.replay.environments import environment_differences
from gates.training.env import capture, cpu_kernels

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
