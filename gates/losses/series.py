"""Loss series: reading loss.json and raw_loss.jsonl, strictly, in one streamed pass.

A loss series is a list of finite float64 values, one per step from step 1.
Anything else (NaN, Infinity, strings, booleans, an empty list, a missing or
repeated step) makes the file invalid: `LossFileError` names the file and the
place (`$.losses[3]`, `line 7`). JSON Schema files in receipts/schemas/
describe the same formats; the reader does not run jsonschema over a
million-element array, it checks the same rules while it converts.

The file is read in blocks of `BLOCK` bytes and never held whole: the
`losses` array is converted block by block (the C JSON decoder on the numbers
of one block at a time, into a float64 `array`), and everything around it (the
other keys) is kept as a small skeleton that the strict parser checks once at
the end (duplicate keys, NaN/Infinity, syntax). Memory is the float64 values
(8 bytes a step, less than half of the file) plus one block.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gates.core.content_ids import DuplicateKeyError, strict_loads, unique_pairs
from gates.core.errors import GatesError

ROUNDED_DIGITS = 7
BLOCK = 1 << 20

# Bytes a valid run of JSON numbers can hold: digits, sign, point, exponent,
# separators, JSON whitespace. A block with anything else is looked at element
# by element (it is an error, found and named there).
_NUMBER_BYTES = b"0123456789+-.eE, \t\n\r"
_WHITESPACE = b" \t\n\r"
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OTHER_TOP = re.compile(rb'[^"{}\[\]:,]+')
_OTHER_DEEP = re.compile(rb'[^"{}\[\]]+')
_STRUCTURAL = (b"{", b"[", b"}", b"]", b":", b",")


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
        return hashlib.sha256(data).hexdigest()  # the buffer itself, not a copy


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


class _Series:
    """The values read so far, and whether every one of them looks rounded."""

    def __init__(self) -> None:
        self.values: array[float] = array("d")
        self.rounded = True

    def extend(self, numbers: list[float] | array[float]) -> None:
        start = len(self.values)
        self.values.extend(numbers)
        if self.rounded:  # stops at the first recorded (unrounded) value
            self.rounded = looks_rounded(self.values[start:])


def _finite_number(value: object, where: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LossFileError(
            f"{where}: {value!r} is not a number",
            file=source,
            hint="record losses as JSON numbers (float(loss)), not strings",
        )
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        spelled = "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        raise LossFileError(
            f"{where}: {spelled} is not finite (NaN and Infinity are invalid losses)", file=source
        )
    return number


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (NaN and Infinity are invalid losses)")


# the constants are read as floats here, so that _finite_number names them ("$.losses[3]:
# NaN is not finite"): this decoder only looks for the fault in a block already refused
_ELEMENT = json.JSONDecoder(parse_constant=float, object_pairs_hook=unique_pairs)


def _bad_element(text: bytes, first_index: int, offset: int, source: str) -> LossFileError:
    """Name the first invalid element of ``text`` (the rest of the losses array).

    Only reached for a block the fast path refused, which a valid array never
    is; so it reads element by element, in Python, and always finds the fault.
    """
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        decoded = text[: exc.start].decode("utf-8")
    position, index = 0, first_index
    while True:
        where = f"$.losses[{index}]"
        while position < len(decoded) and decoded[position] in " \t\n\r":
            position += 1
        try:
            value, end = _ELEMENT.raw_decode(decoded, position)
        except json.JSONDecodeError as exc:
            at = offset + len(decoded[: exc.pos].encode("utf-8"))
            return LossFileError(f"{where}: not valid JSON: {exc.msg} (byte {at})", file=source)
        except ValueError as exc:
            return LossFileError(f"{where}: not valid JSON: {exc}", file=source)
        _finite_number(value, where, source)
        position = end
        while position < len(decoded) and decoded[position] in " \t\n\r":
            position += 1
        if position >= len(decoded) or decoded[position] != ",":
            at = offset + len(decoded[:position].encode("utf-8"))
            return LossFileError(
                f"{where}: not valid JSON: expected ',' or ']' after the value (byte {at})",
                file=source,
            )
        position += 1
        index += 1


class _LossJsonReader:
    """One pass over a loss.json: the losses array streamed, the rest kept as a skeleton.

    ``buffer[pos:]`` is what has been read and not yet consumed; ``offset`` is
    the file offset of ``buffer[0]`` (for the byte named in an error).
    """

    def __init__(self, stream: BinaryIO, source: str, head: bytes) -> None:
        self.stream, self.source = stream, source
        self.series = _Series()
        self.skeleton = bytearray()
        self.buffer, self.pos, self.offset = head, 0, 0
        self.eof = False
        self.depth = 0
        self.top_is_object = False
        self.expect_key = False
        self.key: object = None
        self.after_colon = False
        self.comma_pending = False
        self.seen_array = False

    def _fill(self) -> bool:
        """Append a block to the unconsumed bytes; False at the end of the file."""
        if self.eof:
            return False
        block = self.stream.read(BLOCK)
        if not block:
            self.eof = True
            return False
        self.offset += self.pos
        self.buffer = self.buffer[self.pos :] + block
        self.pos = 0
        return True

    def _take(self, end: int) -> bytes:
        taken = self.buffer[self.pos : end]
        self.pos = end
        return taken

    def _rest_of_file(self) -> bytes:
        rest = [self.buffer[self.pos :]]
        while self._fill():
            rest.append(self.buffer[self.pos :])
            self.pos = len(self.buffer)
        self.pos = len(self.buffer)
        return b"".join(rest)

    def read(self) -> array[float]:
        while self._skeleton_tokens():
            self._losses_array()
        return self._finish()

    # -- around the array -------------------------------------------------

    def _skeleton_tokens(self) -> bool:
        """Consume tokens into the skeleton up to the losses array's '['; False at the end."""
        while True:
            if self.pos >= len(self.buffer) and not self._fill():
                return False
            first = self.buffer[self.pos : self.pos + 1]
            if first == b'"':
                if not self._string_token():
                    return False
            elif first in _STRUCTURAL:
                self.skeleton += self._take(self.pos + 1)
                if self._structural(first):
                    return True
            else:
                pattern = _OTHER_TOP if self.depth <= 1 else _OTHER_DEEP
                match = pattern.match(self.buffer, self.pos)
                end = (
                    match.end() if match else self.pos + 1
                )  # always matches: not '"' nor structural
                token = self._take(end)
                self.skeleton += token
                if token.strip(_WHITESPACE):
                    self.after_colon = False

    def _string_token(self) -> bool:
        """Consume one string; False when the file ends inside it."""
        match = _STRING.match(self.buffer, self.pos)
        while match is None:
            if not self._fill():
                self.skeleton += self._take(len(self.buffer))  # unterminated: the parser says so
                return False
            match = _STRING.match(self.buffer, self.pos)
        token = self._take(match.end())
        self.skeleton += token
        if self.depth == 1 and self.top_is_object and self.expect_key:
            try:
                self.key = json.loads(token)
            except (ValueError, UnicodeDecodeError):
                self.key = None
            self.expect_key = False
        else:
            self.after_colon = False
        return True

    def _structural(self, token: bytes) -> bool:
        """Track depth and the top-level key; True at the '[' that opens the losses array."""
        if token in (b"{", b"["):
            opens_losses = (
                token == b"[" and self.depth == 1 and self.after_colon and self.key == "losses"
            )
            if self.depth == 0:
                self.top_is_object = self.expect_key = token == b"{"
            self.depth += 1
            self.after_colon = False
            return opens_losses
        if token in (b"}", b"]"):
            self.depth -= 1
            self.after_colon = False
        elif token == b":":
            self.after_colon = self.depth == 1
        else:
            self.after_colon = False
            self.expect_key = self.depth == 1
        return False

    # -- the array ---------------------------------------------------------

    def _losses_array(self) -> None:
        """Convert the array's numbers block by block; consume its closing ']'."""
        self.series = _Series()  # a repeated key starts over (the skeleton refuses it)
        self.seen_array, self.comma_pending = True, False
        while True:
            close = self.buffer.find(b"]", self.pos)
            if close >= 0:
                self._numbers(close, terminated=False)
                self.pos = close + 1
                self.skeleton += b"]"
                self.depth -= 1
                return
            if len(self.buffer) - self.pos >= BLOCK:
                cut = self.buffer.rfind(b",", self.pos)
                if cut >= 0:
                    self._numbers(cut, terminated=True)
                    self.pos = cut + 1
                elif not self.buffer[self.pos :].strip(_WHITESPACE):
                    self.pos = len(self.buffer)  # only whitespace: nothing to keep
            if not self._fill():
                raise self._unclosed()

    def _numbers(self, end: int, *, terminated: bool) -> None:
        """Convert ``buffer[pos:end]``, a run of elements (``terminated``: a ',' follows)."""
        text = self.buffer[self.pos : end]
        if not text.strip(_WHITESPACE):
            if terminated or self.comma_pending:
                raise self._bad()
            return  # ']' right after '[' (the empty array, refused at the end)
        try:
            if text.translate(None, _NUMBER_BYTES):
                raise ValueError("not only numbers")
            numbers = json.loads(b"[" + text + b"]")
            if len(numbers) != text.count(b",") + 1 or math.inf in numbers or -math.inf in numbers:
                raise ValueError("not a run of finite numbers")
            converted = array("d", numbers)  # an int beyond float64 fails here, before extending
        except (ValueError, OverflowError):
            raise self._bad() from None
        self.series.extend(converted)
        self.comma_pending = terminated

    def _bad(self) -> LossFileError:
        start = self.offset + self.pos
        return _bad_element(self._rest_of_file(), len(self.series.values), start, self.source)

    def _unclosed(self) -> LossFileError:
        start = self.offset + self.pos
        rest = self._rest_of_file()
        if rest.strip(_WHITESPACE):
            error = _bad_element(rest + b"]", len(self.series.values), start, self.source)
            if "after the value" not in str(error):
                return error
        return LossFileError("not valid JSON: the losses array is not closed", file=self.source)

    # -- the end -------------------------------------------------------------

    def _finish(self) -> array[float]:
        try:
            document = strict_loads(bytes(self.skeleton))
        except (ValueError, UnicodeDecodeError) as exc:
            raise LossFileError(f"not valid JSON: {exc}", file=self.source) from None
        if not isinstance(document, dict) or "losses" not in document:
            raise LossFileError("expected an object with a 'losses' array", file=self.source)
        losses = document["losses"]
        if not self.seen_array or not isinstance(losses, list) or not self.series.values:
            raise LossFileError("$.losses must be a non-empty array", file=self.source)
        return self.series.values


def _whole_file_loss_json(data: bytes, source: str) -> _Series:
    """The strict reader over the whole text: for files not in plain UTF-8 (a BOM, UTF-16)."""
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
    series = _Series()
    series.extend(
        [_finite_number(value, f"$.losses[{index}]", source) for index, value in enumerate(losses)]
    )
    return series


def _read_loss_json(stream: BinaryIO, source: str) -> _Series:
    """`{"losses": [...]}`: a non-empty array of finite numbers (other keys allowed)."""
    head = stream.read(4)
    if head.startswith(b"\xef\xbb\xbf") or b"\x00" in head:
        return _whole_file_loss_json(head + stream.read(), source)
    reader = _LossJsonReader(stream, source, head)
    reader.read()
    return reader.series


def _read_raw_loss_jsonl(stream: BinaryIO, source: str) -> _Series:
    """One `{"step": N, "loss": x}` object a line, steps 1, 2, 3, ... with none missing.

    Lines are what `str.splitlines` makes of the text (so a '\\r' ends one too),
    read one '\\n'-terminated piece at a time.
    """
    series = _Series()
    values = series.values
    pending: list[float] = []
    count = 0
    number = 0
    for piece in stream:
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LossFileError(f"line {number + 1}: not UTF-8: {exc}", file=source) from None
        for line in text.splitlines() or [""]:
            number += 1
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
            expected = count + 1
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
            pending.append(_finite_number(record["loss"], f"{where}: loss", source))
            count += 1
            if len(pending) >= 65536:
                series.extend(pending)
                pending = []
    series.extend(pending)
    if not values:
        raise LossFileError("no loss lines", file=source)
    return series


def parse_loss_json(data: bytes, source: str) -> array[float]:
    """`{"losses": [...]}` from its bytes (the streamed reader over them)."""
    return _read_loss_json(io.BytesIO(data), source).values


def parse_raw_loss_jsonl(data: bytes, source: str) -> array[float]:
    """raw_loss.jsonl from its bytes (the streamed reader over them)."""
    return _read_raw_loss_jsonl(io.BytesIO(data), source).values


def parse_losses(data: bytes | BinaryIO, source: str) -> LossSeries:
    """Parse by file name: `*.jsonl` is raw_loss, anything else loss.json.

    ``data`` is the file's bytes or a binary stream read once, block by block.
    """
    stream = io.BytesIO(data) if isinstance(data, bytes) else data
    read = _read_raw_loss_jsonl if source.endswith(".jsonl") else _read_loss_json
    series = read(stream, source)
    return LossSeries(source, series.values, series.rounded)


def read_losses(path: Path, display: str | None = None) -> LossSeries:
    source = display or str(path)
    try:
        with path.open("rb") as stream:
            return parse_losses(stream, source)
    except OSError as exc:
        raise LossFileError(f"cannot read: {exc.strerror}", file=source) from None
