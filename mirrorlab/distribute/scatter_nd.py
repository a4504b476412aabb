"""N-dimensional sparse updates: ``scatter_nd_update/add/sub/max/min(indices, updates)`` as TF 2.21's
``ResourceVariable`` has them (``indices[..., K]`` name elements or slices of the first K dimensions), applied to
one copy with the checks of TF's ``ResourceScatterNd*`` kernels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import errors
from .kernel_dtypes import tf_dtype
from ..tensor import as_tensor, like, to_host

__all__ = ["NdDelta", "ScatterNdMethods", "SCATTER_ND_KINDS", "PER_COPY_ND_KINDS", "scatter_nd"]

_UFUNCS = {"scatter_nd_add": np.add, "scatter_nd_sub": np.subtract, "scatter_nd_max": np.maximum,
           "scatter_nd_min": np.minimum}
SCATTER_ND_KINDS = ("scatter_nd_update", *_UFUNCS)
# TF's distributed variables define no scatter_nd_max/min: its attribute delegation applies them to one copy.
PER_COPY_ND_KINDS = ("scatter_nd_max", "scatter_nd_min")
_KERNEL_KINDS = {"scatter_nd_add": "iufc", "scatter_nd_sub": "iufc", "scatter_nd_max": "iuf", "scatter_nd_min": "iuf"}


@dataclass(frozen=True)
class NdDelta:
    """The ``indices`` and ``updates`` of one ``scatter_nd_*`` call."""

    indices: Any
    updates: Any


def _scatter_nd_method(kind: str, doc: str) -> Callable[..., Any]:
    """The variable method ``kind(indices, updates, name=None)``."""
    def method(self: Any, indices: Any, updates: Any, name: Any = None) -> Any:
        return self._update(kind, NdDelta(indices, updates), True)
    method.__name__ = method.__qualname__ = kind
    method.__doc__ = doc
    return method


class ScatterNdMethods:
    """TF's ``scatter_nd_*`` variable methods; each returns what ``assign`` returns (through ``_update``)."""

    scatter_nd_update = _scatter_nd_method("scatter_nd_update", "Set the elements or slices at ``indices``.")
    scatter_nd_add = _scatter_nd_method("scatter_nd_add", "Add ``updates`` at ``indices`` (repeated ones add up).")
    scatter_nd_sub = _scatter_nd_method("scatter_nd_sub", "Subtract ``updates`` at ``indices``.")
    scatter_nd_max = _scatter_nd_method("scatter_nd_max", "The element-wise maximum with ``updates`` at ``indices``.")
    scatter_nd_min = _scatter_nd_method("scatter_nd_min", "The element-wise minimum with ``updates`` at ``indices``.")


def _op(kind: str) -> str:
    """TF's kernel name (``ResourceScatterNdUpdate``)."""
    return "ResourceScatterNd" + kind[len("scatter_nd_"):].capitalize()


def _dims(shape: tuple[int, ...]) -> str:
    """A shape as TF's kernels print it: ``[2,2]``."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def scatter_nd(current: Any, kind: str, indices: Any, updates: Any, dtype: np.dtype) -> Any:
    """``current`` with ``updates`` (already of the variable's dtype) applied at ``indices`` by ``kind``, computed
    on the host and returned on ``current``'s device; TF's InvalidArgumentError for what its kernel refuses."""
    op = _op(kind)
    index = np.asarray(to_host(as_tensor(indices)))
    if index.dtype not in (np.int32, np.int64):
        raise errors.InvalidArgumentError(
            f"Value for attr 'Tindices' of {tf_dtype(index)} is not in the list of allowed values: int32, int64\n\t; "
            f"NodeDef: {{{{node {op}}}}}\nFix: pass integer indices.")
    if kind in _KERNEL_KINDS and dtype.kind not in _KERNEL_KINDS[kind]:
        raise errors.InvalidArgumentError(
            f"No OpKernel was registered to support Op '{op}' used by {{{{node {op}}}}} with these attrs: "
            f"[T=DT_{tf_dtype(dtype).upper()}, Tindices=DT_{index.dtype.name.upper()}]\n"
            f"Fix: {kind} needs a numeric variable; scatter_nd_update works for every dtype.")
    result = np.array(to_host(current))
    values = np.asarray(to_host(updates))
    shape = result.shape
    if not shape:
        raise errors.InvalidArgumentError(f"Output must be at least 1-D, got shape: [] [Op:{op}]")
    if index.ndim == 0:
        raise errors.InvalidArgumentError(f"Indices must be at least 1-D, got shape: [] [Op:{op}]\nFix: pass "
                                          "indices of shape [N, K] (or [K] for one element).")
    k, batch = (index.shape[-1], index.ndim - 1) if index.ndim > 1 else (1, 1)
    if values.ndim < batch or values.shape[:batch] != index.shape[:batch]:
        raise errors.InvalidArgumentError(
            f"Dimensions [0,{batch}) of indices[shape={_dims(index.shape)}] must match dimensions [0,{batch}) of "
            f"updates[shape={_dims(values.shape)}] [Op:{op}]")
    if k > len(shape) or values.shape[batch:] != shape[k:]:
        raise errors.InvalidArgumentError(
            f"Dimensions [{k},{len(shape)}) of input[shape={_dims(shape)}] must match dimensions [{batch},"
            f"{values.ndim}) of updates[shape={_dims(values.shape)}] [Op:{op}]")
    flat = index.reshape(-1, k)
    for i, position in enumerate(flat):
        if any(not 0 <= p < d for p, d in zip(position, shape)):
            raise errors.InvalidArgumentError(f"indices[{i}] = [{', '.join(str(p) for p in position)}] does not "
                                              f"index into shape {_dims(shape)} [Op:{op}]")
    where = tuple(flat.T)
    rows = values.reshape((len(flat), *shape[k:]))
    if kind == "scatter_nd_update":
        result[where] = rows
    else:
        _UFUNCS[kind].at(result, where, rows)
    return like(result, current)
