"""``convert_to_tensor`` and ``is_tensor``: what TF accepts as a tensor, and its conversion errors.

mirrorlab's tensors are NumPy (CuPy) arrays, so an array counts as a tensor here. TF converts NumPy arrays to any
requested dtype (a cast); mirrorlab does the same for arrays, because it cannot tell a NumPy array from a tensor it
made. Variables and values computed on a ``GradientTape`` are unmistakably tensors: a dtype mismatch raises as TF's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .autodiff import Tracked, untracked, watched
from ..distribute.kernel_dtypes import tf_dtype
from .constant import constant
from .indexed_slices import dense
from ..tensor import IndexedSlices, as_tensor, canonical, dtype_name, is_cupy, is_string, list_leaves, \
    out_of_int64

__all__ = ["convert_to_tensor", "is_tensor"]

_PYTHON = (bool, int, float, complex, str, bytes, list, tuple)


def is_variable(value: Any) -> bool:
    """Whether ``value`` is a mirrorlab variable (what a ``GradientTape`` can watch)."""
    return getattr(value, "_tape_leaf", None) is not None


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a tensor: an array, a variable, a value computed on a tape or ``IndexedSlices`` (TF's
    ``tf.is_tensor``; Python values and NumPy scalars are not)."""
    return isinstance(x, (np.ndarray, Tracked, IndexedSlices)) or is_cupy(x) or is_variable(x)


def convert_to_tensor(value: Any, dtype: Any = None, dtype_hint: Any = None, name: str | None = None) -> Any:
    """``value`` as a tensor of ``dtype`` (TF's ``tf.convert_to_tensor``): Python values convert as ``tf.constant``
    converts them, arrays are cast, a variable or tape value of another dtype raises TF's ValueError. Without
    ``dtype``, ``dtype_hint`` is tried first. A watched variable gives a tape value, so gradients flow through."""
    if dtype is None and dtype_hint is not None:
        try:
            return convert_to_tensor(value, dtype_hint)
        except (TypeError, ValueError):
            return convert_to_tensor(value)
    target = None if dtype is None else np.dtype(dtype)
    if is_variable(value) or isinstance(value, Tracked):
        return _existing(value, target)
    if isinstance(value, IndexedSlices):
        return _densified(value, target)
    if isinstance(value, (np.ndarray, np.generic)) or is_cupy(value):
        return _cast_array(as_tensor(value), target)
    if isinstance(value, _PYTHON):
        return _python(value, target)
    if hasattr(value, "__array__"):
        return _cast_array(np.asarray(value), target)
    raise ValueError(f"Attempt to convert a value ({value!r}) with an unsupported type ({type(value)}) to a Tensor."
                     "\nFix: pass an array, a number, a string or a (nested) list of them.")


def _existing(value: Any, target: np.dtype | None) -> Any:
    """A variable (read, watched on a recording tape) or a tape value, refused for another dtype as TF refuses it."""
    if target is not None and np.dtype(value.dtype) != target:
        if isinstance(value, Tracked):
            raise ValueError(f"Tensor conversion requested dtype {dtype_name(target)} for Tensor with dtype "
                             f"{dtype_name(value.dtype)}: {untracked(value)!r}\nFix: tf.cast the tensor instead.")
        raise ValueError(f"Incompatible type conversion requested to type {dtype_name(target)} for `tf.Variable of "
                         f"type {dtype_name(value.dtype)}. (Variable: {value!r})\nFix: tf.cast the variable's value.")
    read = watched(value)
    return read if isinstance(read, Tracked) else as_tensor(read)


def _densified(value: IndexedSlices, target: np.dtype | None) -> Any:
    """IndexedSlices as the dense tensor they stand for (TF's conversion); another dtype is refused, as in TF."""
    if target is not None and value.dtype != target:
        raise ValueError(f"Incompatible tensor conversion requested to `dtype` {dtype_name(target)} for IndexedSlices "
                         f"({value!r}) with dtype {dtype_name(value.dtype)}\nFix: tf.cast the values first.")
    return dense(value)


def _cast_array(array: Any, target: np.dtype | None) -> Any:
    """An array cast to ``target`` as TF casts a NumPy array (numbers to strings refused)."""
    if target is None or array.dtype == target:
        return array
    if is_string(target) and not is_string(array.dtype):
        kind = type(array.flat[0].item()).__name__ if array.size else array.dtype.name
        raise ValueError(f"Failed to convert a NumPy array to a Tensor (Unsupported object type {kind}).\nFix: "
                         "format the numbers as strings first.")
    return array.astype(target)


def _python(value: Any, target: np.dtype | None) -> Any:
    """A Python value (number, string or nested list) as ``tf.constant`` converts it, with TF's errors."""
    if target is None:
        return as_tensor(value)
    leaves = list_leaves(value)
    strings = [isinstance(leaf, (str, bytes)) for leaf in leaves]
    huge_to_float = target.kind == "f" and any(out_of_int64(leaf) for leaf in leaves)
    array = None if huge_to_float else as_tensor(value)  # (TF converts ints beyond int64 only to floats)
    if (any(strings) and not is_string(target)) or (is_string(target) and not all(strings)) or \
            (array is not None and array.dtype.kind == "c" and target.kind != "c"):
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {tf_dtype(target)}\nFix: pass values "
                        "of that kind (numbers for a numeric dtype, strings for tf.string).")
    return canonical(array) if is_string(target) else constant(value, target)
