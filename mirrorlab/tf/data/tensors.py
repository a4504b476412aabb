"""Element values as tf.data makes them: TF's dtype inference for Python values, strings as bytes (a scalar
is a 0-d ``bytes`` array, anything else an object array of bytes, as TF's ``.numpy()`` gives them), and the
integer arguments of dataset ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...tensor import STRING, as_tensor, canonical, encoded, is_string, list_leaves, tensors_out

__all__ = ["call", "canonical", "to_element", "int64_arg", "is_string", "numpy_value", "STRING"]


def _component(value: Any) -> Any:
    """One tensor from a Python or NumPy value (a Python list is one tensor, as in tf.data)."""
    if isinstance(value, (str, bytes)):
        return canonical(value)
    if isinstance(value, list):
        leaves = list_leaves(value)
        if any(isinstance(v, (str, bytes, np.str_, np.bytes_)) for v in leaves):
            value = np.array(encoded(value), dtype=STRING)
        elif any(isinstance(v, (np.ndarray, np.floating)) for v in leaves):
            value = np.asarray(value)  # NumPy values keep their dtype (TF packs them as they are)
    return canonical(as_tensor(value))  # arrays pass through as_tensor; every path ends in TF's form


def to_element(value: Any) -> Any:
    """Convert an element to arrays with tf.data's structure rule: tuples and dicts are structure, a Python
    list is one tensor (``[1.0, 2.0]`` -> float32 vector)."""
    if isinstance(value, tuple):
        items = [to_element(v) for v in value]
        return type(value)(*items) if hasattr(type(value), "_fields") else tuple(items)
    if isinstance(value, dict):
        return type(value)((k, to_element(v)) for k, v in value.items())
    return _component(value)


def call(fn: Callable, value: Any) -> Any:
    """``fn`` of an element, whose arrays it sees as tensors (as TF's traced functions do, so ``x // 0`` raises);
    TF's convention: a tuple element is unpacked into positional arguments."""
    value = tensors_out(value)
    return fn(*value) if isinstance(value, tuple) else fn(value)


def numpy_value(array: Any) -> Any:
    """What TF's ``.numpy()`` gives for a tensor: a NumPy scalar (``bytes`` for a string) at rank 0."""
    if isinstance(array, np.ndarray) and array.ndim == 0:
        return array.item() if is_string(array.dtype) else array[()]
    return array


def int64_arg(value: Any) -> int:
    """An integer argument of a dataset op (TF converts it to an int64 tensor: floats and strings are refused)."""
    if isinstance(value, (int, np.integer)) or (isinstance(value, np.ndarray) and value.ndim == 0
                                                 and value.dtype.kind in "iub"):
        return int(value)
    shown = repr(value) if isinstance(value, str) else str(value)
    raise TypeError(f"Cannot convert {shown} to EagerTensor of dtype int64")
