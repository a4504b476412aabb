"""Arrays described by how they are computed, not by their bytes: what a collective algorithm's messages carry
when the simulator runs every rank's algorithm ahead of time (``collective_batch``).

A ``Placeholder`` stands for a message not yet matched with its send; ``Add`` (``+`` or ``np.add``), ``Slice``,
``Reshape`` and ``Concat`` record the algorithm's own operations, in its own operand order, so evaluating them later
(``lazy_eval``) repeats exactly the sums the algorithm would have done. A ``Filled`` array is one the algorithm
allocated (``Instance.empty_like``) and writes into (``np.add(..., out=)``, ``out[a:b] = ...``). Anything else an
algorithm asks of such an array (its bytes, a comparison, another NumPy function) raises ``NeedsData``: the
simulator then runs that collective message by message, as before.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["NeedsData", "LazyArray", "Leaf", "Described", "Alias", "Placeholder", "Filled", "Add", "Slice", "Reshape",
           "Concat", "lift", "bottom_up", "view_base"]


class NeedsData(BaseException):
    """An algorithm needed the bytes of an array that is only described (a BaseException, so that no ``except
    Exception`` in an algorithm can swallow it and go on with a wrong guess)."""


class LazyArray:
    """A described array: shape and dtype on demand, the operations collective algorithms use, nothing else."""

    __slots__ = ("value", "_shape", "_dtype")

    def __init__(self) -> None:
        self.value: Any = None  # the evaluated array, once ``lazy_eval`` computed it
        self._shape: tuple | None = None  # found once (each node's shape depends on a chain of others)
        self._dtype: np.dtype | None = None

    def inputs(self) -> tuple["LazyArray", ...]:
        """The described arrays this one is computed from."""
        return ()

    # -- what an algorithm may ask -------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        if self._shape is None:
            self._shape = self._find_shape()
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        if self._dtype is None:
            self._dtype = self._find_dtype()
        return self._dtype

    def _find_shape(self) -> tuple:
        raise NeedsData("shape")

    def _find_dtype(self) -> np.dtype:
        raise NeedsData("dtype")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> "LazyArray":
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise NeedsData(f"indexing with {key!r}")
        return Slice(self, key)

    def reshape(self, *shape: Any) -> "LazyArray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return Reshape(self, tuple(int(d) for d in shape))

    def __add__(self, other: Any) -> "LazyArray":
        return Add(lift(self), lift(other))

    def __radd__(self, other: Any) -> "LazyArray":
        return Add(lift(other), lift(self))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, out: tuple | None = None, **kwargs: Any) -> Any:
        """``np.add(a, b)`` and ``np.add(a, b, out=view of a Filled array)`` (``ndarray + lazy`` comes here too)."""
        if ufunc is not np.add or method != "__call__" or len(inputs) != 2 or kwargs:
            raise NeedsData(f"numpy.{ufunc.__name__}.{method}")
        total = Add(lift(inputs[0]), lift(inputs[1]))
        if out is None:
            return total
        (target,) = out
        _write(target, total)
        return target

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if func is np.concatenate and set(kwargs) <= {"axis"} and len(args) <= 2:
            axis = kwargs.get("axis", args[1] if len(args) > 1 else 0)
            if axis == 0:
                return Concat([lift(a) for a in args[0]])
        raise NeedsData(f"numpy.{func.__name__}")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise NeedsData("the array's bytes")

    def __bool__(self) -> bool:
        raise NeedsData("the array's truth value")

    def __iter__(self) -> Any:
        raise NeedsData("iteration")


def lift(value: Any) -> LazyArray:
    """``value`` as a described array read now: itself (what a view of a ``Filled`` array holds now), or a ``Leaf``
    around a NumPy array (anything else needs data)."""
    if isinstance(value, LazyArray):
        filled = _filled_under(value)
        if filled is None or filled.bound is not None:
            return value
        _, start = view_base(value)
        held = filled.read(start, start + value.size)
        return held if value.ndim == 1 else Reshape(held, value.shape)
    if isinstance(value, np.ndarray):
        return Leaf(value)
    raise NeedsData(f"a {type(value).__name__} operand")


def bottom_up(root: LazyArray, known: Callable[[LazyArray], bool], compute: Callable[[LazyArray], None]) -> None:
    """``compute`` every described array from ``root`` down that is not ``known`` yet, inputs first, without
    recursion (a 1024-rank ring chains 2046 operations)."""
    stack = [root]
    while stack:
        top = stack[-1]
        if known(top):
            stack.pop()
            continue
        pending = [n for n in top.inputs() if not known(n)]
        if pending:
            stack.extend(pending)
            continue
        compute(top)
        stack.pop()


def view_base(node: LazyArray) -> tuple[LazyArray, int]:
    """The array ``node`` views (through slices, reshapes and bound aliases: matched placeholders, sealed filled
    arrays) and the flat position where ``node``'s elements start in it."""
    start = 0
    while isinstance(node, _View) or (isinstance(node, Alias) and node.bound is not None):
        if isinstance(node, Slice):
            start += node.rows()[0] * math.prod(node.base.shape[1:])
        node = node.base if isinstance(node, _View) else node.bound
    return node, start


