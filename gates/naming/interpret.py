"""The one interpreter of naming-rule trees.

The rules turn each candidate tensor into a tree of `Node`s (gates/naming/rules.py): the
reference tensors at the leaves, one step of the rules (rename, transpose, fuse, split,
stack, unstack, reshape, cast) at each inner node. Everything that reads such a tree walks it here:

- `Interpreter.run` evaluates a tree bottom up; a subclass says what a leaf and each step
  mean (a checkpoint's expected tensor, a dump's tensor in the wider dtype, the dtype
  itself, which leaf an element came from). `Arrays` gives the steps their numpy meaning.
- `leaf_views` goes top down: for a tree of layout steps only, the part of the candidate's
  tensor each reference leaf must equal, as numpy views (no copy).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from gates.naming.rules import Node

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")

#: The steps `leaf_views` pushes down to views of the candidate's tensor.
LAYOUT_OPS = frozenset(("leaf", "rename", "transpose", "fuse", "stack", "reshape"))


class Interpreter(Generic[T]):
    """A bottom-up meaning of rule trees: `leaf` and one method per step."""

    def run(self, node: Node) -> T:
        if node.op == "leaf":
            return self.leaf(node)
        values = [self.run(child) for child in node.children]
        if node.op == "fuse":
            return self.fuse(node, values)
        if node.op == "stack":
            return self.stack(node, values)
        step = {
            "rename": self.rename,
            "transpose": self.transpose,
            "split": self.split,
            "unstack": self.unstack,
            "reshape": self.reshape,
            "cast": self.cast,
        }.get(node.op)
        if step is None:
            raise ValueError(f"{node.name}: no meaning for a {node.op} step")
        return step(node, values[0])

    def leaf(self, node: Node) -> T:
        raise NotImplementedError

    def rename(self, node: Node, value: T) -> T:
        return value

    def transpose(self, node: Node, value: T) -> T:
        raise NotImplementedError

    def fuse(self, node: Node, values: list[T]) -> T:
        raise NotImplementedError

    def split(self, node: Node, value: T) -> T:
        raise NotImplementedError

    def stack(self, node: Node, values: list[T]) -> T:
        raise NotImplementedError

    def unstack(self, node: Node, value: T) -> T:
        raise NotImplementedError

    def reshape(self, node: Node, value: T) -> T:
        raise NotImplementedError

    def cast(self, node: Node, value: T) -> T:
        raise NotImplementedError


class Alike(Interpreter[T]):
    """A meaning in which every step but a fusion, a stack and a cast keeps its input's
    value (a dtype, say): a subclass says what a leaf, a fusion, a stack and a cast are."""

    def transpose(self, node: Node, value: T) -> T:
        return value

    def split(self, node: Node, value: T) -> T:
        return value

    def unstack(self, node: Node, value: T) -> T:
        return value

    def reshape(self, node: Node, value: T) -> T:
        return value


def split_index(node: Node, ndim: int) -> tuple[slice, ...]:
    """The part of the split tensor that ``node`` (a split step) takes."""
    index = [slice(None)] * ndim
    index[node.axis] = slice(node.offset, node.offset + node.shape[node.axis])
    return tuple(index)


def inverse(axes: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that undoes ``axes``."""
    undone = [0] * len(axes)
    for position, axis in enumerate(axes):
        undone[axis] = position
    return tuple(undone)


def position_index(axis: int, position: int, ndim: int) -> tuple[slice | int, ...]:
    """The index of one position along ``axis`` (that axis removed)."""
    index: list[slice | int] = [slice(None)] * ndim
    index[axis] = position
    return tuple(index)


class Arrays(Interpreter["np.ndarray"]):
    """Layout steps on numpy arrays, each result C-contiguous; casts keep the elements
    (a subclass that converts them overrides `cast`)."""

    def transpose(self, node: Node, value: np.ndarray) -> np.ndarray:
        import numpy  # noqa: PLC0415  (numpy: only where tensors are built)

        return numpy.ascontiguousarray(value.transpose(node.axes or None))

    def fuse(self, node: Node, values: list[np.ndarray]) -> np.ndarray:
        import numpy  # noqa: PLC0415

        return numpy.concatenate(values, axis=node.axis)

    def split(self, node: Node, value: np.ndarray) -> np.ndarray:
        import numpy  # noqa: PLC0415

        return numpy.ascontiguousarray(value[split_index(node, value.ndim)])

    def stack(self, node: Node, values: list[np.ndarray]) -> np.ndarray:
        import numpy  # noqa: PLC0415

        return numpy.stack(values, axis=node.axis)

    def unstack(self, node: Node, value: np.ndarray) -> np.ndarray:
        import numpy  # noqa: PLC0415

        return numpy.ascontiguousarray(value[position_index(node.axis, node.offset, value.ndim)])

    def reshape(self, node: Node, value: np.ndarray) -> np.ndarray:
        import numpy  # noqa: PLC0415

        return numpy.ascontiguousarray(value).reshape(node.shape)

    def cast(self, node: Node, value: np.ndarray) -> np.ndarray:
        return value


def leaf_views(node: Node, actual: np.ndarray) -> Iterator[tuple[Node, np.ndarray]]:
    """Each leaf of a layout-only tree (`LAYOUT_OPS`) with the view of ``actual`` (the
    candidate's tensor) it must equal: a rename is the same view, a transpose the view with
    its axes put back, a fusion its parts' slices along the axis, a stack each position
    along the new axis, a reshape the view in the part's shape."""
    if node.op == "leaf":
        yield node, actual
    elif node.op == "rename":
        yield from leaf_views(node.children[0], actual)
    elif node.op == "transpose":
        yield from leaf_views(node.children[0], actual.transpose(inverse(node.axes) or None))
    elif node.op == "stack":
        for position, child in enumerate(node.children):
            yield from leaf_views(child, actual[position_index(node.axis, position, actual.ndim)])
    elif node.op == "reshape":
        yield from leaf_views(node.children[0], actual.reshape(node.children[0].shape))
    elif node.op == "fuse":
        offset = 0
        for child in node.children:
            index = [slice(None)] * actual.ndim
            index[node.axis] = slice(offset, offset + child.shape[node.axis])
            yield from leaf_views(child, actual[tuple(index)])
            offset += child.shape[node.axis]
    else:
        raise ValueError(f"{node.name}: a {node.op} step is no view of the candidate's tensor")
