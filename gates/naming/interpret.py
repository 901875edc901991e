"""The one interpreter of naming-rule trees.

The rules turn each candidate tensor into a tree of `Node`s (gates/naming/rules.py): the
reference tensors at the leaves, one step of the rules (rename, transpose, fuse, split,
cast) at each inner node. Everything that reads such a tree walks it here:

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
LAYOUT_OPS = frozenset(("leaf", "rename", "transpose", "fuse"))


class Interpreter(Generic[T]):
    """A bottom-up meaning of rule trees: `leaf` and one method per step."""

    def run(self, node: Node) -> T:
        if node.op == "leaf":
            return self.leaf(node)
        values = [self.run(child) for child in node.children]
        if node.op == "fuse":
            return self.fuse(node, values)
        if node.op == "rename":
            return values[0]
        if node.op == "transpose":
            return self.transpose(node, values[0])
        if node.op == "split":
            return self.split(node, values[0])
        return self.cast(node, values[0])

    def leaf(self, node: Node) -> T:
        raise NotImplementedError

    def transpose(self, node: Node, value: T) -> T:
        raise NotImplementedError

    def fuse(self, node: Node, values: list[T]) -> T:
        raise NotImplementedError

    def split(self, node: Node, value: T) -> T:
        raise NotImplementedError

    def cast(self, node: Node, value: T) -> T:
        raise NotImplementedError


def split_index(node: Node, ndim: int) -> tuple[slice, ...]:
    """The part of the split tensor that ``node`` (a split step) takes."""
    index = [slice(None)] * ndim
    index[node.axis] = slice(node.offset, node.offset + node.shape[node.axis])
    return tuple(index)


class Arrays(Interpreter["np.ndarray"]):
    """Layout steps on numpy arrays, each result C-contiguous; casts keep the elements
    (a subclass that converts them overrides `cast`)."""

    def transpose(self, node: Node, value: np.ndarray) -> np.ndarray:
        import numpy  # noqa: PLC0415  (numpy: only where tensors are built)

        return numpy.ascontiguousarray(value.T)

    def fuse(self, node: Node, values: list[np.ndarray]) -> np.ndarray:
        import numpy  # noqa: PLC0415

        return numpy.concatenate(values, axis=node.axis)

    def split(self, node: Node, value: np.ndarray) -> np.ndarray:
        import numpy  # noqa: PLC0415

        return numpy.ascontiguousarray(value[split_index(node, value.ndim)])

    def cast(self, node: Node, value: np.ndarray) -> np.ndarray:
        return value


def leaf_views(node: Node, actual: np.ndarray) -> Iterator[tuple[Node, np.ndarray]]:
    """Each leaf of a layout-only tree (`LAYOUT_OPS`) with the view of ``actual`` (the
    candidate's tensor) it must equal: a rename is the same view, a transpose the
    transposed view, a fusion its parts' slices along the axis."""
    if node.op == "leaf":
        yield node, actual
    elif node.op == "rename":
        yield from leaf_views(node.children[0], actual)
    elif node.op == "transpose":
        yield from leaf_views(node.children[0], actual.T)
    elif node.op == "fuse":
        offset = 0
        for child in node.children:
            index = [slice(None)] * actual.ndim
            index[node.axis] = slice(offset, offset + child.shape[node.axis])
            yield from leaf_views(child, actual[tuple(index)])
            offset += child.shape[node.axis]
    else:
        raise ValueError(f"{node.name}: a {node.op} step is no view of the candidate's tensor")
