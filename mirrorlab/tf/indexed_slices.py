"""Sparse gradients (``IndexedSlices``, what TF's gather and Embedding give a tape) treated as TF treats them: densified
as ``tf.convert_to_tensor`` does, summed as the tape aggregates them, and mapped value by value as Keras' ops do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import IndexedSlices, array_module, like, to_host

__all__ = ["accumulate", "dense", "map_values"]


def dense(t: Any) -> Any:
    """``t`` as a dense tensor: IndexedSlices become zeros of their ``dense_shape`` with each row added at its index
    in order (repeated indices add up, as TF's unsorted_segment_sum); anything else passes through."""
    if not isinstance(t, IndexedSlices):
        return t
    if t.dense_shape is None:
        raise ValueError("Tensor conversion requested for IndexedSlices for argument `value` without dense_shape: "
                         f"{t!r}\nFix: give the IndexedSlices a dense_shape (the shape of the tensor they slice).")
    out = np.zeros(tuple(int(d) for d in np.asarray(to_host(t.dense_shape))), t.values.dtype)
    np.add.at(out, np.asarray(to_host(t.indices)).reshape(-1), np.asarray(to_host(t.values)))
    return like(out, t.values)  # (added on the host, then on the values' device)


def map_values(t: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to the values of IndexedSlices (same indices), or to a dense ``t``: what Keras' element-wise ops
    (``multiply`` by a scalar, ``square``, ``clip``) do to a sparse gradient."""
    return IndexedSlices(fn(t.values), t.indices, t.dense_shape) if isinstance(t, IndexedSlices) else fn(t)


def accumulate(total: Any, partial: Any) -> Any:
    """Two gradients of one source summed as TF's tape aggregates them: dense ones add, IndexedSlices concatenate (the
    indices as int64 when their dtypes differ), and a dense one with IndexedSlices gives a dense sum."""
    sparse = isinstance(total, IndexedSlices), isinstance(partial, IndexedSlices)
    if not any(sparse):
        return total + partial
    if not all(sparse):
        return dense(total) + dense(partial)
    indices = [total.indices.reshape(-1), partial.indices.reshape(-1)]
    if indices[0].dtype != indices[1].dtype:
        indices = [i.astype(np.int64) for i in indices]
    return IndexedSlices(array_module(total.values).concatenate([total.values, partial.values]),
                         array_module(indices[0]).concatenate(indices), total.dense_shape)
