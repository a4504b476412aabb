"""``tf.TensorShape``: a possibly partial shape (unknown dimensions are None; an unknown rank is ``TensorShape(None)``),
where specs and ``from_generator`` take shapes. Dimensions are plain ints or None (TF's ``Dimension`` wrappers are
not kept); equality, compatibility and merging follow TF 2.21."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["TensorShape"]


def _dimension(value: Any) -> int | None:
    if value is None:
        return None
    try:
        dim = operator.index(value)
    except TypeError:
        raise TypeError(f"Dimension value must be integer or None or have an __index__ method, got value "
                        f"'{value!r}' with type '{type(value)}'") from None
    if dim < 0:
        raise ValueError(f"Dimension {dim} must be >= 0")
    return dim


class TensorShape:
    """A shape whose rank or dimensions may be unknown."""

    def __init__(self, dims: Any) -> None:
        if isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif dims is None:
            self._dims = None
        elif isinstance(dims, Iterable) and not isinstance(dims, (str, bytes)):
            self._dims = tuple(_dimension(d) for d in dims)
        else:
            self._dims = (_dimension(dims),)

    @property
    def rank(self) -> int | None:
        return None if self._dims is None else len(self._dims)

    ndims = rank

    @property
    def dims(self) -> list[int | None] | None:
        return None if self._dims is None else list(self._dims)

    def as_list(self) -> list[int | None]:
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def is_fully_defined(self) -> bool:
        return self._dims is not None and None not in self._dims

    def num_elements(self) -> int | None:
        if not self.is_fully_defined():
            return None
        total = 1
        for d in self._dims:
            total *= d
        return total

    def is_compatible_with(self, other: Any) -> bool:
        other = TensorShape(other)
        if self._dims is None or other._dims is None:
            return True
        return len(self._dims) == len(other._dims) and all(
            a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def merge_with(self, other: Any) -> "TensorShape":
        other = TensorShape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        return TensorShape([a if a is not None else b for a, b in zip(self._dims, other._dims)])

    def most_specific_compatible_shape(self, other: Any) -> "TensorShape":
        other = TensorShape(other)
        if self._dims is None or other._dims is None or len(self._dims) != len(other._dims):
            return TensorShape(None)
        return TensorShape([a if a == b else None for a, b in zip(self._dims, other._dims)])

    def with_rank(self, rank: int) -> "TensorShape":
        if self._dims is not None and len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self if self._dims is not None else TensorShape([None] * rank)

    def concatenate(self, other: Any) -> "TensorShape":
        other = TensorShape(other)
        if self._dims is None or other._dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other._dims)

    __add__ = concatenate

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __bool__(self) -> bool:
        return self._dims is not None

    def __iter__(self) -> Iterator[int | None]:
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key: int | slice) -> Any:
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else None
        return TensorShape(self._dims[key]) if isinstance(key, slice) else self._dims[key]

    def __eq__(self, other: object) -> bool:
        try:
            other = TensorShape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        return "TensorShape(None)" if self._dims is None else f"TensorShape({list(self._dims)})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        return f"({self._dims[0]},)" if len(self._dims) == 1 else "(" + ", ".join(map(str, self._dims)) + ")"
