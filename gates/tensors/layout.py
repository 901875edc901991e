"""The dump layout, one folder per run:

    tensors/step-NNNNNN/activation.safetensors   module-boundary outputs (forward)
    tensors/step-NNNNNN/grad.safetensors         parameter gradients (backward)
    tensors/step-NNNNNN/optimizer.safetensors    optimizer state, `<param>:<slot>`
    tensors/step-NNNNNN/param.safetensors        parameters after the update
    tensors/step-NNNNNN/order.json               every tensor of the step, in execution order

Names are the framework's own. `order.json` is written last, so a step folder
without it was never finished (a killed run) and is reported, never read.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gates.core.errors import GatesError
from gates.safetensors.header import Header, HeaderError, read_header

PHASES = ("activation", "grad", "optimizer", "param")
TENSORS_FOLDER = "tensors"
ORDER_FILE = "order.json"
ORDER_FORMAT = "gates.tensor_order/v1"
STEP_FOLDER = re.compile(r"step-(\d{6})")
SLOT_SEPARATOR = ":"


class DumpError(GatesError):
    """A dump folder that cannot be read as written; the message names the file."""


def step_folder_name(step: int) -> str:
    if not 0 <= step <= 999_999:
        raise DumpError(f"step {step} does not fit the six-digit step folder name")
    return f"step-{step:06d}"


@dataclass(frozen=True)
class StepRange:
    """`A:B` (both included), `A:` (from A on), `:B`, or `N` (one step)."""

    first: int | None = None
    last: int | None = None

    @classmethod
    def parse(cls, text: str) -> StepRange:
        start, sep, end = text.partition(":")
        try:
            first = int(start) if start.strip() else None
            last = (int(end) if end.strip() else None) if sep else first
        except ValueError:
            raise ValueError(f"{text!r}: expected A:B, A:, :B or N with step numbers") from None
        if (first is not None and first < 0) or (last is not None and last < 0):
            raise ValueError(f"{text!r}: steps are not negative")
        if first is not None and last is not None and last < first:
            raise ValueError(f"{text!r}: the range is empty ({last} < {first})")
        return cls(first, last)

    def __contains__(self, step: object) -> bool:
        if not isinstance(step, int):
            return False
        return (self.first is None or step >= self.first) and (
            self.last is None or step <= self.last
        )

    def text(self) -> str:
        first = "" if self.first is None else str(self.first)
        last = "" if self.last is None else str(self.last)
        return first if self.first == self.last and first else f"{first}:{last}"


def selected(name: str, patterns: Iterable[str]) -> bool:
    """A name matches a glob of ``patterns`` (fnmatch, `*` crosses dots)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def split_slot(name: str) -> tuple[str, str]:
    """`model.w:exp_avg` -> (`model.w`, `exp_avg`)."""
    param, sep, slot = name.rpartition(SLOT_SEPARATOR)
    if not sep or not param or not slot:
        raise DumpError(f"optimizer tensor {name!r} is not named <param>{SLOT_SEPARATOR}<slot>")
    return param, slot


@dataclass(frozen=True)
class PhaseFile:
    path: Path
    display: str
    header: Header


@dataclass(frozen=True)
class StepDump:
    step: int
    folder: Path
    display: str
    phases: dict[str, PhaseFile]
    order: tuple[tuple[str, str], ...]

    def position(self) -> dict[tuple[str, str], int]:
        return {key: index for index, key in enumerate(self.order)}


@dataclass(frozen=True)
class Dump:
    """A run's dump folder: its finished steps (incomplete ones named in ``problems``)."""

    root: Path
    display: str
    steps: dict[int, Path]
    incomplete: tuple[str, ...]


