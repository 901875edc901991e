"""Comparing two tensor dumps bit for bit through the naming rules.

The reference names of each (step, phase) go through the rules (rename, fuse,
split, stack, unstack, transpose, reshape, cast) to the candidate names they predict;
every predicted tensor is compared with the candidate's tensor of that name:

- bits, not values: -0.0 and 0.0 differ, NaN payloads are compared as bits;
- a pure rename compares the stored bytes in large blocks (one read of each
  file, memory bounded by two blocks); a transpose, fusion or split is built
  from the reference parts in the candidate's layout (memory: a few tensors);
- a cast never hides a difference: both sides are compared in the wider dtype,
  the narrower side widened exactly (BF16/F16 -> F32 -> F64 are exact);
  a shape or dtype that cannot match after the rules is named, never cast.

Optimizer tensors are `<param>:<slot>`: the rules apply to the param part, the
slot maps through `slots` (torch exp_avg -> Paddle moment1, ...).

A tensor a rule could not apply to is not compared: its problem is named. A candidate tensor
a `candidate_only` declaration accounts for is listed with its reason, never missing; a
pair a `not_comparable` declaration names is listed with its reason and never compared,
counted equal or explained. A declaration that matches nothing is a problem.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gates.core.progress import QUIET, Progress
from gates.naming.config_placeholders import FROM_CONFIG
from gates.naming.config_placeholders import resolve as resolve_placeholders
from gates.naming.interpret import LAYOUT_OPS, Alike, Arrays, leaf_views
from gates.naming.rule_kinds import RuleError
from gates.naming.rules import Declarations, Node, RuleSet, expect
from gates.safetensors.dtypes import (
    FLOATS,
    SIGNED,
    WIDTH,
    DtypeError,
    common_dtype,
    raw_dtype,
    widen,
)
from gates.safetensors.header import TensorEntry
from gates.tensors.layout import (
    PHASES,
    SLOT_SEPARATOR,
    Dump,
    DumpError,
    PhaseFile,
    StepDump,
    StepRange,
    read_step,
    split_slot,
)

if TYPE_CHECKING:
    import numpy as np
else:

    class _NumpyOnFirstUse:
        """numpy (0.1 to 0.4 s to import here) loads when a comparison first needs it: an
        audit imports this module for the tensor contract's names and may compare nothing.
        The first attribute looked up rebinds the module's ``np`` to numpy itself."""

        def __getattr__(self, name: str) -> Any:
            import numpy  # noqa: PLC0415

            globals()["np"] = numpy
            return getattr(numpy, name)

    np = _NumpyOnFirstUse()

#: Reference optimizer slot -> candidate slot (torch -> Paddle); others keep their name.
DEFAULT_SLOTS = {"exp_avg": "moment1", "exp_avg_sq": "moment2", "momentum_buffer": "velocity"}

BLOCK_BYTES = 4 * 1024 * 1024  # blocks that stay in the cache: 0.7x the CPU of 32 MiB blocks
#: the operations that keep each element where it is: a tree of them is built a block at a
#: time (`_elementwise`)
ELEMENTWISE_OPS = frozenset(("rename", "cast"))
LIST_LIMIT = 50


