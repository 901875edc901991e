"""Loss series: reading loss.json and raw_loss.jsonl, strictly, in one pass.

A loss series is a list of finite float64 values, one per step from step 1.
Anything else (NaN, Infinity, strings, booleans, an empty list, a missing or
repeated step) makes the file invalid: `LossFileError` names the file and the
place. JSON Schema files in receipts/schemas/ describe the same formats; the
reader does not run jsonschema over a million-element array, it checks the
same rules while it converts.
"""

from __future__ import annotations

import hashlib
import json
import math
from array import array
from dataclasses import dataclass
from pathlib import Path

from gates.canonical import DuplicateKeyError, unique_pairs
from gates.errors import GatesError

ROUNDED_DIGITS = 7


class LossFileError(GatesError):
    """A loss file that is not a valid loss series."""


@dataclass(frozen=True)
class LossSeries:
    """Losses by step (index 0 is step 1) as float64, plus what the file looked like."""

    path: str
    values: array[float]
    rounded: bool

    def __len__(self) -> int:
        return len(self.values)

    def digest(self) -> str:
        """sha256 over the little-endian float64 bytes: equal digests, bit-identical series."""
        data = self.values if _little_endian() else _swapped(self.values)
        return hashlib.sha256(data.tobytes()).hexdigest()


def _little_endian() -> bool:
    return array("H", [1]).tobytes() == b"\x01\x00"


def _swapped(values: array[float]) -> array[float]:
    copy = array("d", values)
    copy.byteswap()
    return copy


def significant_digits(value: float) -> int:
    """Digits of the shortest decimal that round-trips to ``value`` (Python's repr)."""
    mantissa = repr(abs(value)).split("e")[0].replace(".", "").strip("0")
    return max(len(mantissa), 1)


def looks_rounded(values: array[float]) -> bool:
    """True when every value has at most 7 significant digits: printed, not recorded."""
    return all(significant_digits(value) <= ROUNDED_DIGITS for value in values)


def _finite_number(value: object, where: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LossFileError(
            f"{where}: {value!r} is not a number",
            file=source,
            hint="record losses as JSON numbers (float(loss)), not strings",
        )
    number = float(value)
    if not math.isfinite(number):
        spelled = "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        raise LossFileError(
            f"{where}: {spelled} is not finite (NaN and Infinity are invalid losses)", file=source
        )
    return number


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (NaN and Infinity are invalid losses)")


def parse_loss_json(data: bytes, source: str) -> array[float]:
    """`{"losses": [...]}`: a non-empty array of finite numbers (other keys allowed)."""
    try:
        # NaN and Infinity parse here so that the check below names their place ($.losses[3])
        document = json.loads(data, object_pairs_hook=unique_pairs, parse_constant=float)
    except RecursionError:
        raise LossFileError("not valid JSON: nested too deeply", file=source) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LossFileError(f"not valid JSON: {exc}", file=source) from None
    if not isinstance(document, dict) or "losses" not in document:
        raise LossFileError("expected an object with a 'losses' array", file=source)
    losses = document["losses"]
    if not isinstance(losses, list) or not losses:
        raise LossFileError("$.losses must be a non-empty array", file=source)
    values = array("d")
    for index, value in enumerate(losses):
        values.append(_finite_number(value, f"$.losses[{index}]", source))
    return values


def parse_raw_loss_jsonl(data: bytes, source: str) -> array[float]:
    """One `{"step": N, "loss": x}` object a line, steps 1, 2, 3, ... with none missing."""
    values = array("d")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LossFileError(f"not UTF-8: {exc}", file=source) from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, DuplicateKeyError) as exc:
            raise LossFileError(f"{where}: not valid JSON: {exc}", file=source) from None
        if not isinstance(record, dict) or "step" not in record or "loss" not in record:
            raise LossFileError(f'{where}: expected {{"step", "loss"}}', file=source)
        step = record["step"]
        expected = len(values) + 1
        if isinstance(step, bool) or not isinstance(step, int) or step != expected:
            if isinstance(step, bool) or not isinstance(step, int):
                problem = "not an integer"
            else:
                problem = "a repeated step" if step < expected else "a step is missing"
            raise LossFileError(
                f"{where}: step {step!r} where step {expected} was expected ({problem})",
                file=source,
                hint="raw_loss.jsonl holds one line per step, steps 1, 2, 3, ...",
            )
        values.append(_finite_number(record["loss"], f"{where}: loss", source))
    if not values:
        raise LossFileError("no loss lines", file=source)
    return values


def parse_losses(data: bytes, source: str) -> LossSeries:
    """Parse by file name: `*.jsonl` is raw_loss, anything else loss.json."""
    parse = parse_raw_loss_jsonl if source.endswith(".jsonl") else parse_loss_json
    values = parse(data, source)
    return LossSeries(source, values, looks_rounded(values))


def read_losses(path: Path, display: str | None = None) -> LossSeries:
    source = display or str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LossFileError(f"cannot read: {exc.strerror}", file=source) from None
    return parse_losses(data, source)
