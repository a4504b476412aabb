"""Sparse variable updates: the ``scatter_*`` methods taking ``IndexedSlices``, applied to one copy, and
how replicas' slices combine for an aggregated ON_WRITE variable (TF 2.21's rules)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import errors
from ..aggregation import ReduceOp
from ..collective.group import truediv_dtype
from .kernel_dtypes import tf_dtype
from ..tensor import IndexedSlices, like, to_host, truncating_divide
from .values import ReplicaValues

if TYPE_CHECKING:
    from .strategy import Strategy

__all__ = ["ScatterMethods", "SCATTER_KINDS", "UNAGGREGATABLE", "check_scatter_kernel", "is_scatter", "scatter_rows",
           "reduce_slices"]

_UFUNCS = {"scatter_add": np.add, "scatter_sub": np.subtract, "scatter_mul": np.multiply,
           "scatter_div": np.divide, "scatter_max": np.maximum, "scatter_min": np.minimum}
SCATTER_KINDS = ("scatter_update", *_UFUNCS)
# Updates that cannot combine several replicas' slices (TF refuses them for SUM/MEAN variables in replicas).
UNAGGREGATABLE = ("scatter_update", "scatter_max", "scatter_min")
# The dtypes of TF's arithmetic ResourceScatter* kernels, as their errors list them.
_NUMBER_TYPES = ("float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, "
                 "quint16, uint16, complex128, half, uint32, uint64")


def is_scatter(kind: str) -> bool:
    """True for the sparse update kinds."""
    return kind in SCATTER_KINDS


def _check(sparse_delta: Any) -> None:
    """TF's TypeError unless ``sparse_delta`` is IndexedSlices (or a PerReplica of them)."""
    parts = sparse_delta.values if isinstance(sparse_delta, ReplicaValues) else (sparse_delta,)
    if not all(isinstance(p, IndexedSlices) for p in parts):
        raise TypeError(f"Argument `sparse_delta` must be a `tf.IndexedSlices`. Received arg: {sparse_delta}")


def _scatter_method(kind: str, doc: str) -> Callable[..., Any]:
    """The variable method ``kind(sparse_delta, use_locking=False, name=None)``."""
    def method(self: Any, sparse_delta: Any, use_locking: bool = False, name: Any = None) -> Any:
        _check(sparse_delta)
        return self._update(kind, sparse_delta, True)
    method.__name__ = method.__qualname__ = kind
    method.__doc__ = doc
    return method


class ScatterMethods:
    """TF's ``scatter_*`` variable methods; each returns what ``assign`` returns (through the variable's
    ``_update``)."""

    scatter_update = _scatter_method("scatter_update", "Set the rows ``sparse_delta.indices`` to its values.")
    scatter_add = _scatter_method("scatter_add", "Add the values to the indexed rows (repeated indices add up).")
    scatter_sub = _scatter_method("scatter_sub", "Subtract the values from the indexed rows.")
    scatter_mul = _scatter_method("scatter_mul", "Multiply the indexed rows by the values.")
    scatter_div = _scatter_method("scatter_div", "Divide the indexed rows by the values (integers round toward zero).")
    scatter_max = _scatter_method("scatter_max", "The element-wise maximum of the indexed rows and the values.")
    scatter_min = _scatter_method("scatter_min", "The element-wise minimum of the indexed rows and the values.")


def check_scatter_kernel(kind: str, dtype: np.dtype) -> None:
    """TF's error where the scatter kernel has no version for ``dtype`` (the arithmetic ones need numbers)."""
    if kind != "scatter_update" and dtype.kind not in "iufc":
        op = f"ResourceScatter{kind[8:].capitalize()}"
        raise errors.InvalidArgumentError(
            f"Value for attr 'dtype' of {tf_dtype(dtype)} is not in the list of allowed values: {_NUMBER_TYPES}\n\t; "
            f"NodeDef: {{{{node {op}}}}}\nFix: {kind} needs a numeric variable; scatter_update works for every dtype.")


def scatter_rows(current: Any, kind: str, delta: IndexedSlices, dtype: np.dtype) -> Any:
    """``current`` with ``delta`` applied by ``kind`` (computed on the host, returned on ``current``'s device)."""
    op = f"ResourceScatter{kind[8:].capitalize()}"
    check_scatter_kernel(kind, dtype)
    result = np.array(to_host(current))
    indices = np.asarray(to_host(delta.indices)).reshape(-1)
    values = np.asarray(to_host(delta.values))
    rows = result.shape[0] if result.ndim else 0
    for i, index in enumerate(indices):
        if not 0 <= index < rows:
            raise errors.InvalidArgumentError(f"indices[{i}] = {index} is not in [0, {rows}) [Op:{op}]")
    if kind == "scatter_update":
        result[indices] = values
    elif kind == "scatter_div" and dtype.kind in "iub":
        for index, value in zip(indices, values.astype(dtype, copy=False)):
            result[index] = truncating_divide(result[index], value)  # TF's kernel divides as C++ does
    else:
        _UFUNCS[kind].at(result, indices, values.astype(dtype, copy=False))
    return like(result, current)


def _check_collective_gather(values: Any) -> None:
    """TF's error where the collective that gathers several workers' rows has no kernel for their dtype."""
    if np.dtype(values.dtype).name not in ("float32", "float16", "float64", "int32", "int64"):
        raise errors.InvalidArgumentError(
            f"Value for attr 'T' of {tf_dtype(values)} is not in the list of allowed values: float, half, double, "
            "int32, int64\n\t; NodeDef: {{node CollectiveGatherV2}}\nFix: cast the rows to a number type first.")


def reduce_slices(strategy: "Strategy", op: ReduceOp, slices: Sequence[IndexedSlices], site: str) -> IndexedSlices:
    """The local replicas' slices combined over all replicas: concatenated (SUM), with values divided by
    the replica count (MEAN, TF's truediv: integer values become float32 or float64)."""
    n = strategy.num_replicas_in_sync
    if n == 1:
        return slices[0]
    if strategy.extended._num_workers > 1:
        _check_collective_gather(slices[0].values)
    values, indices = strategy.extended._gather_leaves(
        [[s.values for s in slices], [s.indices for s in slices]], 0, site, None)
    if op == ReduceOp.MEAN:
        values = (values / n).astype(truediv_dtype(values.dtype), copy=False)
    return IndexedSlices(values, indices, slices[0].dense_shape)