# -- values and distances ----------------------------------------------------------------
def to_float64(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype in WIDTH:  # a float: exactly, a signalling NaN quietly (`widen`)
        return widen(raw, dtype, "F64").view("<f8")
    if dtype in SIGNED:
        return raw.view(SIGNED[dtype]).astype("<f8")
    return raw.astype("<f8")


def _ordered(raw: np.ndarray) -> np.ndarray:
    """Float bit patterns as integers in numeric order; -0.0 sits one below 0.0."""
    bits = raw.dtype.itemsize * 8
    signed = raw.astype("<u8").astype("<i8") if bits < 64 else raw.view("<i8")
    if bits < 64:
        sign = np.int64(1) << np.int64(bits - 1)
        negative = signed >= sign
        magnitude = np.where(negative, signed - sign, signed)
    else:
        negative = signed < 0
        magnitude = signed & np.int64(0x7FFFFFFFFFFFFFFF)
    ordered: np.ndarray = np.where(negative, -magnitude - 1, magnitude)
    return ordered


def ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in units in the last place between raw float arrays."""
    if a.size == 0:
        return 0
    oa, ob = _ordered(a), _ordered(b)
    high, low = np.maximum(oa, ob).view("<u8"), np.minimum(oa, ob).view("<u8")
    return int((high - low).max())


def nonfinite_count(raw: np.ndarray, dtype: str) -> int:
    """NaN and Inf elements of a raw float array (one vectorized pass when all are finite)."""
    if dtype in FLOATS:
        finite = np.isfinite(raw.view(FLOATS[dtype]))
        return 0 if finite.all() else int(finite.size - np.count_nonzero(finite))
    if dtype == "BF16":
        mask = raw.dtype.type(0x7F80)
        return int(np.count_nonzero((raw & mask) == mask))
    return 0


@dataclass
class Difference:
    """What differs between two raw arrays of one dtype (candidate layout)."""

    count: int = 0
    index: int | None = None
    max_ulp: int | None = None
    max_abs_diff: float | None = None
    nonfinite_pairs: int = 0

    def add(self, a: np.ndarray, b: np.ndarray, dtype: str, start: int) -> None:
        unequal = a != b
        count = int(np.count_nonzero(unequal))
        if not count:
            return
        if self.index is None:
            self.index = start + int(np.argmax(unequal))
        self.count += count
        da, db = a[unequal], b[unequal]
        fa, fb = to_float64(da, dtype), to_float64(db, dtype)
        finite = np.isfinite(fa) & np.isfinite(fb)
        self.nonfinite_pairs += int(count - np.count_nonzero(finite))
        if np.any(finite):
            diff = float(np.abs(fa[finite] - fb[finite]).max())
            self.max_abs_diff = max(self.max_abs_diff or 0.0, diff)
            if dtype in WIDTH:
                ulp = ulp_distance(da[finite], db[finite])
                self.max_ulp = max(self.max_ulp or 0, ulp)


# -- reading -----------------------------------------------------------------------------
class PhaseReader:
    """Reads tensors of one phase file by name, with one file descriptor."""

    def __init__(self, phase_file: PhaseFile) -> None:
        self.file = phase_file
        self.fd = os.open(phase_file.path, os.O_RDONLY)

    def close(self) -> None:
        os.close(self.fd)

    def entry(self, name: str) -> TensorEntry:
        return self.file.header.tensors[name]

    def read(self, name: str, start: int = 0, length: int | None = None) -> bytes:
        entry = self.entry(name)
        size = entry.nbytes - start if length is None else length
        data = os.pread(self.fd, size, self.file.header.data_start + entry.start + start)
        if len(data) != size:
            raise DumpError("file shrank while read", file=self.file.display)
        return data

    def read_into(self, name: str, start: int, buffer: memoryview) -> None:
        """Fill ``buffer`` from byte ``start`` of the tensor (no allocation)."""
        offset = self.file.header.data_start + self.entry(name).start + start
        if os.preadv(self.fd, [buffer], offset) != len(buffer):
            raise DumpError("file shrank while read", file=self.file.display)

    def array(self, name: str, into: _Buffer | None = None) -> np.ndarray:
        """The tensor as raw elements; read into ``into``'s reused buffer when given (valid
        until that buffer is used again)."""
        entry = self.entry(name)
        if into is None:
            data: bytes | memoryview = self.read(name)
        else:
            data = into.view(entry.nbytes)[: entry.nbytes]
            self.read_into(name, 0, data)
        return np.frombuffer(data, raw_dtype(entry.dtype, "compare")).reshape(entry.shape)


# -- the mapping -------------------------------------------------------------------------
@dataclass(frozen=True)
class Mapped:
    """A candidate tensor as the rules predict it from the reference."""

    candidate: str
    node: Node
    suffix: str = ""  # `:<slot>` of the reference optimizer tensors

    def reference_names(self) -> tuple[str, ...]:
        return tuple(leaf.name + self.suffix for leaf in self.node.leaves())


def _inventory(header_tensors: dict[str, TensorEntry]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {name: (e.dtype, e.shape) for name, e in header_tensors.items()}


@dataclass
class Mapping:
    """A phase's candidate names -> what the rules predict, the rule problems (named) and the
    labels of the rules that matched a tensor."""

    mapped: dict[str, Mapped]
    problems: list[str]
    applied: set[str]


def map_phase(
    phase: str,
    reference: dict[str, TensorEntry],
    ruleset: RuleSet,
    slots: dict[str, str],
    candidate_slots: frozenset[str] = frozenset(),
) -> Mapping:
    """The phase's reference names through the rules. A slot the candidate also uses keeps
    its name (torch against torch); others map through ``slots``."""
    if phase != "optimizer":
        expectation = expect(_inventory(reference), ruleset)
        return Mapping(
            {name: Mapped(name, node) for name, node in expectation.nodes.items()},
            expectation.problems,
            expectation.applied,
        )
    by_slot: dict[str, dict[str, tuple[str, tuple[int, ...]]]] = {}
    for name, entry in reference.items():
        param, slot = split_slot(name)
        by_slot.setdefault(slot, {})[param] = (entry.dtype, entry.shape)
    found = Mapping({}, [], set())
    for slot, inventory in sorted(by_slot.items()):
        expectation = expect(inventory, ruleset)
        found.problems += [f"slot {slot}: {p}" for p in expectation.problems]
        found.applied |= expectation.applied
        target = slot if slot in candidate_slots else slots.get(slot, slot)
        for param, node in expectation.nodes.items():
            name = f"{param}{SLOT_SEPARATOR}{target}"
            found.mapped[name] = Mapped(name, node, f"{SLOT_SEPARATOR}{slot}")
    return found


# -- comparing one tensor ----------------------------------------------------------------
@dataclass
class TensorResult:
    step: int
    phase: str
    reference: tuple[str, ...]
    candidate: str
    equal: bool
    index: int | None = None
    max_ulp: int | None = None
    max_abs_diff: float | None = None
    nonfinite: int = 0
    nonfinite_pairs: int = 0
    reason: str = ""

    def reference_at_index(self) -> str:
        return self.reference[0] if self.reference else ""


class _Widened(Alike[str]):
    """The dtype a node's tensor is built in: a cast only ever widens (to the dtype both
    sides compare in); fused or stacked parts must agree."""

    def leaf(self, node: Node) -> str:
        return node.dtype

    def fuse(self, node: Node, values: list[str]) -> str:
        if any(d != values[0] for d in values):
            raise RuleError(f"{node.name}: the fused parts differ in dtype")
        return values[0]

    def stack(self, node: Node, values: list[str]) -> str:
        return self.fuse(node, values)

    def cast(self, node: Node, value: str) -> str:
        return common_dtype(value, node.dtype)


class _Widening(Arrays):
    """A node's tensor built from its leaves' raw elements (which `leaf` gives), in the
    candidate's layout and the dtype `_Widened` names."""

    def fuse(self, node: Node, values: list[np.ndarray]) -> np.ndarray:
        _Widened().run(node)  # the parts agree in dtype, not only in element size
        return super().fuse(node, values)

    def stack(self, node: Node, values: list[np.ndarray]) -> np.ndarray:
        _Widened().run(node)
        return super().stack(node, values)

    def cast(self, node: Node, value: np.ndarray) -> np.ndarray:
        source = _Widened().run(node.children[0])
        return widen(value, source, common_dtype(source, node.dtype))


