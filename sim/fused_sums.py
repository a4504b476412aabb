"""A collective's results computed once, in the algorithm's order of additions, in few large NumPy calls.

Every described array (``lazy_array``) is rewritten as runs of flat elements ``(expression, offset, length)``.
Expressions are shared ("hash-consed"): when two ranks add the two halves of the same pair of vectors, as
halving-doubling does, both halves become one expression ``a + b`` over the whole length, and when the all-gather
puts the pieces back together, the runs merge into one. Adding elementwise gives the same bits whether NumPy does
it in one call or in many, so evaluating ``a + b`` once over the merged range changes nothing but the number of
calls. A 1024-rank all-reduce thus becomes one tree of 1023 whole-vector additions, evaluated depth first into
a handful of temporary arrays, and one result array shared by all ranks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mirrorlab.tensor import immutable, root_array

from .lazy_array import Alias, Concat, LazyArray, Leaf, Reshape, Slice, bottom_up, view_base

__all__ = ["FusedSums"]

Run = tuple[Any, int, int]  # (expression, first element, length)


class _Flat:
    """A leaf expression: the elements of one NumPy array's memory, flat."""

    __slots__ = ("flat",)

    def __init__(self, flat: np.ndarray) -> None:
        self.flat = flat

    @property
    def length(self) -> int:
        return self.flat.shape[0]


class _Sum:
    """``a + b`` elementwise over their whole (equal) length, ``a`` the left operand."""

    __slots__ = ("a", "b", "length")

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b, self.length = a, b, a.length


class _Part:
    """``base[off:off + length]`` as an expression of its own."""

    __slots__ = ("base", "off", "length")

    def __init__(self, base: Any, off: int, length: int) -> None:
        self.base, self.off, self.length = base, off, length


def _append(runs: list[Run], run: Run) -> None:
    """Add ``run`` after ``runs``, merging it into the last run when it continues the same expression."""
    if run[2] == 0:
        return
    if runs:
        expr, off, length = runs[-1]
        if expr is run[0] and off + length == run[1]:
            runs[-1] = (expr, off, length + run[2])
            return
    runs.append(run)


def _cut(runs: list[Run], start: int, stop: int) -> list[Run]:
    """The runs of flat elements ``[start, stop)``."""
    out: list[Run] = []
    pos = 0
    for expr, off, length in runs:
        lo, hi = max(start, pos), min(stop, pos + length)
        if lo < hi:
            out.append((expr, off + lo - pos, hi - lo))
        pos += length
        if pos >= stop:
            break
    return out


