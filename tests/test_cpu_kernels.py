"""A CPU is told apart by its vendor and the extensions that pick its kernels: the same build
computes other last bits with IFMA and VBMI (Ice Lake) or AMX and AVX512-FP16 (Sapphire
Rapids) than on the CPUs that recorded the example (tests/kernels.py), so a replay there is
on other hardware."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from gates.commands.demo import kernels_note, kernels_unlike_recording
from gates.replay.environments import environment_differences
from gates.training.env import capture, cpu_kernels
from tests.kernels import assert_close_files

X86 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f amx_tile avx512_fp16 ht\nbugs\t: x\n"
AVX512 = "avx avx2 fma avx512f avx512cd avx512bw avx512vl avx512dq"
CASCADE_LAKE = f"vendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 {AVX512} avx512_vnni ht\n"
ICE_LAKE = (
    f"vendor_id\t: GenuineIntel\nflags\t\t: fpu {AVX512} avx512_vnni avx512ifma avx512vbmi"
    " avx512_vbmi2 avx512_bitalg avx512_vpopcntdq gfni vaes\n"
)
ZEN4 = f"vendor_id\t: AuthenticAMD\nflags\t\t: fpu {AVX512} avx512_vnni avx512_bf16\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve i8mm bf16\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (X86, "amx_tile avx2 avx512_fp16 avx512f fma"),
        (ARM, "asimd bf16 i8mm sve"),
        (
            CASCADE_LAKE,
            "vendor:GenuineIntel avx avx2 avx512_vnni avx512bw avx512dq avx512f avx512vl fma",
        ),
        (
            ICE_LAKE,
            "vendor:GenuineIntel avx avx2 avx512_bitalg avx512_vbmi2 avx512_vnni"
            " avx512_vpopcntdq avx512bw avx512dq avx512f avx512ifma avx512vbmi avx512vl fma",
        ),
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


SAPPHIRE_RAPIDS = (
    f"vendor_id\t: GenuineIntel\nflags\t\t: fpu {AVX512} avx512_vnni avx512_bf16 amx_tile"
    " avx512_fp16\n"
)
AVX2_ONLY = "vendor_id\t: GenuineIntel\nflags\t\t: fpu avx avx2 fma\n"
#: an AMD EPYC as a VM shows it: the recorded bytes reproduce there (found 2026-12-03)
EPYC_GUEST = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma ht\n"
#: an Arm CPU has none of the x86 extensions: nearest is the smaller of the two sets
ARM_UNLIKE = ["+asimd", "+bf16", "+i8mm", "+sve", "-avx", "-avx2", "-fma", "-vendor:AuthenticAMD"]


@pytest.mark.parametrize(
    ("text", "unlike"),
    [
        (CASCADE_LAKE, []),  # the example's recorded bytes are compared bit for bit here
        (
            ICE_LAKE,
            ["+avx512_bitalg", "+avx512_vbmi2", "+avx512_vpopcntdq", "+avx512ifma", "+avx512vbmi"],
        ),
        (SAPPHIRE_RAPIDS, ["+amx_tile", "+avx512_bf16", "+avx512_fp16"]),
        (ZEN4, ["+avx512_bf16", "+vendor:AuthenticAMD", "-vendor:GenuineIntel"]),
        (EPYC_GUEST, []),
        # an Intel CPU with AVX2 only is neither: the nearest set differs in its vendor alone
        (AVX2_ONLY, ["+vendor:GenuineIntel", "-vendor:AuthenticAMD"]),
        (ARM, ARM_UNLIKE),
    ],
)
def test_a_cpu_unlike_the_recording_ones_says_how_it_differs(
    tmp_path: Path, text: str, unlike: list[str]
) -> None:
    """The example's recorded bytes reproduce on two sets of kernels (Intel's AVX-512 with
    VNNI, an AMD guest's AVX2): on any other, with more or with less, the recorded last bits
    are not expected (the demo names how it differs from the nearest)."""
    (tmp_path / "cpuinfo").write_text(text)
    assert kernels_unlike_recording(cpu_kernels(tmp_path / "cpuinfo")) == unlike


def test_the_demo_explains_a_failed_torch_replay_unless_the_kernels_are_the_recorded_ones() -> None:
    """Where the recorded bytes reproduce, a failed replay is not the kernels' and no note
    excuses it; elsewhere, and where the CPU's kernels are not known, the note says so."""
    assert kernels_note([]) is None
    other = kernels_note(["+avx512ifma", "-vendor:AuthenticAMD"])
    assert other is not None
    assert "(this one's kernels against those it reproduces on: +avx512ifma" in other
    unknown = kernels_note(None)
    assert unknown is not None
    assert "another CPU (this one's kernels not known)" in unknown


def test_kernels_not_known_are_never_the_recorded_ones(tmp_path: Path) -> None:
    assert kernels_unlike_recording(cpu_kernels(tmp_path / "absent")) is None


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