class _Expected(_Widening):
    """The node's tensor from the reference's whole leaves."""

    def __init__(self, reader: PhaseReader, suffix: str) -> None:
        self.reader = reader
        self.suffix = suffix

    def leaf(self, node: Node) -> np.ndarray:
        return self.reader.array(node.name + self.suffix)


def _build(node: Node, reader: PhaseReader, suffix: str) -> tuple[np.ndarray, str]:
    """The node's tensor from reference bytes, candidate layout; casts only ever widen."""
    return _Expected(reader, suffix).run(node), _Widened().run(node)


class _Origin(Arrays):
    """For each element of the node's tensor, which reference leaf it came from."""

    def __init__(self, leaves: dict[str, int]) -> None:
        self.leaves = leaves

    def leaf(self, node: Node) -> np.ndarray:
        return np.full(node.shape, self.leaves[node.name], np.int32)


class _Buffer:
    """A read buffer reused for every block of every tensor: a fresh 32 MiB buffer per
    block costs more in page faults than the comparison itself."""

    def __init__(self) -> None:
        self.data = bytearray()

    def view(self, size: int) -> memoryview:
        if size > len(self.data):
            self.data = bytearray(size)
        return memoryview(self.data)


class _OnBlock(_Widening):
    """The node's tensor over a block of the one leaf's raw elements: a tree of renames
    and casts works element by element, so a block of the tensor is built alone."""

    def __init__(self, block: np.ndarray) -> None:
        self.block = block

    def leaf(self, node: Node) -> np.ndarray:
        return self.block


