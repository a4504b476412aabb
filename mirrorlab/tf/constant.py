"""``constant``: a value as an array the way ``tf.constant`` makes a tensor."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import OUT_OF_RANGE, as_tensor, holds_huge_ints, read_array_likes

__all__ = ["constant"]

_BOOL_INTS = (np.dtype(np.int32), np.dtype(np.int64))  # the integer dtypes TF converts Python booleans to


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str | None = None) -> np.ndarray:
    """``value`` as an array: Python floats become float32 and ints int32 unless ``dtype`` says otherwise;
    ``shape`` reshapes (or fills, from a scalar). As TF, Python floats do not become integers, Python numbers
    do not become booleans, Python booleans become only int32, int64, floats and booleans, and Python ints wrap
    into narrower integers but must fit int64 (NumPy values are cast)."""
    python = not isinstance(value, (np.ndarray, np.generic))
    if python and isinstance(value, (list, tuple)) and not _rectangular(value):
        raise ValueError("Can't convert non-rectangular Python sequence to Tensor.")
    if dtype is None:
        array = as_tensor(value)
    else:
        dtype = np.dtype(dtype)
        array = np.asarray(read_array_likes(value))
        if python and dtype.kind != "f" and holds_huge_ints(value, array):  # TF converts such ints only to floats
            raise ValueError(OUT_OF_RANGE)
        if python and array.size and ((dtype.kind in "iu" and array.dtype.kind in "fc") or
                       (dtype.kind == "b" and array.dtype.kind in "iufc") or
                       (array.dtype.kind == "b" and dtype.kind in "iuc" and dtype not in _BOOL_INTS)):
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {dtype.name}")
        try:
            array = array.astype(np.int64).astype(dtype) if array.dtype.kind in "iu" and dtype.kind in "iu" \
                else array.astype(dtype)
        except OverflowError:  # an int beyond even float64's range
            raise ValueError(OUT_OF_RANGE) from None
    if shape is not None:
        shape = tuple(int(d) for d in np.atleast_1d(shape))
        if array.size != 1 and array.size != int(np.prod(shape)):
            raise TypeError(f"Eager execution of tf.constant with unsupported shape. Tensor {array} (converted from "
                            f"{value}) has {array.size} elements, but got `shape` {shape} with {int(np.prod(shape))} "
                            "elements).")
        array = np.full(shape, array) if array.size == 1 else array.reshape(shape)
    return array


def _rectangular(value: Any) -> bool:
    """Whether nested Python lists have one length per level (TF refuses ragged ones)."""
    if not isinstance(value, (list, tuple)):
        return True
    kinds = {isinstance(v, (list, tuple)) for v in value}
    if len(kinds) > 1:
        return False
    if kinds == {True}:
        return len({len(v) for v in value}) <= 1 and all(_rectangular(v) for v in value)
    return True