def _filled_under(node: LazyArray) -> "Filled | None":
    """The ``Filled`` array ``node`` is a view of (through slices and reshapes), if any."""
    while isinstance(node, _View):
        node = node.base
    return node if isinstance(node, Filled) else None


def _write(target: Any, value: LazyArray) -> None:
    """Record ``target[...] = value`` where ``target`` is a 1-D view of a ``Filled`` array being filled; any other
    target (a real array's bytes), or a value of another shape or dtype (a broadcast, a cast), needs data."""
    filled = _filled_under(target) if isinstance(target, LazyArray) else None
    if filled is None or filled.bound is not None or target.ndim != 1:
        raise NeedsData("writing into an array that is not one the algorithm allocated")
    try:
        other = value.shape != target.shape or value.dtype != filled.dtype
    except NeedsData:  # a message not matched yet: its shape and dtype are its sender's, found when matched
        other = False
    if other:
        raise NeedsData("writing an array of another shape or dtype (a broadcast or a cast)")
    _, start = view_base(target)
    filled.write(start, start + target.size, value)


class Leaf(LazyArray):
    """A real NumPy array taking part (a rank's own input, or what it sent)."""

    __slots__ = ()

    def __init__(self, array: np.ndarray) -> None:
        super().__init__()
        self.value = array

    def _find_shape(self) -> tuple:
        return self.value.shape

    def _find_dtype(self) -> np.dtype:
        return self.value.dtype


class Described(LazyArray):
    """An array known only by its shape and dtype, those of ``like``: a local sum whose value a closed form gives
    (``collective_batch``), described so that a dry run can count the messages around it. Never evaluated."""

    __slots__ = ()

    def __init__(self, like: np.ndarray) -> None:
        super().__init__()
        self._shape, self._dtype = like.shape, like.dtype


class Alias(LazyArray):
    """An array that stands for another described array, ``bound``, once that one is known."""

    __slots__ = ("bound",)

    def __init__(self) -> None:
        super().__init__()
        self.bound: LazyArray | None = None

    def inputs(self) -> tuple[LazyArray, ...]:
        return (self.bound,)


class Placeholder(Alias):
    """What a receive returns before it is matched: the message from ``peer`` at algorithm step ``step``."""

    __slots__ = ("peer", "step")

    def __init__(self, peer: int, step: int) -> None:
        super().__init__()
        self.peer = peer
        self.step = step

    def bind(self, payload: Any) -> None:
        self.bound = lift(payload)

    def _find_shape(self) -> tuple:
        if self.bound is None:
            raise NeedsData(f"the shape of the message from worker {self.peer}")
        return self.bound.shape

    def _find_dtype(self) -> np.dtype:
        if self.bound is None:
            raise NeedsData(f"the dtype of the message from worker {self.peer}")
        return self.bound.dtype


