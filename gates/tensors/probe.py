"""Does a forward consume a tensor? Run it on a fixed batch, then again with the tensor
perturbed, and compare the output bits.

An entry point `path/to/file.py:function` (in the workspace) returns
`(forward, tensors)` or `(forward, tensors, configuration)`: `forward()` runs the model
on its fixed batch and returns the output (a Paddle or torch tensor, a numpy array, or
a ModelOutput, dict, tuple or list of them), `tensors` maps names to the live
parameters (numpy arrays are perturbed in place), and `configuration` names what the
finding depends on (`{"sequence_length": 64, "index_topk": 32}`: names to numbers,
strings or booleans), recorded with the result so that a contract can require it.
For each probed tensor two perturbations are tried (`x + 1` and `-3x + 0.5`,
element-wise), each followed by a forward; the tensor is *consumed* when either
changes one bit of the output, and its exact bits are restored before the next one.
The unperturbed forward is run twice first: if those two differ, the probe is not
repeatable and says nothing.

"Not consumed" is a finding about this forward on this batch and configuration (a
DSA indexer, say, selects every key while the sequence is not longer than its top-k),
not about every input: the tensor-inventory contract's `probe_requires` says under
which recorded configuration it explains a tensor.
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
from gates.tensors.recorder import raw_tensor, tensors_in

__all__ = ["PROBE_FORMAT", "Configuration", "Entry", "Finding", "load_entry", "probe"]


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
    tensors = list(tensors_in(output))
    if not tensors:
        raise GatesError(f"the forward returned no tensor ({type(output).__name__})")
    return b"".join(
        raw_tensor("output", t, "torch" if _framework(t) == "torch" else "paddle").data
        for t in tensors
    )


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


#: What a configuration may hold: JSON scalars only, so that a contract can compare them.
Configuration = dict[str, int | float | str | bool]


@dataclass(frozen=True)
class Entry:
    """What an entry point built: the forward, the tensors it may consume, and the
    configuration it runs under."""

    forward: Callable[[], Any]
    tensors: dict[str, Any]
    configuration: Configuration


def _configuration(value: Any, function: str, display: str) -> Configuration:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int | float | str | bool) for k, v in value.items()
    ):
        raise GatesError(
            f"{function}() must return its configuration as a mapping of names to numbers, "
            "strings or booleans",
            file=display,
        )
    return dict(value)


def _own_modules(root: Path, names: set[str]) -> list[str]:
    """The modules among ``names`` whose file lies in ``root`` (the audited workspace): the
    entry's own, removed after the import so a later probe never reuses them stale. A
    third-party module imported on the way (torch, transformers) stays: removing it makes
    its next lazy import load a second copy of a C extension into the process."""
    own = []
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and Path(file).resolve().is_relative_to(root):
            own.append(name)
    return own


def load_entry(path: Path, function: str, display: str, root: Path) -> Entry:
    """Import ``path`` (a file of the workspace at ``root``) and call ``function()``."""
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
        for name in _own_modules(root.resolve(), set(sys.modules) - before):
            del sys.modules[name]
    if not (isinstance(built, tuple) and len(built) in (2, 3) and callable(built[0])):
        raise GatesError(
            f"{function}() must return (forward, tensors) or (forward, tensors, configuration)",
            file=display,
        )
    tensors = built[1]
    if not isinstance(tensors, Mapping):
        raise GatesError(
            f"{function}() must return tensors as a name -> tensor mapping", file=display
        )
    configuration = _configuration(built[2], function, display) if len(built) == 3 else {}
    return Entry(built[0], dict(tensors), configuration)
