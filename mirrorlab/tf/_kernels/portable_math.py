"""Element-wise transcendental functions whose float16/float32 results do not depend on the CPU NumPy runs on.

NumPy picks its float32 ``exp``, ``log``, ``log1p``, ``tanh``, ``cos``, ``power``... loops by the CPU's SIMD features
(AVX2, AVX-512), and those kernels round differently from each other in the last bit. These compute in float64 and
round once to the input's dtype: NumPy's float64 kernels also vary by CPU, but by a few units of float64's last
place, which changes a rounded float32 only when it falls within that distance of a float32 rounding boundary
(about one value in 10^8). float64 inputs get NumPy's float64 result as it is (the same few-unit variation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...tensor import array_module

__all__ = ["exp", "expm1", "log", "log1p", "tanh", "cos", "power"]


def _narrow_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a float narrower than float64 (the dtypes computed in float64 here)."""
    return dtype.kind == "f" and dtype.itemsize < 8


def _rounded(name: str, *operands: Any, dtype: Any = None) -> Any:
    """NumPy's (or CuPy's) ``name`` of ``operands``, in float64 when the result's dtype (``dtype``, else NumPy's
    result type) is a narrower float, rounded to it; a NumPy scalar for a 0-d result, as NumPy's ufuncs give."""
    xp = array_module(operands[0])
    target = np.dtype(dtype) if dtype is not None else np.result_type(*operands)
    if not _narrow_float(target):
        return getattr(xp, name)(*operands, **({"dtype": dtype} if dtype is not None else {}))
    wide = getattr(xp, name)(*(xp.asanyarray(o).astype(np.float64) for o in operands))
    with np.errstate(over="ignore"):  # a float64 result beyond the narrow float's range rounds to inf, as it would
        result = wide.astype(target)
    return result[()] if xp is np and result.ndim == 0 else result


def _unary(name: str) -> Callable[[Any], Any]:
    def apply(x: Any, dtype: Any = None) -> Any:
        return _rounded(name, x, dtype=dtype)
    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = f"``numpy.{name}`` of every value, the same on every CPU for float16/float32 (see the module)."
    return apply


exp, expm1, log, log1p, tanh, cos = (_unary(n) for n in ("exp", "expm1", "log", "log1p", "tanh", "cos"))


def power(x: Any, y: Any, dtype: Any = None) -> Any:
    """``x ** y`` element-wise (broadcasting), the same on every CPU for float16/float32 results (see the module)."""
    return _rounded("power", x, y, dtype=dtype)