def _regular(path: Path, display: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise DumpError("no such file", file=display) from None
    if stat.S_ISLNK(info.st_mode):
        raise DumpError("is a symbolic link; dumps hold regular files only", file=display)
    if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        raise DumpError("is not a regular file", file=display)


def tensors_root(folder: Path) -> Path | None:
    """A run folder's `tensors/`, or the folder itself when it holds step folders."""
    inner = folder / TENSORS_FOLDER
    if inner.is_dir():
        return inner
    if folder.is_dir() and any(STEP_FOLDER.fullmatch(p.name) for p in folder.iterdir()):
        return folder
    return None


def open_dump(folder: Path, display: str) -> Dump:
    """List the step folders of a dump; anything else in it is an error naming it."""
    if not folder.is_dir():
        raise DumpError("no dump folder here", file=display)
    root = tensors_root(folder)
    if root is None:
        raise DumpError(f"no {TENSORS_FOLDER}/ here: this run left no tensor dump", file=display)
    shown = display if root == folder else f"{display}/{TENSORS_FOLDER}"
    _regular(root, shown)
    steps: dict[int, Path] = {}
    incomplete: list[str] = []
    for entry in sorted(root.iterdir()):
        found = STEP_FOLDER.fullmatch(entry.name)
        where = f"{shown}/{entry.name}"
        if found is None or entry.is_symlink() or not entry.is_dir():
            raise DumpError("is not a step folder (tensors/step-NNNNNN/, six digits)", file=where)
        if not (entry / ORDER_FILE).exists():
            incomplete.append(f"{where}: no {ORDER_FILE}: the step was never finished")
            continue
        steps[int(found.group(1))] = entry
    if not steps and not incomplete:
        raise DumpError("holds no step folder (tensors/step-NNNNNN/)", file=shown)
    return Dump(root, shown, steps, tuple(incomplete))


def _order(path: Path, display: str) -> tuple[tuple[str, str], ...]:
    _regular(path, display)
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise DumpError(f"not valid JSON: {exc}", file=display) from None
    if not isinstance(document, dict) or document.get("format") != ORDER_FORMAT:
        raise DumpError(f"not a tensor order file (format {ORDER_FORMAT!r})", file=display)
    order = document.get("order")
    if not isinstance(order, list) or not all(
        isinstance(item, list) and len(item) == 2 and item[0] in PHASES and isinstance(item[1], str)
        for item in order
    ):
        raise DumpError("`order` must be a list of [phase, name] pairs", file=display)
    pairs = tuple((str(a), str(b)) for a, b in order)
    if len(set(pairs)) != len(pairs):
        raise DumpError("`order` lists a tensor twice", file=display)
    return pairs


def read_step(dump: Dump, step: int, phases: Iterable[str]) -> StepDump:
    """One finished step: the headers of ``phases`` present (validated like checkpoints) and
    its order, which must list exactly the tensors of those files."""
    folder = dump.steps[step]
    display = f"{dump.display}/{folder.name}"
    order = _order(folder / ORDER_FILE, f"{display}/{ORDER_FILE}")
    found: dict[str, PhaseFile] = {}
    for phase in phases:
        path = folder / f"{phase}.safetensors"
        shown = f"{display}/{phase}.safetensors"
        if not os.path.lexists(path):
            continue
        _regular(path, shown)
        try:
            header = read_header(path)
        except HeaderError as exc:
            raise DumpError(str(exc), file=shown) from None
        except OSError as exc:
            raise DumpError(f"cannot read: {exc.strerror}", file=shown) from None
        listed = {name for p, name in order if p == phase}
        if listed != set(header.tensors):
            extra = sorted(set(header.tensors) - listed)[:3]
            absent = sorted(listed - set(header.tensors))[:3]
            raise DumpError(
                f"{ORDER_FILE} does not list the tensors of this file "
                f"(unlisted: {extra}, not in the file: {absent})",
                file=shown,
            )
        if phase == "optimizer":
            for name in header.tensors:
                try:
                    split_slot(name)
                except DumpError as exc:
                    raise DumpError(exc.message, file=shown) from None
        found[phase] = PhaseFile(path, shown, header)
    return StepDump(step, folder, display, found, order)


def dump_files(run_folder: Path) -> list[Path]:
    """Every file of a run folder's dump, sorted (none when it left no dump)."""
    root = run_folder / TENSORS_FOLDER
    if not root.is_dir() or root.is_symlink():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file())