class Filled(Alias):
    """A 1-D array an algorithm allocated and fills slice by slice, each element once (as the pipelined ring fills
    its result). A write records what a slice holds; reading a view (an operand, a message, ``lift``) takes what the
    written slices hold; once the algorithm has returned, ``seal`` binds the whole array to them. Writing an element
    twice, or reading one not written yet, needs data."""

    __slots__ = ("_starts", "_slices")

    def __init__(self, length: int, dtype: np.dtype) -> None:
        super().__init__()
        self._shape, self._dtype = (length,), np.dtype(dtype)
        self._starts: list[int] = []  # where the written slices start, sorted
        self._slices: dict[int, tuple[int, LazyArray]] = {}  # start -> (stop, what the slice holds)

    def __setitem__(self, key: Any, value: Any) -> None:
        _write(self[key], lift(value))

    def write(self, start: int, stop: int, value: LazyArray) -> None:
        """Elements ``[start, stop)``, none written yet, hold ``value``."""
        if start == stop:
            return
        i = bisect.bisect(self._starts, start)
        if (i and self._slices[self._starts[i - 1]][0] > start) or (i < len(self._starts) and self._starts[i] < stop):
            raise NeedsData("writing elements already written")
        self._starts.insert(i, start)
        self._slices[start] = (stop, value)

    def read(self, start: int, stop: int) -> LazyArray:
        """What elements ``[start, stop)`` hold now."""
        if start == stop:
            return Leaf(np.empty(0, self.dtype))
        parts: list[LazyArray] = []
        i, pos = bisect.bisect(self._starts, start) - 1, start
        while pos < stop:
            if not 0 <= i < len(self._starts) or not self._starts[i] <= pos < self._slices[self._starts[i]][0]:
                raise NeedsData("reading a slice of an allocated array before it was written")
            first = self._starts[i]
            last, value = self._slices[first]
            end = min(last, stop)
            parts.append(value if (first, last) == (pos, end) else Slice(value, slice(pos - first, end - first)))
            i, pos = i + 1, end
        return parts[0] if len(parts) == 1 else Concat(parts)

    def seal(self) -> None:
        """The algorithm has returned: this array is what its slices hold (needs data if one was never written)."""
        self.bound = self.read(0, self._shape[0])


class Add(LazyArray):
    """``a + b`` (same shapes; the shape is taken from whichever operand is already known)."""

    __slots__ = ("a", "b")

    def __init__(self, a: LazyArray, b: LazyArray) -> None:
        super().__init__()
        self.a, self.b = a, b

    def inputs(self) -> tuple[LazyArray, ...]:
        return self.a, self.b

    def _find_shape(self) -> tuple:
        try:
            return self.a.shape
        except NeedsData:
            return self.b.shape

    def _find_dtype(self) -> np.dtype:
        return np.result_type(self.a.dtype, self.b.dtype)


class _View(LazyArray):
    """The elements of ``base``, in another shape: same dtype, one input."""

    __slots__ = ("base",)

    def __init__(self, base: LazyArray) -> None:
        super().__init__()
        self.base = base

    def inputs(self) -> tuple[LazyArray, ...]:
        return (self.base,)

    def _find_dtype(self) -> np.dtype:
        return self.base.dtype


class Slice(_View):
    """``base[key]`` along the first axis (step 1)."""

    __slots__ = ("key", "_rows")

    def __init__(self, base: LazyArray, key: slice) -> None:
        super().__init__(base)
        self.key = key
        self._rows: tuple[int, int] | None = None

    def rows(self) -> tuple[int, int]:
        """The first-axis range this slice keeps, ``[start, stop)``."""
        if self._rows is None:
            start, stop, _ = self.key.indices(self.base.shape[0])
            self._rows = start, max(start, stop)
        return self._rows

    def _find_shape(self) -> tuple:
        start, stop = self.rows()
        return (stop - start, *self.base.shape[1:])


class Reshape(_View):
    """``base.reshape(shape)`` (row-major, as NumPy)."""

    __slots__ = ("new_shape",)

    def __init__(self, base: LazyArray, shape: tuple) -> None:
        super().__init__(base)
        self.new_shape = shape

    def _find_shape(self) -> tuple:
        if -1 not in self.new_shape:
            return self.new_shape
        known = math.prod(d for d in self.new_shape if d != -1)
        return tuple(self.base.size // known if d == -1 else d for d in self.new_shape)


class Concat(LazyArray):
    """``np.concatenate(parts, axis=0)``."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[LazyArray]) -> None:
        super().__init__()
        self.parts = parts

    def inputs(self) -> tuple[LazyArray, ...]:
        return tuple(self.parts)

    def _find_shape(self) -> tuple:
        shapes = [p.shape for p in self.parts]
        return (sum(s[0] for s in shapes), *shapes[0][1:])

    def _find_dtype(self) -> np.dtype:
        return np.result_type(*(p.dtype for p in self.parts))
