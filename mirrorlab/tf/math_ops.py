"""More of ``tf.math``: rounding, reciprocals, powers, erf, erfc, expm1, floor division and modulo, logical
operators, the NaN-safe products and quotients, and reductions composed of the differentiable ones (logsumexp,
variance, standard deviation, Euclidean norm), with TF 2.21's dtypes, values and errors. Functions TF differentiates
carry their gradients on a recording tape; those TF gives no gradient (rounding, floor division, logic) return plain
arrays."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import errors
from ._kernels import portable_math
from .array_ops import (FLOAT_TYPES, _arithmetic, _operands, _tensor, _unary, check_types, exp, log, reduce_max,
                        reduce_mean, reduce_sum, reshape, sqrt, square, stop_gradient, subtract, where)
from .autodiff import untracked, watched, with_gradient
from ..collective.group import truediv_dtype
from .constant import constant
from ._kernels.nn_kernels import exp as exp_kernel, log1p as log1p_kernel
from ..tensor import array_module, integer_division

__all__ = ["ceil", "divide_no_nan", "erf", "erfc", "expm1", "floor", "floordiv", "floormod", "log1p", "logical_and",
           "logical_not", "logical_or", "mod", "multiply_no_nan", "pow", "reciprocal", "reduce_euclidean_norm",
           "reduce_logsumexp", "reduce_std", "reduce_variance", "round", "rsqrt", "sign", "squared_difference"]

_REAL_TYPES = "bfloat16, half, float, double"
_SIGNED_TYPES = "bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128"
_POW_TYPES = "bfloat16, float, half, double, int8, int16, int32, int64, complex64, complex128"
_FLOORDIV_TYPES = ("bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, "
                   "complex64, complex128")
_MOD_TYPES = "int8, int16, int32, int64, uint8, uint16, uint32, uint64, bfloat16, half, float, double"


def _plain(x: Any, fn: Callable[[Any], Any], allowed: str, what: str) -> Any:
    """``fn`` of ``x`` in its dtype, with no gradient (TF registers none)."""
    value = _tensor(x)
    check_types(value, allowed, what)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return array_module(value).asarray(fn(value)).astype(value.dtype, copy=False)


def floor(x: Any, name: str | None = None) -> Any:
    """Round down (floats)."""
    return _plain(x, np.floor, _REAL_TYPES, "floor")


def ceil(x: Any, name: str | None = None) -> Any:
    """Round up (floats)."""
    return _plain(x, np.ceil, _REAL_TYPES, "ceil")


def round(x: Any, name: str | None = None) -> Any:  # noqa: A001 (TF's name)
    """Round half to even (integers unchanged)."""
    return _plain(x, np.round, f"{_REAL_TYPES}, int8, int16, int32, int64", "round")


def sign(x: Any, name: str | None = None) -> Any:
    """-1, 0 or 1 (NaN stays NaN); its gradient is zero, as TF's."""
    return _unary(x, np.sign, _SIGNED_TYPES, "sign", lambda g, v, r: g * 0)


def reciprocal(x: Any, name: str | None = None) -> Any:
    """``1 / x`` (TF has no CPU kernel for integers)."""
    value = _tensor(x)
    if value.dtype.kind in "iub":
        raise errors.NotFoundError(f"Could not find device for node: {{{{node Reciprocal}}}} = Reciprocal[T=DT_"
                                   f"{value.dtype.name.upper()}]\nFix: cast to a float dtype first.")
    return _unary(x, np.reciprocal, FLOAT_TYPES, "reciprocal", lambda g, v, r: -g * r * r)


def rsqrt(x: Any, name: str | None = None) -> Any:
    """``1 / sqrt(x)`` (floats)."""
    return _unary(x, lambda v: 1 / np.sqrt(v), FLOAT_TYPES, "rsqrt", lambda g, v, r: -0.5 * g * r * r * r)


def log1p(x: Any, name: str | None = None) -> Any:
    """``log(1 + x)`` (floats)."""
    return _unary(x, log1p_kernel, FLOAT_TYPES, "log1p", lambda g, v, r: g / (1 + v))


