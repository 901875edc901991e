"""Recording named tensors per step from inside the training code (Paddle or torch).

    from gates.tensors.recorder import TensorRecorder

    with TensorRecorder(framework="paddle", steps="1:3", modules=["model.layers.0.*"]) as dump:
        dump.watch(model, optimizer)            # module hooks, parameters, optimizer state
        for step in range(1, 101):
            dump.start_step(step)
            loss = model(batch); loss.backward()
            dump.record_grads()                 # before the optimizer consumes them
            optimizer.step()
            dump.record_update()                # optimizer state, parameters; writes the step
            optimizer.clear_grad()

Forward outputs of watched modules whose names match `modules` (globs) are
recorded as activations; `activation(name, tensor)` records one by hand (for
code that is not a module). Gradients are taken from `.grad` after the
backward, in the order their backward hooks fired; optimizer state as
`<param>:<slot>` (torch `exp_avg`, `exp_avg_sq`, `momentum_buffer`; Paddle
`moment1`, `moment2`, `velocity`). A module called twice in one step records
its second output as `<name>#2`. A module's output may be what real model
code returns: a tensor, a ModelOutput of transformers or PaddleFormers, a dict,
nested tuples or lists (None and non-tensors among them); its first tensor, depth
first, is recorded. A tensor that cannot be dumped (an output holding no tensor, a
dtype safetensors has no code for, a conversion that fails) never stops the run: it
is named with the reason in the step's `order.json` (`not_dumped`) and in
`not_dumped`, and the step goes on. Steps not selected cost nothing but the
hook call. The run folder is GATES_RUN_DIR (or given); the dump goes to its
`tensors/`. Used alone inside a gates workspace, `finish()` receipts the
dump; under `gates run`, the run does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from gates.core.errors import GatesError
from gates.core.run_protocol import RunProtocol, protocol, rank_folder
from gates.tensors.layout import (
    PHASES,
    SLOT_SEPARATOR,
    TENSORS_FOLDER,
    StepRange,
    dump_files,
    selected,
)
from gates.tensors.writer import RawTensor, write_step

#: Framework dtype names (the part after `paddle.` / `torch.`) -> safetensors codes.
DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}

OPTIMIZER_SLOTS = {
    "torch": ("exp_avg", "exp_avg_sq", "momentum_buffer"),
    "paddle": ("moment1", "moment2", "velocity"),
}


def raw_tensor(name: str, tensor: Any, framework: str) -> RawTensor:
    """Copy a Paddle or torch tensor (or numpy array) to host bytes, bit for bit."""
    if isinstance(tensor, np.ndarray):
        array = tensor
        code = DTYPES.get(str(array.dtype))
    else:
        kind = str(tensor.dtype).rsplit(".", 1)[-1]
        code = DTYPES.get(kind)
        if framework == "torch":
            host = tensor.detach().cpu().contiguous()
            if kind == "bfloat16":
                import torch  # noqa: PLC0415  (only where torch is in use)

                host = host.view(torch.int16)
            array = host.numpy()
        else:
            array = tensor.detach().numpy() if hasattr(tensor, "detach") else tensor.numpy()
    if code is None:
        raise GatesError(f"tensor {name!r}: dtype {tensor.dtype} cannot be dumped")
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
    return RawTensor(name, code, tuple(int(d) for d in array.shape), data.tobytes())


def _is_tensor(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return True
    root = type(value).__module__.split(".", 1)[0]
    return root in {"torch", "paddle"} and hasattr(value, "dtype") and hasattr(value, "shape")


def tensors_in(value: Any) -> Iterator[Any]:
    """The tensors of a forward's output, depth first: through mappings (a ModelOutput of
    either library is an OrderedDict), tuples and lists; None and other values skipped."""
    if _is_tensor(value):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from tensors_in(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_in(item)


def first_tensor(output: Any) -> Any | None:
    """The tensor a module boundary records of ``output`` (None when it holds none)."""
    return next(tensors_in(output), None)


def _kind(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


class TensorRecorder:
    """Dumps activations, gradients, optimizer state and parameters of selected steps."""

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        framework: str = "paddle",
        steps: str | Iterable[int] | None = None,
        modules: Iterable[str] = ("*",),
        phases: Iterable[str] = PHASES,
        optimizer_slots: Iterable[str] | None = None,
    ) -> None:
        self.protocol: RunProtocol = protocol()
        chosen = folder or self.protocol.run_dir
        if chosen is None:
            raise GatesError("no run folder: pass one, or run under `gates run`")
        if framework not in OPTIMIZER_SLOTS:
            raise GatesError(f"framework {framework!r}: expected paddle or torch")
        self.folder = rank_folder(Path(chosen))
        self.root = self.folder / TENSORS_FOLDER
        self.framework = framework
        self.steps: StepRange | frozenset[int] = (
            StepRange()
            if steps is None
            else StepRange.parse(steps)
            if isinstance(steps, str)
            else frozenset(steps)
        )
        self.modules = tuple(modules)
        self.phases = tuple(phases)
        unknown = [p for p in self.phases if p not in PHASES]
        if unknown:
            raise GatesError(f"unknown phase(s) {unknown}: choose from {', '.join(PHASES)}")
        self.slots = tuple(optimizer_slots or OPTIMIZER_SLOTS[framework])
        self.parameters: dict[str, Any] = {}
        self.optimizer: Any = None
        self.written: list[Path] = []
        #: (step, phase, name, why) of every tensor of a selected step that was not dumped
        self.not_dumped: list[tuple[int, str, str, str]] = []
        self._hooks: list[Any] = []
        self._step: int | None = None
        self._tensors: dict[str, list[RawTensor]] = {}
        self._order: list[tuple[str, str]] = []
        self._skipped: list[tuple[str, str, str]] = []
        self._grad_order: list[str] = []
        self._calls: dict[str, int] = {}

    # -- what to watch -------------------------------------------------------------------
    def watch(
        self,
        model: Any = None,
        optimizer: Any = None,
        *,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        """Hook the modules of ``model``, and take its (or the given) named parameters."""
        if model is not None:
            named = model.named_modules() if self.framework == "torch" else model.named_sublayers()
            for name, module in named:
                if name and selected(name, self.modules):
                    self._hooks.append(
                        module.register_forward_post_hook(self._forward_hook(name))
                        if self.framework == "paddle"
                        else module.register_forward_hook(self._forward_hook(name))
                    )
        given = (
            dict(parameters)
            if parameters is not None
            else (dict(model.named_parameters()) if model is not None else {})
        )
        for name, parameter in given.items():
            if not selected(name, self.modules):
                continue
            self.parameters[name] = parameter
            frozen = (
                not parameter.requires_grad
                if self.framework == "torch"
                else bool(getattr(parameter, "stop_gradient", False))
            )
            if not frozen:  # a frozen parameter has no gradient and takes no hook
                self._hooks.append(parameter.register_hook(self._grad_hook(name)))
        if optimizer is not None:
            self.optimizer = optimizer

    def _forward_hook(self, name: str) -> Any:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            self.activation(name, output)

        return hook

    def _grad_hook(self, name: str) -> Any:
        def hook(grad: Any) -> None:
            if self._active("grad") and name not in self._grad_order:
                self._grad_order.append(name)

        return hook

    # -- the step ------------------------------------------------------------------------
    def _active(self, phase: str) -> bool:
        return self._step is not None and phase in self.phases

    def start_step(self, step: int) -> None:
        """Begin step ``step``; nothing is kept unless it is a selected step."""
        self._step = step if step in self.steps else None
        self._tensors = {phase: [] for phase in self.phases}
        self._order = []
        self._skipped = []
        self._grad_order = []
        self._calls = {}

    def _keep(self, phase: str, name: str, tensor: Any) -> None:
        """Copy one tensor of the step; one that cannot be copied is named, never raised:
        the recorder must not end the training run it watches."""
        try:
            raw = raw_tensor(name, tensor, self.framework)
        except GatesError as exc:
            self._skip(phase, name, exc.message)
            return
        except Exception as exc:  # noqa: BLE001  (the framework's own failure, named instead)
            self._skip(phase, name, f"cannot be copied: {type(exc).__name__}: {exc}"[:300])
            return
        if name in {t.name for t in self._tensors[phase]}:
            self._skip(phase, name, "recorded twice in this step: the first is kept")
            return
        self._tensors[phase].append(raw)
        self._order.append((phase, name))

    def _skip(self, phase: str, name: str, why: str) -> None:
        self._skipped.append((phase, name, why))
        if self._step is not None:
            self.not_dumped.append((self._step, phase, name, why))

    def activation(self, name: str, output: Any) -> None:
        """Record a forward output at a boundary (also called by the module hooks): a
        tensor, or the first tensor of a ModelOutput, dict, tuple or list."""
        if not self._active("activation") or not selected(name, self.modules):
            return
        calls = self._calls[name] = self._calls.get(name, 0) + 1
        shown = name if calls == 1 else f"{name}#{calls}"
        tensor = first_tensor(output)
        if tensor is None:
            self._skip("activation", shown, f"the output holds no tensor ({_kind(output)})")
            return
        self._keep("activation", shown, tensor)

    def record_grads(self) -> None:
        """After the backward: every watched parameter's gradient, in backward order."""
        if not self._active("grad"):
            return
        rest = [n for n in self.parameters if n not in self._grad_order]
        for name in [*self._grad_order, *rest]:
            grad = self.parameters[name].grad
            if grad is not None:
                self._keep("grad", name, grad)

    def _optimizer_state(self) -> list[tuple[str, Any]]:
        if self.optimizer is None:
            return []
        found: list[tuple[str, Any]] = []
        if self.framework == "torch":
            for name, parameter in self.parameters.items():
                state = self.optimizer.state.get(parameter, {})
                found += [
                    (f"{name}{SLOT_SEPARATOR}{s}", state[s]) for s in self.slots if s in state
                ]
            return found
        accumulators = getattr(self.optimizer, "_accumulators", {})
        for name, parameter in self.parameters.items():
            for slot in self.slots:
                tensor = accumulators.get(slot, {}).get(parameter.name)
                if tensor is not None:
                    found.append((f"{name}{SLOT_SEPARATOR}{slot}", tensor))
        return found

    def record_update(self) -> None:
        """After the optimizer step: its state and the parameters; then write the step."""
        if self._step is None:
            return
        if "optimizer" in self.phases:
            for name, tensor in self._optimizer_state():
                self._keep("optimizer", name, tensor)
        if "param" in self.phases:
            for name, parameter in self.parameters.items():
                self._keep("param", name, parameter)
        self.written.append(
            write_step(
                self.root,
                self._step,
                self._tensors,
                self._order,
                framework=self.framework,
                not_dumped=self._skipped,
            )
        )
        self._step = None

    # -- the end -------------------------------------------------------------------------
    def finish(self) -> None:
        """Remove the hooks; receipt the dump when used alone in a gates workspace."""
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        if not self.protocol.under_gates_run and self.written:
            receipt_dump(self.folder, self.framework, self.protocol.signing_key)

    def __enter__(self) -> TensorRecorder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is None:
            self.finish()
        else:
            for handle in self._hooks:
                handle.remove()