def _elementwise(
    mapped: Mapped, ref: PhaseReader, cand: PhaseReader, result: TensorResult, scratch: Scratch
) -> Difference:
    """A tensor the rules rename and cast only, a block of elements at a time: the stored
    bytes by memcmp when nothing casts, else the reference's block built as `_build`
    builds the whole tensor (a cast only ever widens) and both blocks widened to the dtype
    they compare in, as `_built` does; numpy measures only a block that differs. Neither
    side is read whole or copied whole (the blocks reuse two buffers)."""
    node = mapped.node
    leaf = node.leaves()[0].name + mapped.suffix
    entry, source = cand.entry(mapped.candidate), ref.entry(leaf)
    built_in = _Widened().run(node)  # what `_build` raises for a cast, raised here
    compare_in = common_dtype(built_in, entry.dtype)
    ref_raw = raw_dtype(source.dtype, "compare")
    cand_raw = raw_dtype(entry.dtype, "compare")
    casts = not source.dtype == built_in == compare_in == entry.dtype
    per_block = max(1, BLOCK_BYTES // max(ref_raw.itemsize, cand_raw.itemsize))
    elements = entry.nbytes // cand_raw.itemsize
    difference = Difference()
    view_a = scratch.reference_block.view(min(per_block, elements) * ref_raw.itemsize)
    view_b = scratch.candidate_block.view(min(per_block, elements) * cand_raw.itemsize)
    for first in range(0, elements, per_block):
        count = min(per_block, elements - first)
        block_a, block_b = view_a[: count * ref_raw.itemsize], view_b[: count * cand_raw.itemsize]
        ref.read_into(leaf, first * ref_raw.itemsize, block_a)
        cand.read_into(mapped.candidate, first * cand_raw.itemsize, block_b)
        actual = np.frombuffer(block_b, cand_raw)
        result.nonfinite += nonfinite_count(actual, entry.dtype)
        if not casts:
            if not scratch.reference_block.data.startswith(block_b):  # first bytes, by memcmp
                difference.add(np.frombuffer(block_a, ref_raw), actual, entry.dtype, first)
            continue
        expected = _OnBlock(np.frombuffer(block_a, ref_raw)).run(node)
        a = widen(expected, built_in, compare_in)
        b = widen(actual, entry.dtype, compare_in)
        if not np.array_equal(a, b):
            difference.add(a, b, compare_in, first)
    return difference


TILE_BYTES = 4 * 1024 * 1024


SLAB_ROWS = 64
TILE_COLUMNS = 256


class _Slab:
    """One reusable buffer that strided rows are copied into before a memcmp."""

    def __init__(self) -> None:
        self.data = bytearray()

    def rows(self, count: int, like: np.ndarray) -> tuple[np.ndarray, bytearray]:
        size = count * like.shape[1] * like.itemsize
        if size > len(self.data):
            self.data = bytearray(size)
        array = np.frombuffer(self.data, like.dtype, count * like.shape[1]).reshape(count, -1)
        return array, self.data


@dataclass
class Scratch:
    """The buffers of one comparison, reused for every block of every tensor it compares
    and dropped with it: a fresh buffer per block costs more in page faults than the
    comparison itself."""

    reference_block: _Buffer = field(default_factory=_Buffer)
    candidate_block: _Buffer = field(default_factory=_Buffer)
    leaf: _Buffer = field(default_factory=_Buffer)
    candidate: _Buffer = field(default_factory=_Buffer)
    slab: _Slab = field(default_factory=_Slab)


def _strided_equal(expected: np.ndarray, actual: np.ndarray, slab_buffer: _Slab) -> bool:
    """``expected`` (C-contiguous, 2-D) against ``actual``, a strided view (a transpose):
    a slab of 64 rows of ``actual`` is copied tile by tile (64 x 256 elements: both sides
    of a tile stay in cache) into one reused buffer, then compared with the same rows of
    ``expected`` by memcmp. One transposing copy in all, blocked, and no temporaries."""
    rows, cols = expected.shape
    slab, data = slab_buffer.rows(min(SLAB_ROWS, rows), expected)
    for i in range(0, rows, SLAB_ROWS):
        height = min(SLAB_ROWS, rows - i)
        part = actual[i : i + height]
        for j in range(0, cols, TILE_COLUMNS):
            np.copyto(slab[:height, j : j + TILE_COLUMNS], part[:, j : j + TILE_COLUMNS])
        rows_bytes = memoryview(expected[i : i + height]).cast("B")  # type: ignore[arg-type]
        if not data.startswith(rows_bytes):
            return False
    return True


def _tiles_equal(expected: np.ndarray, actual: np.ndarray, slab_buffer: _Slab) -> bool:
    """Equal bits (raw unsigned elements): through `_strided_equal` when ``actual`` is a
    strided 2-D view (a transpose, a fused part), in slabs along the first axis otherwise;
    temporaries stay small either way."""
    if expected.ndim == 0 or expected.size == 0:
        return bool(np.array_equal(expected, actual))
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return False
    if expected.ndim == 2 and expected.flags.c_contiguous and not actual.flags.c_contiguous:
        return _strided_equal(expected, actual, slab_buffer)
    slab = max(1, TILE_BYTES // max(1, expected[0].nbytes))
    return all(
        np.array_equal(expected[i : i + slab], actual[i : i + slab])
        for i in range(0, expected.shape[0], slab)
    )


def _layout_equal(
    node: Node, actual: np.ndarray, reader: PhaseReader, suffix: str, scratch: Scratch
) -> bool:
    """Does the candidate view ``actual`` hold exactly ``node``? Renames, transposes and
    fusions are pushed down to views of the candidate, so no reference tensor is copied
    into the candidate's layout: each leaf is read once and compared in place."""
    return all(
        _tiles_equal(reader.array(leaf.name + suffix, scratch.leaf), view, scratch.slab)
        for leaf, view in leaf_views(node, actual)
    )


def _built(
    mapped: Mapped, ref: PhaseReader, cand: PhaseReader, result: TensorResult, scratch: Scratch
) -> Difference:
    entry = cand.entry(mapped.candidate)
    if mapped.node.ops() <= LAYOUT_OPS and mapped.node.dtype == entry.dtype:
        actual = cand.array(mapped.candidate, scratch.candidate)
        if _layout_equal(mapped.node, actual, ref, mapped.suffix, scratch):
            result.nonfinite += nonfinite_count(actual, entry.dtype)
            return Difference()
        # a difference: build the expected tensor to locate and measure it
    expected, dtype = _build(mapped.node, ref, mapped.suffix)
    actual = cand.array(mapped.candidate)
    result.nonfinite += nonfinite_count(actual, entry.dtype)
    compare_in = common_dtype(dtype, entry.dtype)
    a = widen(expected, dtype, compare_in).reshape(-1)
    b = widen(actual, entry.dtype, compare_in).reshape(-1)
    difference = Difference()
    if not np.array_equal(a, b):
        difference.add(a, b, compare_in, 0)
        leaves = mapped.node.leaves()
        if len(leaves) > 1 and difference.index is not None:
            origin = _Origin({leaf.name: i for i, leaf in enumerate(leaves)}).run(mapped.node)
            first = leaves[int(origin.reshape(-1)[difference.index])].name + mapped.suffix
            result.reference = (first, *(n for n in result.reference if n != first))
    return difference


def compare_tensor(
    step: int,
    phase: str,
    mapped: Mapped,
    ref: PhaseReader,
    cand: PhaseReader,
    *,
    scratch: Scratch | None = None,
) -> TensorResult:
    """One candidate tensor against what the rules make of the reference; ``scratch``: the
    comparison's reused buffers (a fresh set when not given)."""
    entry = cand.entry(mapped.candidate)
    node = mapped.node
    result = TensorResult(step, phase, mapped.reference_names(), mapped.candidate, equal=False)
    if tuple(entry.shape) != tuple(node.shape):
        result.reason = (
            f"shape {list(node.shape)} after the rules, {list(entry.shape)} in the candidate"
        )
        return result
    casts = "cast" in node.ops()
    if entry.dtype != node.dtype and not casts:
        result.reason = (
            f"dtype {node.dtype} after the rules, {entry.dtype} in the candidate "
            "(no cast rule declares it; never cast silently)"
        )
        return result
    try:
        elementwise = node.ops() <= ELEMENTWISE_OPS
        compare = _elementwise if elementwise else _built
        difference = compare(mapped, ref, cand, result, scratch or Scratch())
    except (RuleError, DtypeError) as exc:
        result.reason = str(exc)
        return result
    result.equal = difference.count == 0
    result.index = difference.index
    result.max_ulp = difference.max_ulp
    result.max_abs_diff = difference.max_abs_diff
    result.nonfinite_pairs = difference.nonfinite_pairs
    if not result.equal:
        result.reason = f"{difference.count} of {math.prod(entry.shape)} elements differ"
    return result


# -- a whole comparison ------------------------------------------------------------------
@dataclass
class PhaseTally:
    step: int
    phase: str
    compared: int = 0
    equal: int = 0
    unequal: int = 0
    missing: int = 0
    max_ulp: int | None = None
    max_abs_diff: float | None = None
    nonfinite: int = 0

    def add(self, result: TensorResult) -> None:
        self.compared += 1
        self.nonfinite += result.nonfinite
        if result.equal:
            self.equal += 1
            return
        self.unequal += 1
        if result.max_ulp is not None:
            self.max_ulp = max(self.max_ulp or 0, result.max_ulp)
        if result.max_abs_diff is not None:
            self.max_abs_diff = max(self.max_abs_diff or 0.0, result.max_abs_diff)

    def figures(self) -> dict[str, object]:
        return {
            "step": self.step,
            "phase": self.phase,
            "compared": self.compared,
            "equal": self.equal,
            "unequal": self.unequal,
            "missing": self.missing,
            "max_ulp": self.max_ulp,
            "max_abs_diff": self.max_abs_diff,
            "nonfinite": self.nonfinite,
        }


@dataclass
class Comparison:
    tallies: list[PhaseTally] = field(default_factory=list)
    unequal: list[TensorResult] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    first: TensorResult | None = None
    unmatched_rules: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    #: "<step> <phase>: <candidate> (<reason>)" of each declared tensor, as listed
    candidate_only: list[str] = field(default_factory=list)
    not_comparable: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        return {
            key: sum(getattr(t, key) for t in self.tallies)
            for key in ("compared", "equal", "unequal", "missing")
        }

    @property
    def aligned(self) -> bool:
        totals = self.totals()
        return (
            totals["compared"] > 0
            and totals["unequal"] == 0
            and totals["missing"] == 0
            and not self.problems
        )

    def first_divergence(self) -> dict[str, object] | None:
        first = self.first
        if first is None:
            return None
        return {
            "step": first.step,
            "phase": first.phase,
            "reference": first.reference_at_index(),
            "candidate": first.candidate,
            "index": first.index,
        }


@dataclass(frozen=True)
class Selection:
    steps: StepRange = field(default_factory=StepRange)
    phases: tuple[str, ...] = PHASES
    phases_required: bool = False


def _steps(reference: Dump, candidate: Dump, selection: Selection) -> list[int]:
    known = set(reference.steps) | set(candidate.steps)
    bounds = selection.steps
    chosen = {s for s in known if s in bounds}
    if bounds.first is not None and bounds.last is not None:
        chosen |= set(range(bounds.first, bounds.last + 1))
    return sorted(chosen)


def _placeholders(ruleset: RuleSet, reference: Dump, candidate: Dump) -> tuple[RuleSet, list[str]]:
    """Fill `{mtp}` from a config.json of the run folders (as for checkpoints); rules that
    use a placeholder nothing sets are left out, and said so: an unfixed `{mtp}` would
    match every layer."""
    sides = [
        (folder, label)
        for dump, label in ((reference, "reference"), (candidate, "candidate"))
        for folder in (dump.root, dump.root.parent)
    ]
    resolved = resolve_placeholders(ruleset, sides)
    notes = list(resolved.notes)
    if not resolved.problems:
        return resolved.ruleset, notes
    unset = [p for p in FROM_CONFIG if p not in resolved.ruleset.placeholders]
    kept = [
        rule
        for rule in resolved.ruleset.rules
        if not any("{" + p + "}" in rule.model_dump_json() for p in unset)
    ]
    left_out = len(resolved.ruleset.rules) - len(kept)
    notes.append(
        f"{left_out} rule(s) using {', '.join('{' + p + '}' for p in unset)} left out: "
        "no config.json sets it here (set placeholders in the contract)"
    )
    return resolved.ruleset.model_copy(update={"rules": kept}), notes


def compare_dumps(
    reference: Dump,
    candidate: Dump,
    ruleset: RuleSet,
    selection: Selection,
    *,
    slots: dict[str, str] | None = None,
    progress: Progress = QUIET,
) -> Comparison:
    """Compare every selected (step, phase); the first divergence by step, then by the
    candidate's execution order. The comparison's buffers live as long as it does."""
    slot_map = DEFAULT_SLOTS if slots is None else slots
    result = Comparison()
    ruleset, notes = _placeholders(ruleset, reference, candidate)
    result.notes.extend(notes)
    used = _Used()
    for side, dump in (("reference", reference), ("candidate", candidate)):
        for note in dump.incomplete:
            result.problems.append(f"{side}: {note}")
    steps = _steps(reference, candidate, selection)
    result.steps = steps
    scratch = Scratch()
    if not steps:
        result.problems.append("no step to compare in the selection")
    for step in progress.counted(steps, len(steps), "comparing tensor steps", "step"):
        missing_sides = [
            side
            for side, dump in (("reference", reference), ("candidate", candidate))
            if step not in dump.steps
        ]
        if missing_sides:
            result.problems.append(
                f"step {step}: missing in the {' and '.join(missing_sides)} dump"
            )
            for phase in selection.phases:
                tally = PhaseTally(step, phase, missing=1)
                result.tallies.append(tally)
            continue
        ref_step = read_step(reference, step, selection.phases)
        cand_step = read_step(candidate, step, selection.phases)
        position = cand_step.position()
        step_results: list[TensorResult] = []
        for phase in selection.phases:
            tally = PhaseTally(step, phase)
            result.tallies.append(tally)
            step_results += _compare_phase(
                ref_step,
                cand_step,
                phase,
                ruleset=ruleset,
                slots=slot_map,
                selection=selection,
                tally=tally,
                result=result,
                used=used,
                scratch=scratch,
            )
        diverged = [r for r in step_results if not r.equal]
        if diverged and result.first is None:
            last = len(position)
            result.first = min(
                diverged,
                key=lambda r: (position.get((r.phase, r.candidate), last), PHASES.index(r.phase)),
            )
        result.unequal += diverged
    labelled, _ = ruleset.labelled()
    result.unmatched_rules = [tag for tag, _ in labelled if tag not in used.rules]
    result.problems += [
        f"candidate_only {declared.match!r} matches no candidate tensor (remove it, or fix "
        "its pattern)"
        for index, declared in enumerate(ruleset.candidate_only)
        if index not in used.candidate_only
    ]
    result.problems += [
        f"not_comparable {declared.reference!r} -> {declared.candidate!r} names no pair of "
        "tensors after the rules (remove it, or fix its patterns)"
        for index, declared in enumerate(ruleset.not_comparable)
        if index not in used.not_comparable
    ]
    return result


@dataclass
class _Used:
    """Over a whole comparison: the rules that matched a tensor and the declarations (by
    position) that matched one."""

    rules: set[str] = field(default_factory=set)
    candidate_only: set[int] = field(default_factory=set)
    not_comparable: set[int] = field(default_factory=set)


def _compare_phase(
    ref_step: StepDump,
    cand_step: StepDump,
    phase: str,
    *,
    ruleset: RuleSet,
    slots: dict[str, str],
    selection: Selection,
    tally: PhaseTally,
    result: Comparison,
    used: _Used,
    scratch: Scratch,
) -> list[TensorResult]:
    ref_file, cand_file = ref_step.phases.get(phase), cand_step.phases.get(phase)
    where = f"step {ref_step.step} {phase}"
    if ref_file is None or cand_file is None:
        if ref_file is None and cand_file is None:
            if selection.phases_required:
                tally.missing += 1
                result.problems.append(f"{where}: dumped on neither side")
            return []
        absent = "reference" if ref_file is None else "candidate"
        present = cand_file if ref_file is None else ref_file
        count = len(present.header.tensors) if present else 0
        tally.missing += max(count, 1)
        result.problems.append(f"{where}: no {phase}.safetensors in the {absent} dump")
        return []
    candidate_slots = (
        frozenset(split_slot(name)[1] for name in cand_file.header.tensors)
        if phase == "optimizer"
        else frozenset()
    )
    mapping = map_phase(phase, ref_file.header.tensors, ruleset, slots, candidate_slots)
    result.problems += [f"{where}: {p}" for p in mapping.problems]
    used.rules |= mapping.applied
    mapped = mapping.mapped
    chosen = _chosen(
        mapped, set(cand_file.header.tensors), Declarations(ruleset), where, tally, result, used
    )
    ref_reader, cand_reader = PhaseReader(ref_file), PhaseReader(cand_file)
    results: list[TensorResult] = []
    try:
        for name in chosen:
            compared = compare_tensor(
                ref_step.step, phase, mapped[name], ref_reader, cand_reader, scratch=scratch
            )
            tally.add(compared)
            results.append(compared)
    finally:
        ref_reader.close()
        cand_reader.close()
    return results


def _chosen(  # noqa: PLR0917
    mapped: dict[str, Mapped],
    cand_names: set[str],
    declared: Declarations,
    where: str,
    tally: PhaseTally,
    result: Comparison,
    used: _Used,
) -> list[str]:
    """The candidate names to compare; each other name listed where it belongs: missing on
    one side, candidate-only by a declaration, not comparable by a declaration, or left to
    its rule problem (named with the phase's problems)."""
    for name in sorted(set(mapped) - cand_names):
        if mapped[name].node.problem:
            continue
        tally.missing += 1
        _note(
            result.missing,
            f"{where}: {name} (from {', '.join(mapped[name].reference_names())})"
            " is not in the candidate",
        )
    for name in sorted(cand_names - set(mapped)):
        found_only = declared.only(name)
        if found_only is not None:
            index, reason = found_only
            used.candidate_only.add(index)
            _note(result.candidate_only, f"{where}: {name} ({reason})")
            continue
        tally.missing += 1
        _note(result.missing, f"{where}: {name} has no reference tensor after the rules")
    chosen = []
    for name in sorted(set(mapped) & cand_names):
        item = mapped[name]
        if item.node.problem:
            continue
        found_pair = declared.pair(name, [leaf.name for leaf in item.node.leaves()])
        if found_pair is not None:
            index, reason = found_pair
            used.not_comparable.add(index)
            references = ", ".join(item.reference_names())
            _note(result.not_comparable, f"{where}: {references} -> {name} ({reason})")
            continue
        chosen.append(name)
    return chosen


def _note(items: list[str], text: str) -> None:
    if len(items) < LIST_LIMIT:
        items.append(text)


def parse_phases(given: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(given))
    unknown = [p for p in chosen if p not in PHASES]
    if unknown:
        raise ValueError(f"unknown phase(s) {', '.join(unknown)}: choose from {', '.join(PHASES)}")
    return chosen
