"""Named tuples made in bulk: a survey or an inventory makes 60,000 to 120,000 of them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any, TypeVar

T = TypeVar("T", bound=tuple[Any, ...])


def as_rows(cls: type[T], fields: Iterable[tuple[Any, ...]]) -> Iterator[T]:
    """A ``cls`` of each tuple of fields, by `tuple.__new__` called from C by `map` (a named
    tuple's own ``__new__`` is Python: a call per row; a `partial` of it, a call more)."""
    new: Any = tuple.__new__
    return map(new, repeat(cls), fields)
