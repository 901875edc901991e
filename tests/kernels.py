"""Which CPU kernels the example's recorded bytes came from, and how to compare a run made
with others.

The example's runs (examples/glm52-minimal) were recorded on Intel x86-64 CPUs with AVX-512
and VNNI, and their bytes were seen to reproduce there and on an AMD EPYC that shows AVX2
and FMA only (`REPRODUCING_KERNELS`). On CPUs with more (IFMA and VBMI on Ice Lake, AMX and
AVX512-FP16 on Sapphire Rapids), MKL and torch choose other kernels (no ISA cap through
MKL_CBWR, ONEDNN_MAX_CPU_ISA or ATEN_CPU_CAPABILITY restored the recorded bits on the
latter), and the losses differ in their last bits from about the tenth step. There, and
wherever the CPU's kernels are not known, the tests that compare recorded bytes compare the
numbers within a tolerance instead, and a run is still held to itself bit for bit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from gates.commands.demo import kernels_unlike_recording
from gates.training.env import cpu_kernels

RELATIVE = 1e-4  # a loss's drift over 100 steps of other kernels is about 1e-7


def kernels_as_recorded() -> bool:
    return kernels_unlike_recording(cpu_kernels()) == []


def assert_close_files(ours: Path, recorded: Path) -> None:
    """The same file but for the last bits of its floats: tensors, JSON and JSON lines."""
    if recorded.suffix == ".safetensors":
        mine, theirs = load_file(str(ours)), load_file(str(recorded))
        assert mine.keys() == theirs.keys(), ours
        for name, expected in theirs.items():
            got = mine[name]
            assert (got.dtype, got.shape) == (expected.dtype, expected.shape), (ours, name)
            scale = float(np.abs(expected).max()) if expected.size else 0.0
            assert np.allclose(got, expected, rtol=RELATIVE, atol=RELATIVE * scale), (ours, name)
    elif recorded.suffix == ".json":
        _assert_close(json.loads(ours.read_text()), json.loads(recorded.read_text()), ours)
    elif recorded.suffix == ".jsonl":
        lines = zip(ours.read_text().splitlines(), recorded.read_text().splitlines(), strict=True)
        for mine, theirs in lines:
            _assert_close(json.loads(mine), json.loads(theirs), ours)
    else:
        assert ours.read_bytes() == recorded.read_bytes(), ours


def _assert_close(mine: object, theirs: object, where: Path) -> None:
    if isinstance(theirs, float) and isinstance(mine, float):
        assert math.isclose(mine, theirs, rel_tol=RELATIVE, abs_tol=1e-9), (where, mine, theirs)
    elif isinstance(theirs, dict) and isinstance(mine, dict):
        assert mine.keys() == theirs.keys(), where
        for key, value in theirs.items():
            _assert_close(mine[key], value, where)
    elif isinstance(theirs, list) and isinstance(mine, list):
        assert len(mine) == len(theirs), where
        for got, expected in zip(mine, theirs, strict=True):
            _assert_close(got, expected, where)
    else:
        assert mine == theirs, (where, mine, theirs)
