"""More of TF's array functions: tiling, reversing, splitting and unstacking, boolean masks, cumulative sums, sorting,
padding, evenly spaced values, identity matrices, norms, matrix transposes and ``cond``, with TF 2.21's dtypes, values and
errors; the ones TF differentiates carry their gradients on a recording tape."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import errors
from .array_ops import _tensor, check_types, reduce_sum, sqrt, square, transpose
from .autodiff import untracked, watched, with_gradient
from ..tensor import array_module

__all__ = ["argsort", "boolean_mask", "cond", "cumsum", "einsum", "eye", "gather_nd", "linspace", "matrix_transpose", "norm", "pad", "reverse",
           "sort", "split", "tensordot", "tile", "top_k", "unstack"]


def tile(input: Any, multiples: Any, name: str | None = None) -> Any:  # noqa: A002 (TF's name)
    """``input`` repeated ``multiples[i]`` times along dimension ``i``; the gradient sums the copies."""
    input = watched(input)  # noqa: A001
    value = _tensor(input)
    reps = [int(m) for m in np.atleast_1d(_tensor(multiples))]
    if len(reps) != value.ndim:
        raise errors.InvalidArgumentError(f"Expected multiples argument to be a vector of length {value.ndim} but got "
                                          f"length {len(reps)} [Op:Tile]")
    result = array_module(value).tile(value, reps)

    def grads(g: Any) -> list[Any]:
        split = g.reshape([d for r, n in zip(reps, value.shape) for d in (r, n)])
        return [split.sum(axis=tuple(builtins.range(0, 2 * value.ndim, 2)))]
    return with_gradient(result, [input], grads)


def reverse(tensor: Any, axis: Any, name: str | None = None) -> Any:
    """``tensor`` reversed along each dimension in ``axis``."""
    tensor = watched(tensor)
    value = _tensor(tensor)
    axes = tuple(int(a) % builtins.max(value.ndim, 1) for a in np.atleast_1d(_tensor(axis)))
    result = np.flip(value, axis=axes).copy()
    return with_gradient(result, [tensor], lambda g: [np.flip(g, axis=axes)])


def unstack(value: Any, num: int | None = None, axis: int = 0, name: str = "unstack") -> list[Any]:
    """The slices of ``value`` along ``axis``, as a list."""
    value = watched(value)
    array = _tensor(value)
    if not -array.ndim <= axis < array.ndim:
        raise ValueError(f"Argument `axis` = {axis} not in range [{-array.ndim}, {array.ndim})")
    count = array.shape[axis]
    if num is not None and num != count:
        raise errors.InvalidArgumentError(f"Input shape axis {axis} must equal {num}, got shape "
                                          f"[{','.join(map(str, array.shape))}] [Op:Unpack]")

    def piece(k: int) -> Any:
        def grads(g: Any) -> list[Any]:
            full = np.zeros(array.shape, g.dtype)
            np.moveaxis(full, axis, 0)[k] = g
            return [full]
        return with_gradient(np.take(array, k, axis=axis), [value], grads)
    return [piece(k) for k in builtins.range(count)]


def split(value: Any, num_or_size_splits: Any, axis: int = 0, num: int | None = None,
          name: str = "split") -> list[Any]:
    """``value`` cut along ``axis`` into that many equal parts, or parts of the given sizes (one may be -1)."""
    value = watched(value)
    array = _tensor(value)
    length = array.shape[axis]
    if np.ndim(untracked(num_or_size_splits)) == 0:
        parts = int(num_or_size_splits)
        if parts <= 0 or length % parts:
            raise errors.InvalidArgumentError(f"Number of ways to split should evenly divide the split dimension, but "
                                              f"got split_dim {axis} (size = {length}) and num_split {parts} "
                                              "[Op:Split]")
        sizes = [length // parts] * parts
    else:
        sizes = [int(s) for s in np.atleast_1d(_tensor(num_or_size_splits))]
        if sizes.count(-1) == 1:
            sizes[sizes.index(-1)] = length - (builtins.sum(sizes) + 1)
        if builtins.sum(sizes) != length or builtins.min(sizes) < 0:
            raise errors.InvalidArgumentError(f"Determined shape must either match input shape along split_dim exactly "
                                              f"if fully specified, or be less than the size of the input along "
                                              f"split_dim if not fully specified.  Got: {builtins.sum(sizes)} "
                                              "[Op:SplitV]")
    starts = np.cumsum([0, *sizes[:-1]])

    def piece(start: int, size: int) -> Any:
        def grads(g: Any) -> list[Any]:
            full = np.zeros(array.shape, g.dtype)
            np.moveaxis(full, axis, 0)[start:start + size] = np.moveaxis(g, axis, 0)
            return [full]
        return with_gradient(np.take(array, np.arange(start, start + size), axis=axis), [value], grads)
    return [piece(int(start), size) for start, size in zip(starts, sizes)]


def boolean_mask(tensor: Any, mask: Any, axis: int | None = None, name: str = "boolean_mask") -> Any:
    """The elements (or slices) of ``tensor`` where ``mask`` is True, flattened over the mask's dimensions."""
    tensor = watched(tensor)
    value, keep = _tensor(tensor), _tensor(mask).astype(bool, copy=False)  # (nonzero is True, as TF's mask)
    start = 0 if axis is None else int(axis)
    if keep.ndim == 0:
        raise ValueError("mask cannot be scalar.")
    if value.shape[start:start + keep.ndim] != keep.shape:
        raise ValueError(f"Shapes {_shape_text(value.shape[start:start + keep.ndim])} and {_shape_text(keep.shape)} "
                         "are incompatible")
    flat = value.reshape(value.shape[:start] + (-1,) + value.shape[start + keep.ndim:])
    chosen = np.flatnonzero(keep)
    result = np.take(flat, chosen, axis=start)

    def grads(g: Any) -> list[Any]:
        full = np.zeros(flat.shape, g.dtype)
        np.moveaxis(full, start, 0)[chosen] = np.moveaxis(g, start, 0)
        return [full.reshape(value.shape)]
    return with_gradient(result, [tensor], grads)