class FusedSums:
    """Runs and values for the described arrays of one collective instance (shared by all its ranks)."""

    def __init__(self) -> None:
        self._leaves: dict[int, tuple[np.ndarray, _Flat]] = {}
        self._sums: dict[tuple[int, int], _Sum] = {}
        self._parts: dict[tuple[int, int, int], _Part] = {}
        self._runs: dict[int, tuple[LazyArray, list[Run]]] = {}
        self._arrays: dict[tuple[Run, ...], np.ndarray] = {}

    # -- values -----------------------------------------------------------------------------------

    def array(self, node: LazyArray) -> np.ndarray:
        """``node``'s value, read-only; a slice or reshape of a node views that node's (shared) value."""
        base, start = view_base(node)
        flat = self._flat_value(base)
        return flat[start:start + node.size].reshape(node.shape)

    def _flat_value(self, node: LazyArray) -> np.ndarray:
        runs = self.runs(node)
        key = tuple(runs)
        value = self._arrays.get(key)
        if value is None:
            pieces = [_evaluate(expr, off, off + length) for expr, off, length in runs]
            if not pieces:
                value = np.empty(0, node.dtype)
            elif len(pieces) == 1:
                value, owned = pieces[0]
                if not owned and not immutable(value):
                    value = value.copy()  # a writable input handed on as it is: the network would have copied it
            else:
                value = np.concatenate([p for p, _ in pieces])
            if value.flags.owndata:
                value.flags.writeable = False
            self._arrays[key] = value
        return value

    # -- runs -------------------------------------------------------------------------------------

    def runs(self, node: LazyArray) -> list[Run]:
        """``node``'s flat elements as runs of shared expressions (computed once per node, without recursion)."""
        bottom_up(node, lambda n: id(n) in self._runs,
                  lambda n: self._runs.__setitem__(id(n), (n, self._node_runs(n))))
        return self._runs[id(node)][1]

    def _node_runs(self, node: LazyArray) -> list[Run]:
        if isinstance(node, Leaf):
            return self._leaf_runs(node.value)
        if isinstance(node, Alias):  # a matched placeholder, a sealed filled array
            return self._runs[id(node.bound)][1]
        if isinstance(node, Reshape):
            return self._runs[id(node.base)][1]
        if isinstance(node, Slice):
            start, stop = node.rows()
            row = math.prod(node.base.shape[1:])
            return _cut(self._runs[id(node.base)][1], start * row, stop * row)
        if isinstance(node, Concat):
            out: list[Run] = []
            for part in node.parts:
                for run in self._runs[id(part)][1]:
                    _append(out, run)
            return out
        return self._sum_runs(self._runs[id(node.a)][1], self._runs[id(node.b)][1])

    def _leaf_runs(self, array: np.ndarray) -> list[Run]:
        """The runs of a real array: positions in the memory of the array it views, when it views one plainly, so
        that the halves of one input sent to different ranks stay one expression."""
        root = root_array(array)
        key = id(root)
        offset = 0
        plain = (array.flags.c_contiguous and root.flags.c_contiguous and root.dtype == array.dtype)
        if plain:
            delta = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            offset, rest = divmod(delta, max(array.dtype.itemsize, 1))
            plain = rest == 0 and 0 <= offset and offset + array.size <= root.size
        if not plain:
            root, key, offset = array, id(array), 0
        entry = self._leaves.get(key)
        if entry is None:
            entry = self._leaves[key] = (root, _Flat(root.reshape(-1)))
        return [(entry[1], offset, array.size)] if array.size else []

    def _sum_runs(self, left: list[Run], right: list[Run]) -> list[Run]:
        """Runs of ``left + right`` (equal lengths), split where either side's runs change."""
        if sum(r[2] for r in left) != sum(r[2] for r in right):
            raise RuntimeError("mirrorlab.sim: a collective added arrays of different lengths in its fused sums (a "
                               "simulator bug; please report it with the replay line)")
        out: list[Run] = []
        i = j = 0
        a, b = list(left), list(right)
        while i < len(a):
            (ea, oa, la), (eb, ob, lb) = a[i], b[j]
            n = min(la, lb)
            _append(out, self._sum(ea, oa, eb, ob, n))
            if la == n:
                i += 1
            else:
                a[i] = (ea, oa + n, la - n)
            if lb == n:
                j += 1
            else:
                b[j] = (eb, ob + n, lb - n)
        return out

    def _sum(self, ea: Any, oa: int, eb: Any, ob: int, n: int) -> Run:
        if oa == ob and ea.length == eb.length:
            return self._shared_sum(ea, eb), oa, n
        return self._shared_sum(self._part(ea, oa, n), self._part(eb, ob, n)), 0, n

    def _shared_sum(self, a: Any, b: Any) -> _Sum:
        key = (id(a), id(b))
        expr = self._sums.get(key)
        if expr is None:
            expr = self._sums[key] = _Sum(a, b)
        return expr

    def _part(self, base: Any, off: int, length: int) -> Any:
        if off == 0 and length == base.length:
            return base
        key = (id(base), off, length)
        part = self._parts.get(key)
        if part is None:
            part = self._parts[key] = _Part(base, off, length)
        return part


def _evaluate(expr: Any, start: int, stop: int) -> tuple[np.ndarray, bool]:
    """Elements ``[start, stop)`` of ``expr`` and whether the array is a fresh one of ours (then later additions
    go into it in place: the same bits, without a new array per addition). Depth first, without recursion."""
    EVAL, ADD = 0, 1
    stack: list[tuple] = [(EVAL, expr, start, stop)]
    values: list[tuple[np.ndarray, bool]] = []
    while stack:
        frame = stack.pop()
        if frame[0] == ADD:
            (vb, ob), (va, oa) = values.pop(), values.pop()
            if oa and va.dtype == vb.dtype:
                values.append((np.add(va, vb, out=va), True))
            elif ob and va.dtype == vb.dtype:
                values.append((np.add(va, vb, out=vb), True))
            else:
                values.append((va + vb, True))
            continue
        _, e, s, t = frame
        while isinstance(e, _Part):
            e, s, t = e.base, s + e.off, t + e.off
        if isinstance(e, _Flat):
            values.append((e.flat[s:t], False))
        else:
            stack.append((ADD,))
            stack.append((EVAL, e.b, s, t))
            stack.append((EVAL, e.a, s, t))
    return values[0]
