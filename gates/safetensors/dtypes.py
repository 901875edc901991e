"""The dtypes of the safetensors format: names, sizes, and exact conversions between floats.

Tensors are handled as raw little-endian unsigned elements (bits, never values), so
-0.0 and 0.0 and NaN payloads stay apart; a conversion changes the bits only as the
frameworks' casts do. numpy loads on the first conversion: the header reader and the
audit use the names and sizes only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: Every dtype of the format, with its size in bits.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}

#: The numpy dtype of raw elements of each whole-byte size.
RAW = {8: "<u1", 16: "<u2", 32: "<u4", 64: "<u8"}
#: The float dtypes numpy holds natively.
FLOATS = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}
SIGNED = {"I8": "<i1", "I16": "<i2", "I32": "<i4", "I64": "<i8"}
#: Ranks of the float dtypes: a higher rank holds every value of a lower one exactly
#: (F16 and BF16 share a rank: neither holds the other, F32 holds both).
WIDTH = {"F16": 1, "BF16": 1, "F32": 2, "F64": 3}


class DtypeError(ValueError):
    """Elements that cannot be handled or converted as asked."""


def raw_dtype(dtype: str, doing: str) -> np.dtype[np.unsignedinteger]:
    """The raw unsigned numpy dtype of ``dtype``'s elements; ``doing`` names the work in the
    error (sub-byte elements have none)."""
    import numpy  # noqa: PLC0415  (numpy: only where elements are handled)

    bits = DTYPE_BITS[dtype]
    if bits not in RAW:
        raise DtypeError(f"cannot {doing} {dtype} tensors (sub-byte elements)")
    raw: np.dtype[np.unsignedinteger] = numpy.dtype(RAW[bits])
    return raw


def common_dtype(a: str, b: str) -> str:
    """The dtype two float dtypes compare in: the wider one (F32 for F16 against BF16)."""
    if a == b:
        return a
    if a not in WIDTH or b not in WIDTH:
        raise DtypeError(f"cannot compare {a} with {b} exactly: only float casts are comparable")
    if WIDTH[a] == WIDTH[b]:
        return "F32"
    return a if WIDTH[a] > WIDTH[b] else b


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    import numpy  # noqa: PLC0415

    as_f32 = raw.astype("<u4")  # a new array: shifted in place, no second copy
    as_f32 <<= numpy.uint32(16)
    return as_f32


def _f32_to_bf16(raw: np.ndarray) -> np.ndarray:
    # Round to nearest, ties to even, as frameworks cast float32 to bfloat16.
    bits = raw.astype("<u8")
    rounded: np.ndarray = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return rounded


def _via_float(raw: np.ndarray, source: str, target: str) -> np.ndarray:
    import numpy  # noqa: PLC0415

    # a signalling NaN comes out quiet and a value too large for the narrower dtype as an
    # infinity, as the frameworks' casts give them: numpy's warnings about either are noise
    # on the user's terminal (and an error under `python -W error`)
    with numpy.errstate(invalid="ignore", over="ignore"):
        values: np.ndarray = raw.view(FLOATS[source]).astype(FLOATS[target])
    return values.view(RAW[DTYPE_BITS[target]])


def cast(raw: np.ndarray, source: str, target: str) -> np.ndarray:
    """Raw elements of float dtype ``source`` as raw ``target`` elements, as the frameworks
    cast them (narrowing rounds to nearest, ties to even)."""
    if source == target:
        return raw
    if source == "BF16":
        as_f32 = _bf16_to_f32(raw)
        return as_f32 if target == "F32" else cast(as_f32, "F32", target)
    if target == "BF16":
        return _f32_to_bf16(raw if source == "F32" else cast(raw, source, "F32"))
    if source in FLOATS and target in FLOATS:
        return _via_float(raw, source, target)
    raise DtypeError(f"cannot compare through a cast from {source} to {target}")


def widen(raw: np.ndarray, source: str, target: str) -> np.ndarray:
    """Raw elements of float dtype ``source`` as raw ``target`` elements, exactly: only a
    cast to a wider dtype, which changes no value."""
    if source == target:
        return raw
    if source in WIDTH and target in WIDTH and WIDTH[target] > WIDTH[source]:
        return cast(raw, source, target)
    raise DtypeError(f"cannot widen {source} to {target} exactly")
