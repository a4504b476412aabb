"""How TF's eager ops take their inputs: the kernels' type lists (with TF's error for a dtype a kernel has none
for), and the conversion of a binary op's operands (NumPy values cast to the first operand's dtype, Python values
converted as TF's eager conversion does, with or without only a dtype hint)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import errors
from .autodiff import untracked
from ..distribute.kernel_dtypes import tf_dtype
from .constant import constant
from ..tensor import as_tensor, is_string

__all__ = ["ABS_TYPES", "ARITHMETIC_TYPES", "FLOAT_TYPES", "HINTED", "MAX_TYPES", "NEGATIVE_TYPES", "RELU_TYPES",
           "SQUARE_TYPES", "SUM_TYPES", "check_types", "index_tensor", "operands", "python_operand", "strict_operands",
           "tensor_of"]

SUM_TYPES = ("float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, "
             "quint16, uint16, complex128, half, uint32, uint64")
MAX_TYPES = ("float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8, quint8, "
             "qint32, qint16, quint16")
FLOAT_TYPES = "bfloat16, half, float, double, complex64, complex128"
ABS_TYPES = "bfloat16, half, float, double, int8, int16, int32, int64"
NEGATIVE_TYPES = f"{ABS_TYPES}, complex64, complex128"
SQUARE_TYPES = f"{ABS_TYPES}, uint8, uint16, uint32, uint64, complex64, complex128"
RELU_TYPES = "float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8"


def tensor_of(x: Any) -> Any:
    """``x`` as an array (a ``Tracked`` value's array)."""
    return as_tensor(untracked(x))


def index_tensor(x: Any) -> Any:
    """A shape or index argument as an array (an empty Python list is int32, as TF converts it)."""
    raw = untracked(x)
    return np.zeros((0,), np.int32) if isinstance(raw, (list, tuple)) and not len(raw) else tensor_of(x)


def check_types(x: Any, allowed: str, what: str, attr: str = "T") -> None:
    """TF's kernel registry error for a dtype an op has no kernel for (its type attribute ``attr``)."""
    name = tf_dtype(x)
    if name not in allowed.split(", "):
        raise errors.InvalidArgumentError(f"Value for attr '{attr}' of {name} is not in the list of allowed values: "
                                          f"{allowed}\nFix: cast the input first (tf.cast) for {what}.")


# The types each binary kernel accepts (TF's registry order), where a boolean first operand is refused.
ARITHMETIC_TYPES = {
    "AddV2": "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, complex64, "
             "complex128",
    "Sub": "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, complex64, complex128, uint32, "
           "uint64",
    "Mul": "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, "
           "complex128",
    **dict.fromkeys(("Maximum", "Minimum"), "bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, "
                                            "int64, uint64"),
    "MatMul": "bfloat16, half, float, double, int32, int64, uint8, uint16, uint32, uint64, complex64, complex128",
    **dict.fromkeys(("Greater", "GreaterEqual", "Less", "LessEqual"),
                    "float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64"),
}
HINTED = {"AddV2", "RealDiv", "MatMul"}  # tf.add, tf.divide and tf.matmul convert the second operand with a hint


def python_operand(value: Any, dtype: np.dtype, op: str) -> Any:
    """A Python number or list as the second operand of a kernel whose first has ``dtype``: converted to it as TF
    converts (TypeError for a float into an integer, say; ints wrap); with only a dtype hint (tf.add, tf.divide),
    in its own default dtype when it does not convert."""
    try:
        return constant(value, dtype)
    except TypeError:
        if op not in HINTED:
            raise
        return as_tensor(value)


def operands(x: Any, y: Any, op: str) -> tuple[Any, Any]:
    """Both operands of a binary kernel, as TF's eager conversion makes them: NumPy values cast to the first
    operand's dtype, Python values converted to it (``python_operand``); then TF's kernel errors for a dtype the
    kernel has none for (a boolean first operand) and for operands of two dtypes."""
    a = tensor_of(x)
    raw = untracked(y)
    if isinstance(raw, (np.ndarray, np.generic)) or hasattr(raw, "__array__") and not isinstance(raw, (list, tuple)):
        b = as_tensor(raw).astype(a.dtype, copy=False)
    else:
        b = python_operand(raw, a.dtype, op)
    if op in ARITHMETIC_TYPES:
        check_types(a, ARITHMETIC_TYPES[op], f"tf's {op}")
    if b.dtype != a.dtype:
        raise errors.InvalidArgumentError(
            f"cannot compute {op} as input #1(zero-based) was expected to be a {tf_dtype(a)} tensor but is a "
            f"{tf_dtype(b)} tensor [Op:{op}] name: \nFix: pass operands of one dtype (tf.cast one of them).")
    return a, b


def strict_operands(x: Any, y: Any, op: str) -> tuple[Any, Any]:
    """Equal/NotEqual convert the second operand as ``tf.constant`` would (a Python float never becomes an int)."""
    a = tensor_of(x)
    if untracked(y) is None:
        raise ValueError("Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor.")
    if is_string(a.dtype):
        return a, tensor_of(y)  # strings compare as TF's bytes
    return a, constant(untracked(y), a.dtype)
