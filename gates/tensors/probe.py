"""Does a forward consume a tensor? Run it on a fixed batch, then again with the tensor
perturbed, and compare the output bits.

An entry point `path/to/file.py:function` (in the workspace) returns
`(forward, tensors)`: `forward()` runs the model on its fixed batch and returns the
output (a Paddle or torch tensor, or a numpy array), `tensors` maps names to the live
parameters (numpy arrays are perturbed in place). For each probed tensor two
perturbations are tried (`x + 1` and `-3x + 0.5`, element-wise), each followed by a
forward; the tensor is *consumed* when either changes one bit of the output, and its
exact bits are restored before the next one. The unperturbed forward is run twice
first: if those two differ, the probe is not repeatable and says nothing.

"Not consumed" is a finding about this forward on this batch and configuration (a
DSA indexer, say, selects every key while the sequence is shorter than its top-k),
not about every input.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gates.core.errors import GatesError
from gates.tensors.probe_format import PROBE_FORMAT
from gates.tensors.recorder import raw_tensor

__all__ = ["PROBE_FORMAT", "Finding", "load_entry", "probe"]


@dataclass(frozen=True)
class Finding:
    name: str
    consumed: bool
    dtype: str
    shape: tuple[int, ...]


def _framework(value: Any) -> str:
    module = type(value).__module__.split(".", 1)[0]
    return "torch" if module == "torch" else "paddle" if module == "paddle" else "numpy"


def _bits(output: Any) -> bytes:
    if isinstance(output, (tuple, list)):
        return b"".join(_bits(item) for item in output)
    framework = _framework(output)
    return raw_tensor("output", output, "torch" if framework == "torch" else "paddle").data


def _host(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value.copy()
    if _framework(value) == "torch":
        return np.array(value.detach().cpu().numpy(), copy=True)
    return np.array(value.numpy(), copy=True)


def _assign(target: Any, values: np.ndarray) -> None:
    if isinstance(target, np.ndarray):
        target[...] = values
    elif _framework(target) == "torch":
        import torch  # noqa: PLC0415

        with torch.no_grad():
            target.copy_(torch.from_numpy(values))
    else:
        target.set_value(values)


def _perturbations(original: np.ndarray) -> list[np.ndarray]:
    if not np.issubdtype(original.dtype, np.floating):
        return [original + 1]
    return [
        (original + 1).astype(original.dtype),
        (original * -3 + 0.5).astype(original.dtype),
    ]


def probe(
    forward: Callable[[], Any], tensors: Mapping[str, Any], names: Sequence[str]
) -> tuple[bool, list[Finding]]:
    """(repeatable, one finding per name)."""
    unknown = [name for name in names if name not in tensors]
    if unknown:
        raise GatesError(f"the entry point has no tensor named {unknown[0]!r}")
    baseline = _bits(forward())
    if _bits(forward()) != baseline:
        return False, []
    findings = []
    for name in names:
        target = tensors[name]
        original = _host(target)
        consumed = False
        try:
            for values in _perturbations(original):
                _assign(target, values)
                if _bits(forward()) != baseline:
                    consumed = True
                    break
        finally:
            _assign(target, original)
        raw = raw_tensor(name, original, "paddle")
        findings.append(Finding(name, consumed, raw.dtype, raw.shape))
    if _bits(forward()) != baseline:
        raise GatesError("the forward changed after every tensor was restored: not a pure forward")
    return True, findings


def load_entry(path: Path, function: str, display: str) -> tuple[Callable[[], Any], dict[str, Any]]:
    """Import ``path`` and call ``function()`` -> (forward, tensors)."""
    spec = importlib.util.spec_from_file_location(f"gates_probe_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise GatesError("cannot import this file", file=display)
    module = importlib.util.module_from_spec(spec)
    before = set(sys.modules)
    sys.path.insert(0, str(path.parent))
    bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in the tree
    try:
        spec.loader.exec_module(module)
        build = getattr(module, function, None)
        if not callable(build):
            raise GatesError(f"no function {function!r} in it", file=display)
        built = build()
    finally:
        sys.dont_write_bytecode = bytecode
        sys.path.remove(str(path.parent))
        for name in set(sys.modules) - before:  # the entry's own modules: never reused stale
            del sys.modules[name]
    if not (isinstance(built, tuple) and len(built) == 2 and callable(built[0])):
        raise GatesError(f"{function}() must return (forward, tensors)", file=display)
    forward, tensors = built
    if not isinstance(tensors, Mapping):
        raise GatesError(
            f"{function}() must return tensors as a name -> tensor mapping", file=display
        )
    return forward, dict(tensors)
