"""``tf.dtypes`` names as NumPy dtypes (``ml.dtypes.int64`` is ``np.dtype("int64")``; ``ml.dtypes.string`` is the
object dtype, TF's ``tf.string.as_numpy_dtype``, whose values are bytes)."""

from __future__ import annotations

import builtins

import numpy as np

from ..tensor import STRING, is_string

__all__ = ["bool", "complex64", "complex128", "float16", "float32", "float64", "int8", "int16", "int32",
           "int64", "uint8", "uint16", "uint32", "uint64", "string", "as_dtype"]

bool = np.dtype(np.bool_)  # noqa: A001 (TF's name)
float16, float32, float64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
int8, int16, int32, int64 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64)
uint8, uint16, uint32, uint64 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
string = STRING


_TF_NAMES = {"string": STRING, "float": float32, "double": float64, "half": float16,
             **{dtype.name: dtype for dtype in (bool, float16, float32, float64, int8, int16, int32, int64, uint8,
                                                uint16, uint32, uint64, complex64, complex128)}}
_PYTHON_TYPES = {builtins.float: float32, builtins.bool: bool, builtins.object: STRING}


def as_dtype(value: object) -> np.dtype:
    """The dtype TF's ``tf.dtypes.as_dtype`` gives: a TF name (``"string"``, ``"float"`` is float32), a NumPy dtype or
    type (NumPy's string and object types are ``string``), or Python's ``float`` (float32), ``bool`` or ``object``
    (string); anything else (``int``, ``str``, ``"int"``) is refused as TF refuses it."""
    if isinstance(value, np.dtype):
        return STRING if is_string(value) else value
    if isinstance(value, str) and value in _TF_NAMES:
        return _TF_NAMES[value]
    if isinstance(value, type) and value in _PYTHON_TYPES:
        return _PYTHON_TYPES[value]
    if isinstance(value, type) and issubclass(value, np.generic):
        return as_dtype(np.dtype(value))
    raise TypeError(f"Cannot convert the argument `type_value`: {value!r} to a TensorFlow DType.\nFix: pass a dtype "
                    "such as tf.float32 or tf.string (a NumPy dtype, or its name).")