def cumsum(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False, name: str | None = None) -> Any:
    """Running sums along ``axis`` (``exclusive``: each without itself; ``reverse``: from the end)."""
    x = watched(x)
    value = _tensor(x)
    axis = int(axis)

    def running(v: Any, backwards: bool) -> Any:
        v = np.flip(v, axis) if backwards else v
        out = np.cumsum(v, axis=axis, dtype=v.dtype)
        if exclusive:
            out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                                  np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis=axis)
        return np.flip(out, axis) if backwards else out
    return with_gradient(running(value, reverse), [x], lambda g: [running(g, not reverse)])


def sort(values: Any, axis: int = -1, direction: str = "ASCENDING", name: str | None = None) -> Any:
    """``values`` sorted along ``axis`` (stable; ``direction`` ASCENDING or DESCENDING)."""
    values = watched(values)
    value = _tensor(values)
    order = argsort(value, axis=axis, direction=direction, stable=True)
    result = np.take_along_axis(value, order, axis=axis)

    def grads(g: Any) -> list[Any]:
        full = np.zeros(value.shape, g.dtype)
        np.put_along_axis(full, order, g, axis=axis)
        return [full]
    return with_gradient(result, [values], grads)


def argsort(values: Any, axis: int = -1, direction: str = "ASCENDING", stable: bool = False,
            name: str | None = None) -> Any:
    """The indices that sort ``values`` along ``axis`` (int32)."""
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"Argument `direction` should be one of {{'ASCENDING', 'DESCENDING'}}. Received: "
                         f"direction={direction}")
    value = _tensor(values)
    if direction == "ASCENDING":
        return np.argsort(value, axis=axis, kind="stable").astype(np.int32)
    flipped = np.argsort(np.flip(value, axis=axis), axis=axis, kind="stable")
    return np.flip(value.shape[axis] - 1 - flipped, axis=axis).astype(np.int32)


