"""Capturing and restoring the training state of a Paddle or torch training loop.

    state = capture_paddle(parameters, optimizer, data_position=step)
    run.record(step, loss, state=state)
    ...
    position = restore_paddle(load_state(path, str(path)), parameters, optimizer)

Parameters and optimizer tensors are copied to host bytes in their stored
precision. RNG states: the framework's generators, Python's `random` and
NumPy's global generator (JSON, bytes as uint8 arrays: nothing is pickled, so a
saved state is data only). The data position is whatever the loop needs to
resume its data loader (the number of batches consumed); the schedule is the
learning rate in float64 plus the scheduler's own state (JSON).
"""

from __future__ import annotations

import json
import random
from array import array as c_array
from collections.abc import Mapping
from typing import Any

import numpy as np

from gates.core.errors import GatesError
from gates.replay.state import TrainingState


def _json_array(value: object) -> np.ndarray:
    return np.frombuffer(json.dumps(value, sort_keys=True).encode(), dtype=np.uint8).copy()


def _json_of(array: np.ndarray) -> Any:
    return json.loads(array.tobytes().decode())


def _host_rng() -> dict[str, np.ndarray]:
    """Python's and NumPy's global generators (Mersenne Twister both), as plain arrays."""
    _, keys, position, has_gauss, cached = np.random.get_state(legacy=True)
    version, internal, gauss = random.getstate()
    return {
        # through array.array: one C loop over the 625 words, not one per element
        "python.state": np.frombuffer(c_array("I", internal), dtype=np.uint32),
        "python.meta": np.asarray([version, gauss is not None, gauss or 0.0], dtype=np.float64),
        "numpy.keys": np.asarray(keys, dtype=np.uint32),
        "numpy.meta": np.asarray([position, has_gauss, cached], dtype=np.float64),
    }


def _restore_host_rng(rng: Mapping[str, np.ndarray]) -> None:
    version, has_gauss, gauss = rng["python.meta"].tolist()
    internal = tuple(int(x) for x in rng["python.state"].tolist())
    random.setstate((int(version), internal, gauss if has_gauss else None))
    position, numpy_gauss, cached = rng["numpy.meta"].tolist()
    np.random.set_state(("MT19937", rng["numpy.keys"], int(position), int(numpy_gauss), cached))


#: the last engine state seen per generator, as Paddle lists it and as bytes
_ENGINES: dict[int, tuple[list[int], np.ndarray]] = {}


