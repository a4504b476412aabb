"""TF 2.21's Python operators on a bool variable: most arithmetic and ordering ops have no bool kernel, Python numbers
do not convert to bool, and ``/`` refuses bool; ``*``, ``==``/``!=`` and ``&``/``|``/``^`` work on bool values."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import errors

__all__ = ["bool_operand", "refuse_bool_unary"]

_LESS = "float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64"
_NEG = "bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128"
# Operator name -> (TF op, the dtypes its kernel allows, as TF's error lists them).
_NO_BOOL_KERNEL = {
    "add": ("AddV2", "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, "
                     "complex64, complex128"),
    "sub": ("Sub", "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, complex64, complex128, "
                   "uint32, uint64"),
    "floordiv": ("FloorDiv", "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, "
                             "complex64, complex128"),
    "mod": ("FloorMod", "int8, int16, int32, int64, uint8, uint16, uint32, uint64, bfloat16, half, float, double"),
    "pow": ("Pow", "bfloat16, float, half, double, int8, int16, int32, int64, complex64, complex128"),
    "lt": ("Less", _LESS), "le": ("LessEqual", _LESS), "gt": ("Greater", _LESS), "ge": ("GreaterEqual", _LESS),
    "matmul": ("MatMul", "bfloat16, half, float, double, int32, int64, uint8, uint16, uint32, uint64, complex64, "
                         "complex128"),
    "neg": ("Neg", _NEG),
    "abs": ("Abs", "bfloat16, half, float, double, int8, int16, int32, int64"),
}
# The Python operand is passed on to the op as it is for these (``v + 2`` fails in the kernel, ``v * 2`` works).
_TAKES_NUMBERS = ("add", "mul", "truediv", "matmul")
_TRUEDIV_TYPES = ("{tf.uint8, tf.int8, tf.uint16, tf.int16, tf.uint32, tf.int32, tf.uint64, tf.int64, tf.bfloat16, "
                  "tf.float16, tf.float32, tf.float64, tf.complex64, tf.complex128}")


def _no_kernel(name: str) -> errors.InvalidArgumentError:
    """TF's error for an op whose kernel has no bool version."""
    op, allowed = _NO_BOOL_KERNEL[name]
    return errors.InvalidArgumentError(
        f"Value for attr 'T' of bool is not in the list of allowed values: {allowed}\n\t; NodeDef: {{{{node {op}}}}} "
        f"[Op:{op}] name: \nFix: cast the variable's value first, e.g. tf.cast(v, tf.int32).")


def bool_operand(name: str, other: Any, reflected: bool) -> Any:
    """TF's error for ``v <name> other`` (``other <name> v`` if ``reflected``) on a bool variable ``v``; else the
    operand to convert as usual (a Python number that ``*`` takes: its truth value)."""
    number = isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, (bool, np.bool_))
    if number and (reflected or name not in _TAKES_NUMBERS):
        raise TypeError(f"Cannot convert {other!r} to EagerTensor of dtype bool\nFix: use True/False or a bool "
                        "tensor with a bool variable.")
    if name == "truediv":
        if number:
            got = "int32" if isinstance(other, (int, np.integer)) else "float32"
            raise TypeError(f"`x` and `y` must have the same dtype, got tf.bool != tf.{got}.\nFix: cast the "
                            "variable's value to a number type first.")
        raise TypeError(f"Invalid dtype tf.bool in __truediv__. Expected one of {_TRUEDIV_TYPES}.\nFix: cast the "
                        "variable's value to a number type first.")
    if name in _NO_BOOL_KERNEL:
        raise _no_kernel(name)
    return np.asarray(bool(other)) if number else other


def refuse_bool_unary(name: str) -> None:
    """TF's kernel error for ``-v`` (``neg``) and ``abs(v)`` (``abs``) of a bool variable."""
    raise _no_kernel(name)
