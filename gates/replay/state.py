"""The training state after a step, framework-neutral: named numpy arrays in five parts.

Arrays keep their stored precision (a bfloat16 tensor arrives as its uint16 bits),
so the digest is over the exact bytes a resume restores. The digest of a part
hashes, for every name in sorted order, a header (name, dtype, shape) and the raw
bytes; the state digest hashes the part digests, so a mismatch names its part.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gates.core.errors import GatesError
from gates.replay.names import PARTS

#: parameters, optimizer state in its stored precision, every RNG state, the data
#: loader's position, the learning-rate schedule
STATE_FORMAT = "gates.training-state/v1"


class StateFileError(GatesError):
    """A saved state that cannot be read as one."""


@dataclass(frozen=True)
class TrainingState:
    """part -> name -> array; every part present (possibly empty)."""

    parts: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.parts) - set(PARTS)
        if unknown:
            raise GatesError(
                f"unknown training-state part(s) {sorted(unknown)}",
                hint=f"the parts are {', '.join(PARTS)}",
            )
        for part in PARTS:
            self.parts.setdefault(part, {})

    def part_digests(self) -> dict[str, str]:
        return {part: part_digest(self.parts[part]) for part in PARTS}

    def digest(self) -> str:
        return state_digest(self.part_digests())


@functools.lru_cache(maxsize=65536)
def _header(name: str, dtype: str, shape: tuple[int, ...], nbytes: int) -> bytes:
    """The bytes hashed before an array's own: the same names, dtypes and shapes come
    back every step, so they are encoded once (the per-step cost is the hashing)."""
    header = json.dumps([name, dtype, list(shape)]).encode()
    return struct.pack("<QQ", len(header), nbytes) + header


def part_digest(arrays: dict[str, np.ndarray]) -> str:
    hasher = hashlib.sha256()
    for name in sorted(arrays):
        array = arrays[name]
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        hasher.update(_header(name, array.dtype.str, array.shape, array.nbytes))
        if array.nbytes:
            hasher.update(array.data)  # the buffer itself: no copy
    return hasher.hexdigest()


def state_digest(parts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def differing_parts(committed: dict[str, str], found: dict[str, str]) -> list[str]:
    return [part for part in PARTS if committed.get(part) != found.get(part)]


def save_state(state: TrainingState, path: Path) -> None:
    """One safetensors file, tensors named `<part>/<name>`, written atomically."""
    from safetensors.numpy import save  # noqa: PLC0415

    tensors = {
        f"{part}/{name}": np.ascontiguousarray(array)
        for part in PARTS
        for name, array in state.parts[part].items()
    }
    data = save(tensors, metadata={"format": STATE_FORMAT})
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    temporary.replace(path)


def load_state(path: Path, display: str) -> TrainingState:
    from safetensors import SafetensorError  # noqa: PLC0415
    from safetensors.numpy import load  # noqa: PLC0415

    try:
        tensors = load(path.read_bytes())
    except FileNotFoundError:
        raise StateFileError(f"{display}: saved state is missing", file=path) from None
    except (OSError, SafetensorError, ValueError) as exc:
        raise StateFileError(f"{display}: not a readable safetensors state: {exc}") from None
    parts: dict[str, dict[str, np.ndarray]] = {part: {} for part in PARTS}
    for key, array in tensors.items():
        part, _, name = key.partition("/")
        if part not in parts or not name:
            raise StateFileError(f"{display}: tensor {key} is not <part>/<name> of {PARTS}")
        parts[part][name] = array
    return TrainingState(parts)