def receipt_dump(folder: Path, framework: str, signing_key: Path | None = None) -> None:
    """Outside `gates run`: one tensor_dump receipt over the dump, if in a gates workspace
    (signed with the key at ``signing_key``, if any)."""
    from gates.core.paths import is_under  # noqa: PLC0415
    from gates.receipts.create import ReceiptRequest, create_receipt  # noqa: PLC0415
    from gates.receipts.model import ArtifactKind, Framework  # noqa: PLC0415
    from gates.trust.keys import configured_key  # noqa: PLC0415
    from gates.workspace.repository import open_workspace  # noqa: PLC0415

    try:
        workspace = open_workspace(folder)
    except GatesError:
        return
    base = folder.resolve().relative_to(workspace.root)
    if not is_under(base.as_posix(), workspace.config.evidence.locations):
        return  # not an evidence location: nothing there is ever judged
    subjects = tuple(
        (base / p.relative_to(folder)).as_posix() for p in dump_files(folder.resolve())
    )
    request = ReceiptRequest(
        kind=ArtifactKind.TENSOR_DUMP,
        subjects=subjects,
        framework=Framework(framework),
        output=f"{base.as_posix()}/{TENSORS_FOLDER}.receipt.json",
        overwrite=True,
    )
    create_receipt(workspace, request, signing_key=configured_key(signing_key))