def expm1(x: Any, name: str | None = None) -> Any:
    """``exp(x) - 1`` without its cancellation near 0 (floats); the gradient ``g * exp(x)``, as TF's."""
    return _unary(x, portable_math.expm1, FLOAT_TYPES, "expm1", lambda g, v, r: g * exp_kernel(v))


def _special(name: str) -> Callable[[Any], Any]:
    """The C library's double-precision ``erf``/``erfc`` element-wise, rounded to the input's dtype (CuPy's own on a
    GPU). TF's float32 kernels are an approximation within a few units in the last place of this."""
    scalar = np.frompyfunc(getattr(math, name), 1, 1)

    def apply(value: Any) -> Any:
        if array_module(value) is not np:
            from cupyx.scipy import special  # (only reached with CuPy arrays)
            return getattr(special, name)(value)
        return np.asarray(scalar(np.asarray(value, np.float64)), np.float64).astype(value.dtype)

    return apply


_ERF, _ERFC = _special("erf"), _special("erfc")


def _erf_derivative(sign: float) -> Callable[[Any, Any, Any], Any]:
    """TF's gradient of erf (``sign`` 1) and erfc (-1): ``g * (sign * 2 / sqrt(pi)) * exp(-x * x)``."""
    def derivative(g: Any, v: Any, r: Any) -> Any:
        return g * v.dtype.type(sign * 2 / np.sqrt(np.pi)) * exp_kernel(-(v * v))
    return derivative


def erf(x: Any, name: str | None = None) -> Any:
    """The Gauss error function (floats)."""
    return _unary(x, _ERF, _REAL_TYPES, "erf", _erf_derivative(1.0))


def erfc(x: Any, name: str | None = None) -> Any:
    """``1 - erf(x)`` without its cancellation for large ``x`` (floats)."""
    return _unary(x, _ERFC, _REAL_TYPES, "erfc", _erf_derivative(-1.0))


def pow(x: Any, y: Any, name: str | None = None) -> Any:  # noqa: A001 (TF's name)
    """``x ** y`` element-wise (integers to negative integer powers refused, as TF's kernel does)."""
    a, b = _operands(x, y, "Pow")
    check_types(a, _POW_TYPES, "pow")
    if a.dtype.kind in "iu" and np.any(b < 0):
        raise errors.InvalidArgumentError("Integers to negative integer powers are not allowed [Op:Pow] name: ")
    return _arithmetic(x, y, "Pow", portable_math.power, "pow")


def squared_difference(x: Any, y: Any, name: str | None = None) -> Any:
    """``(x - y) ** 2`` element-wise."""
    return square(subtract(x, y))


def floordiv(x: Any, y: Any, name: str | None = None) -> Any:
    """``x // y`` rounding toward negative infinity (no gradient, as in TF)."""
    a, b = _operands(x, y, "FloorDiv")
    check_types(a, _FLOORDIV_TYPES, "floordiv")
    return array_module(a).asarray(integer_division(np.floor_divide, a, b, "FloorDiv")).astype(a.dtype, copy=False)


def floormod(x: Any, y: Any, name: str | None = None) -> Any:
    """``x - floordiv(x, y) * y``: the remainder with the divisor's sign; its gradient is ``g`` for ``x`` and
    ``-g * floordiv(x, y)`` for ``y``, as TF's."""
    x, y = watched(x), watched(y)
    a, b = _operands(x, y, "FloorMod")
    check_types(a, _MOD_TYPES, "floormod")
    result = array_module(a).asarray(integer_division(np.mod, a, b, "FloorMod")).astype(a.dtype, copy=False)
    quotient = integer_division(np.floor_divide, a, b, "FloorDiv")
    return with_gradient(result, [x, y], lambda g: [g, -g * quotient])


mod = floormod


