"""Writing dump files: safetensors streamed to a temp file and renamed (atomic), and the
step's order.json last."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gates.core.atomic import write_text_atomic
from gates.core.json_writer import indented_json
from gates.safetensors.dtypes import DTYPE_BITS
from gates.tensors.layout import ORDER_FILE, ORDER_FORMAT, PHASES, DumpError, step_folder_name


@dataclass(frozen=True)
class RawTensor:
    """A tensor as bytes: safetensors dtype code, shape, little-endian C-order data."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def __post_init__(self) -> None:
        expected = math.prod(self.shape) * DTYPE_BITS[self.dtype] // 8
        if len(self.data) != expected:
            raise DumpError(
                f"tensor {self.name!r}: {len(self.data)} bytes for shape {list(self.shape)} "
                f"of {self.dtype} ({expected} expected)"
            )


def safetensors_header(tensors: Sequence[RawTensor], metadata: dict[str, str]) -> bytes:
    """The length-prefixed header, padded with spaces to 8 bytes as the library does."""
    document: dict[str, object] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for tensor in tensors:
        end = offset + len(tensor.data)
        document[tensor.name] = {
            "dtype": tensor.dtype,
            "shape": list(tensor.shape),
            "data_offsets": [offset, end],
        }
        offset = end
    text = json.dumps(document, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text


def write_safetensors(path: Path, tensors: Sequence[RawTensor], metadata: dict[str, str]) -> None:
    """Stream header and tensors to a temp file beside ``path``, fsync, rename."""
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise DumpError("a tensor name is given twice", file=path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(safetensors_header(tensors, metadata))
            for tensor in tensors:
                handle.write(tensor.data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp_name).chmod(0o644)
        Path(tmp_name).replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp_name).unlink()
        raise


def write_step(
    root: Path,
    step: int,
    phases: dict[str, list[RawTensor]],
    order: Sequence[tuple[str, str]],
    *,
    framework: str,
    not_dumped: Sequence[tuple[str, str, str]] = (),
) -> Path:
    """Write one step's phase files, then its order.json (which marks the step finished);
    ``not_dumped`` names the (phase, name, why) of tensors the recorder could not copy."""
    folder = root / step_folder_name(step)
    folder.mkdir(parents=True, exist_ok=True)
    stale = folder / ORDER_FILE
    if stale.exists():
        stale.unlink()  # rewritten last: a crash below leaves the step unfinished
    for phase, tensors in phases.items():
        if phase not in PHASES:
            raise DumpError(f"unknown phase {phase!r} (one of {', '.join(PHASES)})")
        write_safetensors(
            folder / f"{phase}.safetensors",
            tensors,
            {"format": "gates.tensor_dump/v1", "framework": framework, "phase": phase},
        )
    document: dict[str, object] = {
        "format": ORDER_FORMAT,
        "step": step,
        "order": [list(item) for item in order],
    }
    if not_dumped:
        document["not_dumped"] = [list(item) for item in not_dumped]
    write_text_atomic(folder / ORDER_FILE, indented_json(document, indent=1) + "\n")
    return folder