def linspace(start: Any, stop: Any, num: int, name: str | None = None, axis: int = 0) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` (both included), in ``start``'s float dtype."""
    first = _tensor(start)
    if first.dtype.kind in "iu":
        first = first.astype(np.float64)  # integer bounds give float64, as TF's linspace
    check_types(first, "bfloat16, half, float, double", "linspace")
    return np.linspace(first, _tensor(stop).astype(first.dtype), int(num), axis=axis).astype(first.dtype)


def eye(num_rows: int, num_columns: int | None = None, batch_shape: Sequence[int] | None = None,
        dtype: Any = np.float32, name: str | None = None) -> Any:
    """An identity matrix (``num_rows`` by ``num_columns``), repeated over ``batch_shape``."""
    matrix = np.eye(int(num_rows), None if num_columns is None else int(num_columns), dtype=np.dtype(dtype))
    return np.broadcast_to(matrix, (*tuple(batch_shape or ()), *matrix.shape)).copy()


def norm(tensor: Any, ord: Any = "euclidean", axis: Any = None, keepdims: bool | None = None,  # noqa: A002
         name: str | None = None) -> Any:
    """The Euclidean norm (of the whole tensor, or of vectors along ``axis``)."""
    if ord not in ("euclidean", "fro", 2) or (ord == 2 and axis is None):
        raise ValueError(f"mirrorlab's tf.norm computes the Euclidean norm only; got ord={ord!r}.\nFix: pass "
                         "ord='euclidean' (or compute other norms from reduce_sum and abs).")
    return sqrt(reduce_sum(square(tensor), axis=axis, keepdims=bool(keepdims)))


def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Any:
    """``a`` with its last two dimensions swapped."""
    rank = np.ndim(untracked(_tensor(a)))
    if rank < 2:
        raise ValueError(f"Argument `a` should be a (batch) matrix with rank >= 2.  Received `a` = {a} with shape: "
                         f"{_shape_text(np.shape(_tensor(a)))}")
    return transpose(a, [*builtins.range(rank - 2), rank - 1, rank - 2])


def cond(pred: Any, true_fn: Callable[[], Any] | None = None, false_fn: Callable[[], Any] | None = None,
         name: str | None = None) -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()`` (run eagerly, as TF does outside a function)."""
    if true_fn is None or false_fn is None:
        raise TypeError("true_fn and false_fn arguments to tf.cond must be callable.")
    return true_fn() if bool(np.asarray(untracked(pred))) else false_fn()


def _shape_text(shape: Sequence[int]) -> str:
    return f"({', '.join(str(d) for d in shape)}{',' if len(shape) == 1 else ''})"



def pad(tensor: Any, paddings: Any, mode: str = "CONSTANT", constant_values: Any = 0, name: str | None = None) -> Any:
    """``tensor`` padded by ``paddings`` (``[[before, after], ...]`` per dimension): with ``constant_values``, or
    mirrored (REFLECT leaves the edge out, SYMMETRIC repeats it); the gradient sums back onto the positions each
    padded value came from."""
    tensor = watched(tensor)
    value = _tensor(tensor)
    widths = np.asarray(_tensor(paddings)).astype(np.int64)
    if widths.shape != (value.ndim, 2):
        raise errors.InvalidArgumentError(f"The first dimension of paddings must be the rank of inputs"
                                          f"[{','.join(map(str, widths.shape))}] [{','.join(map(str, value.shape))}] "
                                          "[Op:Pad]")
    mode = mode.upper()
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError(f'Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", or "SYMMETRIC". '
                         f"Received `mode` = {mode}")
    pairs = [tuple(int(w) for w in row) for row in widths]
    if mode == "CONSTANT":
        result = np.pad(value, pairs, constant_values=np.asarray(untracked(constant_values)).astype(value.dtype))
        source = np.pad(np.arange(value.size).reshape(value.shape), pairs, constant_values=-1)
    else:
        numpy_mode = mode.lower()
        result = np.pad(value, pairs, mode=numpy_mode)
        source = np.pad(np.arange(value.size).reshape(value.shape), pairs, mode=numpy_mode)

    def grads(g: Any) -> list[Any]:
        inside = source >= 0
        summed = np.bincount(source[inside], weights=np.asarray(g)[inside], minlength=value.size)
        return [summed.reshape(value.shape).astype(g.dtype)]
    return with_gradient(result, [tensor], grads)


class TopKV2(NamedTuple):
    """``top_k``'s result: the largest values and their indices (int32)."""

    values: Any
    indices: Any


def top_k(input: Any, k: int = 1, sorted: bool = True, index_type: Any = np.int32,  # noqa: A002 (TF's names)
          name: str | None = None) -> TopKV2:
    """The ``k`` largest entries along the last dimension (ties to the lower index), and where they are; the
    values' gradient goes back to those positions."""
    input = watched(input)  # noqa: A001
    value = _tensor(input)
    k = int(untracked(k))
    if value.ndim < 1 or value.shape[-1] < k:
        raise errors.InvalidArgumentError(f"input must have at least k columns. Had {value.shape[-1] if value.ndim else 0}"
                                          f", needed {k} [Op:TopKV2]")
    if k < 0:
        raise errors.InvalidArgumentError(f"Need k >= 0, got {k} [Op:TopKV2]")
    if value.dtype.kind == "f":  # NaN counts as the largest value, as TF's kernel orders it
        key = np.where(np.isnan(value), -np.inf, -value)
    else:
        key = ~value if value.dtype.kind == "b" else -value.astype(np.int64 if value.dtype.kind in "iu" else value.dtype)
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(value, order, axis=-1)

    def grads(g: Any) -> list[Any]:
        full = np.zeros(value.shape, g.dtype)
        np.put_along_axis(full, order, g, axis=-1)
        return [full]
    return TopKV2(with_gradient(values, [input], grads), order.astype(np.dtype(index_type)))


def einsum(equation: str, *inputs: Any, name: str | None = None, **kwargs: Any) -> Any:
    """Einstein summation over ``inputs`` (in the first one's dtype); differentiable for equations whose operands
    name each of their dimensions once (the gradient of an operand sums the others against the output's)."""
    for x in inputs:
        if isinstance(untracked(x), (list, tuple)):  # TF's einsum reads each input's shape
            raise AttributeError(f"'{type(untracked(x)).__name__}' object has no attribute 'shape'")
    watched_inputs = [watched(x) for x in inputs]
    values = [_tensor(x) for x in watched_inputs]
    values = [v.astype(values[0].dtype, copy=False) for v in values]  # NumPy operands cast to the first's dtype
    spec = equation.replace(" ", "")
    if "->" not in spec:
        letters = spec.replace(",", "")
        spec = f"{spec}->{''.join(sorted(c for c in set(letters) if letters.count(c) == 1))}"
    operands, output = spec.split("->")
    subscripts = operands.split(",")
    if len(subscripts) != len(values):
        raise errors.InvalidArgumentError(f"Expecting {len(subscripts)} inputs but got: {len(values)} [Op:Einsum]")
    result = np.einsum(spec, *values).astype(values[0].dtype, copy=False)

    def grads(g: Any) -> list[Any]:
        parts = []
        for i, (sub, value) in enumerate(zip(subscripts, values)):
            if len(set(sub)) != len(sub) or "." in sub:
                raise NotImplementedError(f"mirrorlab differentiates einsum only where each operand names its "
                                          f"dimensions once; got {equation!r}.\nFix: write the operation with "
                                          "matmul, transpose and reduce_sum.")
            others = [s for j, s in enumerate(subscripts) if j != i]
            known = set(output).union(*others) if others else set(output)
            kept = "".join(c for c in sub if c in known)
            partial = np.einsum(f"{','.join([output, *others])}->{kept}", g, *[v for j, v in enumerate(values) if j != i])
            shape = [value.shape[sub.index(c)] if c in kept else 1 for c in sub]
            order = [kept.index(c) for c in sub if c in kept]
            partial = np.transpose(partial, order).reshape(shape)
            parts.append(np.broadcast_to(partial, value.shape).astype(value.dtype))
        return parts
    return with_gradient(result, watched_inputs, grads)


def gather_nd(params: Any, indices: Any, batch_dims: int = 0, name: str | None = None) -> Any:
    """The slices of ``params`` at the index tuples in the last dimension of ``indices``; the gradient adds back
    where they came from."""
    params = watched(params)
    value, index = _tensor(params), _tensor(indices)
    check_types(index, "int16, int32, int64", "gather_nd's indices", attr="Tindices")
    if int(batch_dims):
        raise NotImplementedError("mirrorlab's gather_nd takes batch_dims=0 only.\nFix: gather each batch element "
                                  "with tf.gather_nd in a loop, or use tf.gather(..., batch_dims=...).")
    depth = index.shape[-1]
    if depth > value.ndim:
        raise errors.InvalidArgumentError(f"index innermost dimension length must be <= params rank; saw: {depth} vs. "
                                          f"{value.ndim} [Op:GatherNd]")
    flat = index.reshape(-1, depth)
    for k, row in enumerate(flat):
        if any(not 0 <= i < d for i, d in zip(row, value.shape)):
            position = np.unravel_index(k, index.shape[:-1]) if index.ndim > 1 else ()
            where = ",".join(map(str, position)) if position else "0"
            raise errors.InvalidArgumentError(f"indices[{where}] = [{', '.join(map(str, row))}] does not index into "
                                              f"param shape [{','.join(map(str, value.shape))}], node name: GatherNd "
                                              "[Op:GatherNd]")
    picks = tuple(index[..., d] for d in builtins.range(depth))
    result = value[picks]

    def grads(g: Any) -> list[Any]:
        full = np.zeros(value.shape, g.dtype)
        np.add.at(full, picks, g)
        return [full]
    return with_gradient(np.asarray(result), [params], grads)


def tensordot(a: Any, b: Any, axes: Any, name: str | None = None) -> Any:
    """Sums of products over ``axes`` (an int: the last of ``a`` against the first of ``b``; or two lists), as
    ``einsum`` computes and differentiates it."""
    left, right = (x if hasattr(untracked(x), "shape") else _tensor(x) for x in (a, b))
    rank_a, rank_b = np.ndim(untracked(left)), np.ndim(untracked(right))
    if np.ndim(untracked(axes)) == 0:
        count = int(untracked(axes))
        if count < 0 or count > min(rank_a, rank_b):
            raise ValueError(f"`axes` must be at most the rank of the tensors; got axes={count} for ranks {rank_a} "
                             f"and {rank_b}.\nFix: pass an axes count no larger than either tensor's rank.")
        a_axes, b_axes = list(range(rank_a - count, rank_a)), list(range(count))
    else:
        a_axes, b_axes = ([int(i) % max(rank, 1) for i in np.atleast_1d(part)]
                          for part, rank in zip(untracked(axes), (rank_a, rank_b)))
    if len(a_axes) != len(b_axes):
        raise ValueError(f"Different number of contraction axes 'a' and 'b', {len(a_axes)} != {len(b_axes)}.")
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    a_sub = [next(letters) for _ in range(rank_a)]
    b_sub = [next(letters) for _ in range(rank_b)]
    for i, j in zip(a_axes, b_axes):
        b_sub[j] = a_sub[i]
    out = [c for k, c in enumerate(a_sub) if k not in a_axes] + [c for k, c in enumerate(b_sub) if k not in b_axes]
    return einsum(f"{''.join(a_sub)},{''.join(b_sub)}->{''.join(out)}", left, right)