def _paddle_generator(index: int, state: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(device, seed, offset, engine bytes) -> (meta int64, engine uint8). A Paddle CPU
    generator's engine state is ~6,000 small integers in a list; turning them into bytes
    costs more than a training step's worth of hashing, and most steps leave the engine as
    it was (no random op), so an equal list reuses the last (read-only) array."""
    device, seed, offset, engine = state
    meta = np.asarray([device, seed, offset], dtype=np.int64)
    last = _ENGINES.get(index)
    if last is not None and last[0] == engine:
        return meta, last[1]
    found = np.frombuffer(bytes(engine), dtype=np.uint8)  # read-only: shared by states
    _ENGINES[index] = (engine, found)
    return meta, found


def _position(data_position: int) -> dict[str, np.ndarray]:
    return {"position": np.asarray([data_position], dtype=np.int64)}


def _require(state: TrainingState, part: str, names: list[str]) -> None:
    missing = [name for name in names if name not in state.parts[part]]
    if missing:
        raise GatesError(f"saved state lacks {part} {', '.join(sorted(missing)[:3])}")


def capture_paddle(
    parameters: Mapping[str, Any], optimizer: Any, *, data_position: int
) -> TrainingState:
    import paddle  # noqa: PLC0415

    rng = _host_rng()
    for index, generator in enumerate(paddle.get_rng_state()):
        meta, engine = _paddle_generator(index, generator.__getstate__())
        rng[f"paddle.{index}.meta"], rng[f"paddle.{index}.engine"] = meta, engine
    optimizer_arrays: dict[str, np.ndarray] = {}
    scheduler: object = None
    for name, value in optimizer.state_dict().items():
        if isinstance(value, paddle.Tensor):
            optimizer_arrays[name] = value.numpy()  # a copy already (host memory of its own)
        elif name == "LR_Scheduler":
            scheduler = value
    return TrainingState(
        {
            # Tensor.numpy() copies: the state keeps the values after the step
            "parameters": {n: p.numpy() for n, p in parameters.items()},
            "optimizer": optimizer_arrays,
            "rng": rng,
            "data": _position(data_position),
            "schedule": {
                "lr": np.asarray([float(optimizer.get_lr())], dtype=np.float64),
                "scheduler": _json_array(scheduler),
            },
        }
    )


def restore_paddle(state: TrainingState, parameters: Mapping[str, Any], optimizer: Any) -> int:
    """Put a saved state back into the parameters, optimizer and RNGs; the data position."""
    import paddle  # noqa: PLC0415

    _require(state, "parameters", list(parameters))
    for name, parameter in parameters.items():
        parameter.set_value(state.parts["parameters"][name])
    optimizer_state: dict[str, Any] = {
        name: paddle.to_tensor(array) for name, array in state.parts["optimizer"].items()
    }
    scheduler = _json_of(state.parts["schedule"]["scheduler"])
    if scheduler is not None:
        optimizer_state["LR_Scheduler"] = scheduler
    if optimizer_state:
        optimizer.set_state_dict(optimizer_state)
    rng = state.parts["rng"]
    generators = []
    for index in range(len([n for n in rng if n.startswith("paddle.") and n.endswith(".meta")])):
        generator = paddle.base.libpaddle.GeneratorState.__new__(
            paddle.base.libpaddle.GeneratorState
        )
        device, seed, offset = (int(x) for x in rng[f"paddle.{index}.meta"].tolist())
        engine = rng[f"paddle.{index}.engine"].tolist()
        generator.__setstate__((device, seed, offset, engine))
        generators.append(generator)
    if generators:
        paddle.set_rng_state(generators)
    _restore_host_rng(rng)
    return int(state.parts["data"]["position"][0])


def capture_torch(
    parameters: Mapping[str, Any], optimizer: Any, *, data_position: int
) -> TrainingState:
    """The torch side (torch is optional: imported only here). The optimizer's per-parameter
    state is flattened to `state.<index>.<slot>`; its param_groups go to the schedule."""
    import torch  # noqa: PLC0415

    def host(tensor: Any) -> np.ndarray:
        detached = tensor.detach().cpu()
        if detached.dtype == torch.bfloat16:
            detached = detached.view(torch.int16)
        return np.array(detached.numpy(), copy=True)

    rng = _host_rng()
    rng["torch.cpu"] = host(torch.get_rng_state())
    if torch.cuda.is_available():
        for index, generator in enumerate(torch.cuda.get_rng_state_all()):
            rng[f"torch.cuda.{index}"] = host(generator)
    saved = optimizer.state_dict()
    optimizer_arrays = {
        f"state.{index}.{slot}": host(value if torch.is_tensor(value) else torch.tensor(value))
        for index, slots in saved["state"].items()
        for slot, value in slots.items()
    }
    return TrainingState(
        {
            "parameters": {n: host(p) for n, p in parameters.items()},
            "optimizer": optimizer_arrays,
            "rng": rng,
            "data": _position(data_position),
            "schedule": {
                "lr": np.asarray([float(saved["param_groups"][0]["lr"])], dtype=np.float64),
                "param_groups": _json_array(saved["param_groups"]),
            },
        }
    )


def restore_torch(state: TrainingState, parameters: Mapping[str, Any], optimizer: Any) -> int:
    import torch  # noqa: PLC0415

    _require(state, "parameters", list(parameters))
    with torch.no_grad():
        for name, parameter in parameters.items():
            source = torch.from_numpy(state.parts["parameters"][name].copy())
            if parameter.dtype == torch.bfloat16:
                source = source.view(torch.bfloat16)
            parameter.copy_(source)
    slots: dict[int, dict[str, Any]] = {}
    for key, array in state.parts["optimizer"].items():
        _, index, slot = key.split(".", 2)
        slots.setdefault(int(index), {})[slot] = torch.from_numpy(array.copy())
    optimizer.load_state_dict(
        {"state": slots, "param_groups": _json_of(state.parts["schedule"]["param_groups"])}
    )
    rng = state.parts["rng"]
    torch.set_rng_state(torch.from_numpy(rng["torch.cpu"].copy()))
    cuda = sorted(n for n in rng if n.startswith("torch.cuda."))
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.from_numpy(rng[n].copy()) for n in cuda])
    _restore_host_rng(rng)
    return int(state.parts["data"]["position"][0])