def divide_no_nan(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y``, 0 where ``y`` is 0 (floats)."""
    x, y = watched(x), watched(y)
    a, b = _operands(x, y, "DivNoNan")
    if a.dtype.kind in "iu":  # integers divide as TF's truediv does: in float32 or float64
        a, b = a.astype(truediv_dtype(a.dtype)), b.astype(truediv_dtype(a.dtype))
    check_types(a, "half, float, bfloat16, double, complex64, complex128", "divide_no_nan")
    zero = b == 0
    safe = np.where(zero, 1, b).astype(b.dtype)
    result = np.where(zero, 0, a / safe).astype(a.dtype)
    return with_gradient(result, [x, y], lambda g: [np.where(zero, 0, g / safe), np.where(zero, 0, -g * a / safe ** 2)])


def multiply_no_nan(x: Any, y: Any, name: str | None = None) -> Any:
    """``x * y``, 0 where ``y`` is 0 even for an infinite or NaN ``x`` (floats)."""
    x, y = watched(x), watched(y)
    a, b = _operands(x, y, "MulNoNan")
    check_types(a, "half, float, bfloat16, double, complex64, complex128", "multiply_no_nan")
    zero = b == 0
    with np.errstate(invalid="ignore"):
        result = np.where(zero, 0, a * b).astype(a.dtype)
    return with_gradient(result, [x, y], lambda g: [np.where(zero, 0, g * b), np.where(zero, 0, g * a)])


def _boolean(x: Any) -> Any:
    """A logical operand: Python values converted to booleans as TF converts them (TypeError for numbers)."""
    raw = untracked(x)
    return constant(raw, np.bool_) if isinstance(raw, (list, tuple, bool, int, float)) else _tensor(x)


def _logical(x: Any, y: Any, fn: Callable[[Any, Any], Any], op: str) -> Any:
    a, b = _boolean(x), _boolean(y)
    check_types(a, "bool", f"tf.math.{op.lower()}")
    check_types(b, "bool", f"tf.math.{op.lower()}")
    return array_module(a).asarray(fn(a, b))


def logical_and(x: Any, y: Any, name: str | None = None) -> Any:
    """Element-wise and of booleans."""
    return _logical(x, y, np.logical_and, "LogicalAnd")


def logical_or(x: Any, y: Any, name: str | None = None) -> Any:
    """Element-wise or of booleans."""
    return _logical(x, y, np.logical_or, "LogicalOr")


def logical_not(x: Any, name: str | None = None) -> Any:
    """Element-wise not of booleans."""
    value = _boolean(x)
    check_types(value, "bool", "tf.math.logical_not")
    return array_module(value).asarray(np.logical_not(value))


def reduce_logsumexp(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """``log(sum(exp(x)))`` over ``axis``, shifted by the (finite) maximum for stability, as TF composes it."""
    raw_max = reduce_max(input_tensor, axis=axis, keepdims=True)
    shift = stop_gradient(where(np.isfinite(untracked(raw_max)), raw_max, np.zeros_like(untracked(raw_max))))
    result = log(reduce_sum(exp(subtract(input_tensor, shift)), axis=axis, keepdims=True)) + shift
    return result if keepdims else _squeezed(result, axis)


def _squeezed(value: Any, axis: Any) -> Any:
    """``value`` reduced with ``keepdims`` reshaped to the shape the reduction without it gives."""
    target = np.shape(untracked(reduce_sum(np.zeros(np.shape(untracked(value))), axis=axis)))
    return reshape(value, list(target))


def reduce_variance(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """The mean squared deviation from the mean over ``axis`` (floats), as TF composes it."""
    value = _tensor(input_tensor)
    if value.dtype.kind not in "fc":
        raise TypeError(f"Input must be either real or complex. Received integer type <dtype: '{value.dtype.name}'>.")
    means = reduce_mean(input_tensor, axis=axis, keepdims=True)
    return reduce_mean(square(subtract(input_tensor, means)), axis=axis, keepdims=keepdims)


def reduce_std(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """The standard deviation over ``axis``: the square root of ``reduce_variance``."""
    return sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims))


def reduce_euclidean_norm(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                          name: str | None = None) -> Any:
    """``sqrt(sum(x ** 2))`` over ``axis``."""
    return sqrt(reduce_sum(square(input_tensor), axis=axis, keepdims=keepdims))

