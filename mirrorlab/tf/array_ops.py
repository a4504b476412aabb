"""TF's everyday tensor functions (``tf.identity``, ``tf.reshape``, ``tf.reduce_sum``, ``tf.matmul``...) on NumPy and
CuPy arrays, with TF 2.21's dtypes, shapes and errors, so TF snippets run with only the import changed.

Inputs convert as ``tf.convert_to_tensor`` does (Python floats float32, ints int32); a binary op converts its second
operand to the first one's dtype, as TF's kernels see them. On a recording ``GradientTape`` the differentiable ones
(identity, cast between floats, reshape, expand_dims, squeeze, transpose, reduce_sum/mean/max/min/prod, stack,
concat, gather, where, maximum/minimum, clip_by_value, add/subtract/multiply/divide, negative, square, sqrt, exp,
log, abs, sigmoid, tanh, relu, matmul) follow ``Tracked`` values and trainable variables with TF's gradients, as
TF's tape watches them; comparisons, argmax, integer casts and shapes have no gradient in TF and give plain values,
nor does ``stop_gradient``'s result.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import errors
from ._kernels import nn_kernels, portable_math
from .autodiff import BINARY_GRADIENTS, Tracked, broadcast_back, untracked, watched, with_gradient
from .autodiff import add_n as autodiff_add_n
from ..collective.group import truediv_dtype
from ..distribute.kernel_dtypes import tf_dtype
from .constant import constant
from ..tensor import array_module, as_tensor, is_string, truncating_divide
from .tensor_conversion import convert_to_tensor
from .operands import ABS_TYPES as _ABS_TYPES, MAX_TYPES as _MAX_TYPES, NEGATIVE_TYPES as _NEGATIVE_TYPES
from .operands import RELU_TYPES as _RELU_TYPES, SQUARE_TYPES as _SQUARE_TYPES, SUM_TYPES as _SUM_TYPES
from .operands import FLOAT_TYPES, check_types, index_tensor as _index_tensor, operands as _operands
from ._kernels.summation import tf_mean, tf_sum
from .operands import python_operand as _python_operand, strict_operands as _strict_operands, tensor_of as _tensor

__all__ = ["identity", "stop_gradient", "cast", "reshape", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
           "reduce_prod", "reduce_any", "reduce_all", "zeros", "ones", "zeros_like", "ones_like", "fill", "range",
           "stack", "concat", "shape", "size", "rank", "square", "sqrt", "exp", "log", "abs", "sigmoid", "tanh",
           "negative", "relu", "add", "add_n", "subtract", "multiply", "divide", "truediv", "maximum", "minimum", "equal",
           "not_equal", "greater", "greater_equal", "less", "less_equal", "argmax", "argmin", "matmul", "expand_dims",
           "squeeze", "transpose", "where", "one_hot", "clip_by_value", "gather"]

# -- identity, conversion, shapes -------------------------------------------------------------------------------


def identity(input: Any, name: str | None = None) -> Any:  # noqa: A002 (TF's argument name)
    """A new tensor with ``input``'s value (a variable's current value)."""
    input = watched(input)  # noqa: A001
    if isinstance(input, Tracked):
        return input
    value = _tensor(input)
    return value.copy() if hasattr(value, "copy") else value


def stop_gradient(input: Any, name: str | None = None) -> Any:  # noqa: A002 (TF's argument name)
    """``input``'s value as a tensor through which no gradient flows (TF's None beyond it)."""
    value = untracked(convert_to_tensor(input))
    return value.copy() if hasattr(value, "copy") else value


def cast(x: Any, dtype: Any, name: str | None = None) -> Any:
    """``x`` converted to ``dtype`` (floats truncate toward zero into integers; nonzero is True)."""
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"Cannot convert the argument `type_value`: {dtype!r} to a TensorFlow DType.") from None
    x = watched(x)
    value = _tensor(x)
    if is_string(value.dtype) != is_string(target):
        source = "string" if is_string(value.dtype) else value.dtype.name
        raise errors.UnimplementedError(f"Cast {source} to {tf_dtype(target)} is not supported [Op:Cast] name: ")
    result = value.astype(target)
    if target.kind not in "fc" or value.dtype.kind not in "fc":  # no gradient, as in TF
        return result
    return with_gradient(result, [x], lambda g: [g.astype(value.dtype)])


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Any:
    """``tensor`` with a new shape (one dimension may be -1)."""
    tensor = watched(tensor)
    value = _tensor(tensor)
    check_types(_index_tensor(shape), "int32, int64", "tf.reshape's shape", attr="Tshape")
    dims = [int(d) for d in np.atleast_1d(_index_tensor(shape))]
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise errors.InvalidArgumentError(f"Only one input size may be -1, not both {unknown[0]} and {unknown[1]} "
                                          "[Op:Reshape]")
    known = int(np.prod([d for d in dims if d != -1]))
    if unknown and (known == 0 or value.size % known) or not unknown and known != value.size:
        need = f"requires a multiple of {known}" if unknown else f"has {known}"
        raise errors.InvalidArgumentError(f"Input to reshape is a tensor with {value.size} values, but the requested "
                                          f"shape {need} [Op:Reshape]")
    return _reshaped(tensor, value.reshape(dims))


def _reshaped(x: Any, result: Any) -> Any:
    """``result`` (``x``'s values in another shape) with the backward step that shapes the gradient back."""
    return with_gradient(result, [x], lambda g: [g.reshape(np.shape(untracked(x)))])


def shape(input: Any, out_type: Any = np.int32, name: str | None = None) -> Any:  # noqa: A002
    """The shape as a 1-d integer tensor (int32 or int64)."""
    check_types(np.zeros((), out_type), "int32, int64", "tf.shape's out_type", attr="out_type")
    return np.asarray(_tensor(input).shape, dtype=out_type)


def size(input: Any, out_type: Any = np.int32, name: str | None = None) -> Any:  # noqa: A002
    """The number of elements as a scalar tensor."""
    return np.asarray(_tensor(input).size, dtype=out_type)


def rank(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """The number of dimensions as an int32 scalar."""
    return np.asarray(_tensor(input).ndim, dtype=np.int32)


# -- reductions -------------------------------------------------------------------------------------------------


def _axes(value: Any, axis: Any, op: str) -> tuple[int, ...] | None:
    """``axis`` (None, an int or a list) as a tuple of non-negative axes, with TF's error for one out of range."""
    if axis is None:
        return None
    raw = np.atleast_1d(untracked(axis))
    if raw.dtype.kind not in "iu" and not isinstance(untracked(axis), (np.ndarray, np.generic)):
        raise TypeError(f"Cannot convert {axis!r} to EagerTensor of dtype int32")  # (NumPy axes are cast)
    axes = tuple(int(a) for a in raw)
    if len(set(a % max(value.ndim, 1) for a in axes)) != len(axes):
        raise errors.InvalidArgumentError(f"Invalid reduction arguments: Axes contains duplicate dimension: "
                                          f"{axes[-1] % max(value.ndim, 1)} [Op:{op}]")
    for a in axes:
        if not -value.ndim <= a < max(value.ndim, 1):
            raise errors.InvalidArgumentError(f"Invalid reduction dimension ({a} for input with {value.ndim} "
                                              f"dimension(s) [Op:{op}]")
    return tuple(a % max(value.ndim, 1) for a in axes)


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """The sum over ``axis`` (all axes by default), in the input's dtype (integers wrap as TF's)."""
    input_tensor = watched(input_tensor)
    value = _tensor(input_tensor)
    check_types(value, _SUM_TYPES, "reduce_sum")
    axes = _axes(value, axis, "Sum")
    if isinstance(input_tensor, Tracked):
        return input_tensor.sum(axis=axes, keepdims=keepdims, dtype=value.dtype)
    return array_module(value).asarray(tf_sum(value, axis=axes, keepdims=keepdims))


def reduce_mean(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """The mean over ``axis``: floats as NumPy (NaN when empty); integers divide truncating toward zero (0 when
    empty), summed in 64 bits (narrower integers do not overflow; int64 wraps), as TF's Mean kernel."""
    input_tensor = watched(input_tensor)
    value = _tensor(input_tensor)
    check_types(value, _SUM_TYPES, "reduce_mean")
    axes = _axes(value, axis, "Mean")
    if isinstance(input_tensor, Tracked):
        return input_tensor.mean(axis=axes, keepdims=keepdims)
    xp = array_module(value)
    if value.dtype.kind in "fc":
        return xp.asarray(tf_mean(value, axis=axes, keepdims=keepdims))
    count = value.size if axes is None else int(np.prod([value.shape[a] for a in axes]))
    total = value.sum(axis=axes, keepdims=keepdims, dtype=np.uint64 if value.dtype.kind == "u" else np.int64)
    if not count:
        return xp.zeros_like(xp.asarray(total)).astype(value.dtype)
    return truncating_divide(total, count).astype(value.dtype)


def _extreme(input_tensor: Any, axis: Any, keepdims: bool, op: str, highest: bool) -> Any:
    """reduce_max/min: an empty reduction gives the dtype's lowest/highest value (-inf/inf for floats)."""
    input_tensor = watched(input_tensor)
    value = _tensor(input_tensor)
    check_types(value, _MAX_TYPES, f"reduce_{op.lower()}")
    axes = _axes(value, axis, op)
    if value.dtype.kind == "f":
        initial = -np.inf if highest else np.inf
    else:
        info = np.iinfo(value.dtype)
        initial = info.min if highest else info.max
    reduce = array_module(value).max if highest else array_module(value).min
    result = array_module(value).asarray(reduce(value, axis=axes, keepdims=keepdims, initial=initial))

    def grads(g: Any) -> list[Any]:
        """As TF's: the gradient shared equally by the elements equal to the extreme."""
        hits = (value == reduce(value, axis=axes, keepdims=True, initial=initial)).astype(value.dtype)
        return [hits / hits.sum(axis=axes, keepdims=True) * broadcast_back(g, value, axes, keepdims)]
    return with_gradient(result, [input_tensor], grads)


def reduce_max(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """The maximum over ``axis`` (the dtype's lowest value when empty)."""
    return _extreme(input_tensor, axis, keepdims, "Max", True)


def reduce_min(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """The minimum over ``axis`` (the dtype's highest value when empty)."""
    return _extreme(input_tensor, axis, keepdims, "Min", False)


def reduce_prod(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """The product over ``axis``, in the input's dtype (1 when empty)."""
    input_tensor = watched(input_tensor)
    value = _tensor(input_tensor)
    check_types(value, _SUM_TYPES, "reduce_prod")
    axes = _axes(value, axis, "Prod")
    result = array_module(value).asarray(value.prod(axis=axes, keepdims=keepdims, dtype=value.dtype))
    return with_gradient(result, [input_tensor],
                          lambda g: [_products_of_others(value, axes) * broadcast_back(g, value, axes, keepdims)])


def _products_of_others(value: Any, axes: Any) -> Any:
    """Each element's partial derivative of the product over ``axes``: the product of the other elements there,
    from exclusive running products from both sides (right for zeros too, as TF's)."""
    reduced = tuple(builtins.range(value.ndim)) if axes is None else tuple(a % value.ndim for a in np.atleast_1d(axes))
    kept = [a for a in builtins.range(value.ndim) if a not in reduced]
    order = kept + list(reduced)
    moved = value.transpose(order)
    if not value.size:
        return np.zeros_like(value)
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), value.dtype)
    before = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    after = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return (before * after).reshape(moved.shape).transpose(np.argsort(order))


def _boolean(input_tensor: Any, axis: Any, keepdims: bool, op: str) -> Any:
    """A logical reduction: Python values must be booleans (TF's TypeError); arrays are cast, as TF casts NumPy
    arrays (nonzero is True)."""
    value = constant(untracked(input_tensor), np.bool_) if not hasattr(input_tensor, "dtype") else \
        _tensor(input_tensor).astype(np.bool_, copy=False)
    axes = _axes(value, axis, op)
    reduce = value.any if op == "Any" else value.all
    return array_module(value).asarray(reduce(axis=axes, keepdims=keepdims))


def reduce_any(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """Logical or over ``axis`` (booleans only)."""
    return _boolean(input_tensor, axis, keepdims, "Any")


def reduce_all(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Any:
    """Logical and over ``axis`` (booleans only; True when empty)."""
    return _boolean(input_tensor, axis, keepdims, "All")


# -- creation ---------------------------------------------------------------------------------------------------


def _dims(shape_value: Any) -> tuple[int, ...]:
    """A shape argument's dimensions (Python floats refused with TF's conversion error; none may be negative)."""
    raw = untracked(shape_value)
    dims = tuple(int(d) for d in np.atleast_1d(constant(raw, np.int32) if isinstance(raw, (list, tuple, float, int))
                                               else _tensor(shape_value)))
    for d in dims:
        if d < 0:
            raise errors.InvalidArgumentError(f"Dimension {d} must be >= 0 [Op:Fill] name: ")
    return dims


def zeros(shape: Any, dtype: Any = np.float32, name: str | None = None) -> Any:  # noqa: A002
    """A tensor of zeros (float32 by default)."""
    return np.zeros(_dims(shape), dtype=np.dtype(dtype))


def ones(shape: Any, dtype: Any = np.float32, name: str | None = None) -> Any:  # noqa: A002
    """A tensor of ones (float32 by default)."""
    return np.ones(_dims(shape), dtype=np.dtype(dtype))


def zeros_like(input: Any, dtype: Any = None, name: str | None = None) -> Any:  # noqa: A002
    """Zeros of ``input``'s shape and dtype (or ``dtype``)."""
    value = _tensor(input)
    return array_module(value).zeros(value.shape, dtype=value.dtype if dtype is None else np.dtype(dtype))


def ones_like(input: Any, dtype: Any = None, name: str | None = None) -> Any:  # noqa: A002
    """Ones of ``input``'s shape and dtype (or ``dtype``)."""
    value = _tensor(input)
    return array_module(value).ones(value.shape, dtype=value.dtype if dtype is None else np.dtype(dtype))


def fill(dims: Any, value: Any, name: str | None = None) -> Any:
    """A tensor of shape ``dims`` filled with ``value`` (in ``value``'s dtype)."""
    scalar = _tensor(value)
    check_types(_index_tensor(dims), "int32, int64", "tf.fill's dims", attr="index_type")
    return np.full(_dims(dims), scalar, dtype=scalar.dtype)


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None, name: str = "range") -> Any:  # noqa: A001
    """``start, start + delta, ...`` up to ``limit`` (excluded); int32 for Python ints, float32 if any is a float."""
    if limit is None:
        start, limit = 0, start
    values = [_tensor(v) for v in (start, limit, delta)]
    if dtype is None:
        kinds = [v.dtype for v in values]
        dtype = builtins.max(kinds, key=lambda d: (d.kind == "f", d.itemsize))
    dtype = np.dtype(dtype)
    first, last, step = (constant(untracked(v), dtype).item() if isinstance(untracked(v), (bool, int, float))
                         else a.astype(dtype).item() for v, a in zip((start, limit, delta), values))
    if step == 0:
        raise errors.InvalidArgumentError(f"Requires delta != 0: {step} [Op:Range] name: ")
    if (step > 0 and first > last) or (step < 0 and first < last):
        relation = "start <= limit when delta > 0" if step > 0 else "start >= limit when delta < 0"
        raise errors.InvalidArgumentError(f"Requires {relation}: {first}/{last} [Op:Range] name: ")
    return np.arange(first, last, step, dtype=dtype)


# -- joining ----------------------------------------------------------------------------------------------------


def _dims_text(shape_value: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape_value) + "]"


def _pack_dtype(values: Sequence[Any]) -> np.dtype:
    """The dtype TF converts a list of values to as one nested sequence (``tf.stack`` on axis 0): the first value
    decides (a boolean: bool; any integer, NumPy's of any width too: int32, int64 when a value needs it; a float:
    its dtype, float32 for a Python float), and an integer list holding a float becomes float32."""
    arrays = [_tensor(v) for v in values]
    kinds = [a.dtype.kind for a in arrays]
    if kinds[0] == "b":
        return np.dtype(bool)
    if kinds[0] in "iu":
        if "f" in kinds:
            return np.dtype(np.float32)
        wide = any(a.size and (a.min() < -(1 << 31) or a.max() >= 1 << 31) for a in arrays if a.dtype.kind in "iu")
        return np.dtype(np.int64 if wide else np.int32)
    return arrays[0].dtype


def _converted(values: Sequence[Any], dtype: np.dtype) -> list[Any]:
    """``values`` in ``dtype``: arrays cast, Python values converted as TF converts them (TypeError for a float
    into an integer list, say)."""
    return [_tensor(v).astype(dtype, copy=False) if isinstance(untracked(v), (np.ndarray, np.generic)) or
            hasattr(untracked(v), "__array__") else constant(untracked(v), dtype) for v in values]


def stack(values: Sequence[Any], axis: int = 0, name: str = "stack") -> Any:
    """The tensors in ``values`` (of one shape) stacked along a new ``axis``: on axis 0 converted as one nested
    list (``_pack_dtype``), on another in the first one's dtype, as TF's stack."""
    values = [watched(v) for v in values]
    if not len(values):
        return np.zeros((0,), np.float32)
    first = _tensor(values[0])
    if not -first.ndim - 1 <= axis <= first.ndim:
        raise ValueError(f"Argument `axis` = {axis} not in range [{-first.ndim - 1}, {first.ndim + 1})")
    arrays = _converted(values, _pack_dtype(values) if axis == 0 else first.dtype)
    for k, a in enumerate(arrays[1:], start=1):
        if a.shape != arrays[0].shape:
            raise errors.InvalidArgumentError(
                f"Shapes of all inputs must match: values[0].shape = {_dims_text(arrays[0].shape)} != "
                f"values[{k}].shape = {_dims_text(a.shape)} [Op:Pack]")
    result = array_module(arrays[0]).stack(arrays, axis=axis)
    return with_gradient(result, values, lambda g: [g.take(k, axis=axis) for k in builtins.range(len(values))])


def concat(values: Sequence[Any], axis: int, name: str = "concat") -> Any:
    """The tensors in ``values`` joined along ``axis`` (in the first one's dtype)."""
    values = [watched(v) for v in values]
    arrays = _converted(values, _tensor(values[0]).dtype)
    if len(arrays) == 1:
        return values[0] if isinstance(values[0], Tracked) else arrays[0]
    first = arrays[0]
    if not -builtins.max(first.ndim, 1) <= int(axis) < builtins.max(first.ndim, 1):
        raise errors.InvalidArgumentError(f"ConcatOp : Expected concatenating dimensions in the range "
                                          f"[{-first.ndim}, {first.ndim}), but got {int(axis)} [Op:ConcatV2] name: concat")
    where = int(axis) % builtins.max(first.ndim, 1)
    for k, a in enumerate(arrays[1:], start=1):
        for d in builtins.range(first.ndim):
            if d != where and (a.ndim != first.ndim or a.shape[d] != first.shape[d]):
                raise errors.InvalidArgumentError(
                    f"ConcatOp : Dimension {d} in both shapes must be equal: shape[0] = {_dims_text(first.shape)} vs. "
                    f"shape[{k}] = {_dims_text(a.shape)} [Op:ConcatV2]")
    result = array_module(first).concatenate(arrays, axis=where)
    ends = np.cumsum([a.shape[where] for a in arrays])[:-1]
    return with_gradient(result, values, lambda g: array_module(g).split(g, ends, axis=where))


# -- element-wise -----------------------------------------------------------------------------------------------


# The local derivative of each differentiable element-wise function: (upstream g, input, result) -> gradient.
Derivative = Callable[[Any, Any, Any], Any]


def _unary(x: Any, fn: Callable[[Any], Any], allowed: str, what: str, derivative: Derivative) -> Any:
    """``fn`` element-wise in ``x``'s dtype (one of the ``allowed`` types TF's kernel has); on a tape the result
    carries ``derivative``."""
    x = watched(x)
    value = _tensor(x)
    check_types(value, allowed, what)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        result = array_module(value).asarray(fn(value)).astype(value.dtype, copy=False)
    return with_gradient(result, [x], lambda g: [derivative(g, value, result)])


def square(x: Any, name: str | None = None) -> Any:
    """``x * x`` element-wise."""
    return _unary(x, lambda v: v * v, _SQUARE_TYPES, "square", lambda g, v, r: g * 2 * v)


def sqrt(x: Any, name: str | None = None) -> Any:
    """Square root (floats only; NaN for negatives)."""
    return _unary(x, np.sqrt, FLOAT_TYPES, "sqrt", lambda g, v, r: g / (2 * r))


def exp(x: Any, name: str | None = None) -> Any:
    """``e ** x`` (floats only), rounded as TF's kernel (see ``nn_kernels.exp``)."""
    return _unary(x, nn_kernels.exp, FLOAT_TYPES, "exp", lambda g, v, r: g * r)


def log(x: Any, name: str | None = None) -> Any:
    """Natural logarithm (floats only; -inf at 0), rounded as TF's kernel (see ``nn_kernels.log``)."""
    return _unary(x, nn_kernels.log, FLOAT_TYPES, "log", lambda g, v, r: g / v)


def abs(x: Any, name: str | None = None) -> Any:  # noqa: A001
    """Absolute value."""
    if _tensor(x).dtype.kind == "c":  # TF's ComplexAbs: the magnitude, in the matching float dtype
        value = _tensor(x)
        return with_gradient(np.abs(value), [watched(x)], lambda g: [g * value / np.where(value == 0, 1, np.abs(value))])
    return _unary(x, np.abs, _ABS_TYPES, "abs", lambda g, v, r: g * np.sign(v))


def negative(x: Any, name: str | None = None) -> Any:
    """``-x``."""
    return _unary(x, np.negative, _NEGATIVE_TYPES, "negative", lambda g, v, r: -g)


def tanh(x: Any, name: str | None = None) -> Any:
    """Hyperbolic tangent (floats only)."""
    return _unary(x, portable_math.tanh, FLOAT_TYPES, "tanh", lambda g, v, r: g * (1 - r * r))


def relu(features: Any, name: str | None = None) -> Any:
    """``max(features, 0)``."""
    return _unary(features, lambda v: np.maximum(v, 0), _RELU_TYPES, "nn.relu", lambda g, v, r: g * (v > 0))


def _logistic(value: Any) -> Any:
    """``1 / (1 + e ** -value)``, in float64 for narrower floats: TF's float32 results to the last bit."""
    wide = value.astype(np.float64) if value.dtype.itemsize < 8 else value
    return 1 / (1 + array_module(value).exp(-wide))


def sigmoid(x: Any, name: str | None = None) -> Any:
    """``1 / (1 + e ** -x)`` (floats only)."""
    return _unary(x, _logistic, FLOAT_TYPES, "sigmoid", lambda g, v, r: g * r * (1 - r))


def _broadcasting(fn: Callable[[Any, Any], Any], a: Any, b: Any, op: str) -> Any:
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise errors.InvalidArgumentError(
            f"Incompatible shapes: {_dims_text(a.shape)} vs. {_dims_text(b.shape)} [Op:{op}] name: ") from None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return array_module(a).asarray(fn(a, b))


def _arithmetic(x: Any, y: Any, op: str, fn: Callable[[Any, Any], Any], gradient: str) -> Any:
    """``fn`` of both operands (converted as ``_operands`` does), differentiable as ``BINARY_GRADIENTS[gradient]``."""
    x, y = watched(x), watched(y)
    a, b = _operands(x, y, op)
    result = _broadcasting(fn, a, b, op)
    if op != "RealDiv":
        result = result.astype(a.dtype, copy=False)
    return with_gradient(result, [x, y], lambda g: BINARY_GRADIENTS[gradient](g, a, b))


def add(x: Any, y: Any, name: str | None = None) -> Any:
    """``x + y`` element-wise, broadcasting."""
    return _arithmetic(x, y, "AddV2", np.add, "add")


def subtract(x: Any, y: Any, name: str | None = None) -> Any:
    """``x - y`` element-wise, broadcasting."""
    return _arithmetic(x, y, "Sub", np.subtract, "sub")


def multiply(x: Any, y: Any, name: str | None = None) -> Any:
    """``x * y`` element-wise, broadcasting."""
    return _arithmetic(x, y, "Mul", np.multiply, "mul")


_TRUEDIV_TYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "bfloat16", "float16",
                  "float32", "float64", "complex64", "complex128")


def truediv(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y``: floats keep their dtype; 8/16-bit integers give float32, wider ones float64 (TF's truediv, which
    refuses operands of two dtypes and booleans with TypeErrors)."""
    a, raw = _tensor(x), untracked(y)
    if isinstance(raw, (np.ndarray, np.generic)) or hasattr(raw, "__array__") and not isinstance(raw, (list, tuple)):
        second = as_tensor(raw).astype(a.dtype, copy=False)
    else:
        second = _python_operand(raw, a.dtype, "RealDiv")
    if second.dtype != a.dtype:
        raise TypeError(f"`x` and `y` must have the same dtype, got tf.{a.dtype.name} != tf.{second.dtype.name}.")
    if a.dtype.name not in _TRUEDIV_TYPES:
        raise TypeError(f"Invalid dtype tf.{a.dtype.name} in __truediv__. Expected one of "
                        f"{{{', '.join('tf.' + t for t in _TRUEDIV_TYPES)}}}.")
    dtype = truediv_dtype(a.dtype)
    return _arithmetic(x, y, "RealDiv", lambda p, q: (p.astype(dtype) / q.astype(dtype)), "truediv")


def divide(x: Any, y: Any, name: str | None = None) -> Any:
    """``x / y`` as ``truediv``; where TF's division operator fails on a NumPy second operand (a boolean first
    one), NumPy divides, as TF's operator hands over to NumPy's."""
    try:
        return truediv(x, y)
    except TypeError:
        raw = untracked(y)
        if not isinstance(raw, (np.ndarray, np.generic)):
            raise
        return np.true_divide(_tensor(x), raw)


def add_n(inputs: Sequence[Any], name: str | None = None) -> Any:
    """The element-wise sum of ``inputs`` (one dtype and shape, as TF's AddN); differentiable on a tape."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("Inputs must be an iterable of at least one Tensor/IndexedSlices with the same dtype and "
                         "shape.")
    first = _tensor(inputs[0])
    for k, value in enumerate(inputs[1:], start=1):
        other = _tensor(value)
        if other.dtype != first.dtype:
            raise errors.InvalidArgumentError(
                f"cannot compute AddN as input #{k}(zero-based) was expected to be a {tf_dtype(first)} tensor but is "
                f"a {tf_dtype(other)} tensor [Op:AddN] name: \nFix: cast the inputs to one dtype.")
        if other.shape != first.shape:
            raise errors.InvalidArgumentError(
                f"Inputs to operation AddN of type AddN must have the same size and shape.  Input 0: "
                f"{_dims_text(first.shape)} != input {k}: {_dims_text(other.shape)} [Op:AddN] name: ")
    return autodiff_add_n([v if isinstance(v, Tracked) else _tensor(v) for v in inputs])


def _elementwise(op: str, fn: Callable[[Any, Any], Any],
                 operands: Callable[[Any, Any, str], tuple[Any, Any]] = _operands) -> Callable[..., Any]:
    def apply(x: Any, y: Any, name: str | None = None) -> Any:
        if op not in ("Maximum", "Minimum"):  # comparisons have no gradient (TF's None): plain results
            return _broadcasting(fn, *operands(x, y, op), op)
        x, y = watched(x), watched(y)
        a, b = operands(x, y, op)
        first = (a >= b) if op == "Maximum" else (a <= b)  # ties go to x, as in TF
        return with_gradient(_broadcasting(fn, a, b, op), [x, y],
                              lambda g: [np.where(first, g, 0).astype(g.dtype), np.where(first, 0, g).astype(g.dtype)])
    apply.__name__ = op
    apply.__doc__ = f"TF's element-wise ``{op}``, broadcasting (the second operand in the first one's dtype)."
    return apply


maximum = _elementwise("Maximum", np.maximum)
minimum = _elementwise("Minimum", np.minimum)
greater = _elementwise("Greater", np.greater)
greater_equal = _elementwise("GreaterEqual", np.greater_equal)
less = _elementwise("Less", np.less)
less_equal = _elementwise("LessEqual", np.less_equal)
equal = _elementwise("Equal", np.equal, _strict_operands)
not_equal = _elementwise("NotEqual", np.not_equal, _strict_operands)


def _arg(input: Any, axis: Any, output_type: Any, op: str, fn: Callable[..., Any]) -> Any:  # noqa: A002
    value = _tensor(input)
    check_types(np.zeros((), output_type), "int16, uint16, int32, int64", f"tf.{op.lower()}'s output_type",
                attr="output_type")
    axis = 0 if axis is None else int(untracked(axis))
    if not -value.ndim <= axis < value.ndim:
        raise errors.InvalidArgumentError(f"Expected dimension in the range [{-value.ndim}, {value.ndim}), but got "
                                          f"{axis} [Op:{op}] name: ")
    if value.shape[axis] == 0:
        raise errors.InvalidArgumentError(f"Reduction axis {axis} is empty in shape {_dims_text(value.shape)} "
                                          f"[Op:{op}] name: ")
    if value.dtype.kind in "fc" and np.isnan(value).any():  # TF's kernel passes over NaNs
        xp = array_module(value)
        value = xp.where(xp.isnan(value), -np.inf if op == "ArgMax" else np.inf, value)
    return array_module(value).asarray(fn(value, axis=axis)).astype(np.dtype(output_type))


def argmax(input: Any, axis: Any = None, output_type: Any = np.int64, name: str | None = None) -> Any:  # noqa: A002
    """The index of the largest value along ``axis`` (0 by default), int64 unless ``output_type``."""
    return _arg(input, axis, output_type, "ArgMax", np.argmax)


def argmin(input: Any, axis: Any = None, output_type: Any = np.int64, name: str | None = None) -> Any:  # noqa: A002
    """The index of the smallest value along ``axis`` (0 by default), int64 unless ``output_type``."""
    return _arg(input, axis, output_type, "ArgMin", np.argmin)


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False, output_type: Any = None,
           grad_a: bool = False, grad_b: bool = False, name: str | None = None) -> Any:
    """The matrix product of (batches of) matrices, in ``a``'s dtype (``adjoint``: conjugate transposed);
    differentiable on a tape."""
    if adjoint_a or adjoint_b:
        if (adjoint_a and transpose_a) or (adjoint_b and transpose_b):
            raise ValueError("Only one of transpose_a and adjoint_a can be True." if adjoint_a and transpose_a
                             else "Only one of transpose_b and adjoint_b can be True.")
        conj = [(x if not flag or _tensor(x).dtype.kind != "c" else np.conj(_tensor(x))) for x, flag in
                ((a, adjoint_a), (b, adjoint_b))]
        return matmul(conj[0], conj[1], transpose_a=transpose_a or adjoint_a, transpose_b=transpose_b or adjoint_b)
    a, b = watched(a), watched(b)
    x, y = _operands(a, b, "MatMul")
    if x.ndim != y.ndim and builtins.min(x.ndim, y.ndim) < 2:
        raise errors.InvalidArgumentError(f"In[0] and In[1] has different ndims: {_dims_text(x.shape)} vs. "
                                          f"{_dims_text(y.shape)} [Op:MatMul] name: ")
    if x.ndim < 2:
        raise errors.InvalidArgumentError(f"In[0] and In[1] ndims must be >= 2: {x.ndim} [Op:MatMul] name: ")
    left = x.swapaxes(-1, -2) if transpose_a else x
    right = y.swapaxes(-1, -2) if transpose_b else y
    if left.shape[-1] != right.shape[-2]:
        raise errors.InvalidArgumentError(f"Matrix size-incompatible: In[0]: {_dims_text(x.shape)}, In[1]: "
                                          f"{_dims_text(y.shape)} [Op:MatMul] name: ")

    def grads(g: Any) -> list[Any]:
        grad_left, grad_right = BINARY_GRADIENTS["matmul"](g, left, right)
        return [grad_left.swapaxes(-1, -2) if transpose_a else grad_left,
                grad_right.swapaxes(-1, -2) if transpose_b else grad_right]
    return with_gradient(left @ right, [a, b], grads)


# -- shape manipulation and selection ---------------------------------------------------------------------------


def expand_dims(input: Any, axis: int, name: str | None = None) -> Any:  # noqa: A002
    """``input`` with a new dimension of size 1 at ``axis``."""
    input = watched(input)  # noqa: A001
    value = _tensor(input)
    axis = int(np.reshape(constant(untracked(axis), np.int32) if isinstance(untracked(axis), (list, tuple, float))
                          else _tensor(axis), -1)[0])  # (a one-element list is an axis too; a float is refused)
    if not -value.ndim - 1 <= axis <= value.ndim:
        raise errors.InvalidArgumentError(f"Tried to expand dim index {axis} for tensor with {value.ndim} dimensions. "
                                          "[Op:ExpandDims]")
    return _reshaped(input, array_module(value).expand_dims(value, axis))


def squeeze(input: Any, axis: Any = None, name: str | None = None) -> Any:  # noqa: A002
    """``input`` without its dimensions of size 1 (only those in ``axis`` when given)."""
    input = watched(input)  # noqa: A001
    value = _tensor(input)
    axes = None if axis is None else tuple(int(a) for a in np.atleast_1d(axis))
    for a in axes or ():
        if not -value.ndim <= a < value.ndim:
            raise errors.InvalidArgumentError(f"Tried to squeeze dim index {a} for tensor with {value.ndim} "
                                              "dimensions. [Op:Squeeze] name: ")
        if value.shape[a] != 1:
            raise errors.InvalidArgumentError(f"Can not squeeze dim[{a % value.ndim}], expected a dimension of 1, got "
                                              f"{value.shape[a]} [Op:Squeeze]")
    return _reshaped(input, array_module(value).squeeze(value, axis=axes))


def transpose(a: Any, perm: Any = None, name: str = "transpose") -> Any:
    """``a`` with its dimensions permuted (reversed by default)."""
    a = watched(a)
    value = _tensor(a)
    order = tuple(reversed(builtins.range(value.ndim))) if perm is None else tuple(int(p) for p in perm)
    for p in order:
        if not 0 <= p < value.ndim:
            raise errors.InvalidArgumentError(f"{p} is out of range [0 .. {value.ndim}) [Op:Transpose]")
    for d in builtins.range(value.ndim):
        if d not in order:
            raise errors.InvalidArgumentError(f"{d} is missing from {{{','.join(map(str, order))}}}. [Op:Transpose]")
    return with_gradient(array_module(value).transpose(value, order), [a], lambda g: [g.transpose(np.argsort(order))])


def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Any:
    """``x`` where ``condition`` holds, else ``y``; with only ``condition``, the int64 coordinates of its True
    elements."""
    raw = untracked(condition)
    cond = constant(raw, np.bool_) if isinstance(raw, (list, tuple, bool, int, float)) else \
        _tensor(condition).astype(np.bool_, copy=False)  # (NumPy conditions are cast, as TF casts them)
    if x is None and y is None:
        return array_module(cond).argwhere(cond).astype(np.int64)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    x, y = watched(x), watched(y)
    a, b = _operands(x, y, "SelectV2")
    return with_gradient(array_module(cond).where(cond, a, b), [x, y],
                          lambda g: [np.where(cond, g, 0).astype(g.dtype), np.where(cond, 0, g).astype(g.dtype)])


def one_hot(indices: Any, depth: int, on_value: Any = None, off_value: Any = None, axis: int = -1,
            dtype: Any = None, name: str | None = None) -> Any:
    """One-hot rows for ``indices`` (all off for an index outside ``[0, depth)``), float32 by default."""
    index = _tensor(indices)
    check_types(index, "uint8, int8, int32, int64", "one_hot's indices", attr="TI")
    if isinstance(untracked(depth), float):
        raise TypeError(f"Cannot convert {untracked(depth)!r} to EagerTensor of dtype int32")
    if int(untracked(depth)) < 0:
        raise errors.InvalidArgumentError(f"depth must be non-negative, got: {int(untracked(depth))} [Op:OneHot]")
    if on_value is not None and off_value is not None and _tensor(on_value).dtype != _tensor(off_value).dtype:
        raise TypeError(f"dtype <dtype: '{_tensor(on_value).dtype.name}'> of on_value does not match dtype <dtype: "
                        f"'{_tensor(off_value).dtype.name}'> of off_value")
    given = on_value if on_value is not None else off_value
    dtype = np.dtype(dtype or (_tensor(given).dtype if given is not None else np.float32))
    on = 1 if on_value is None else untracked(on_value)
    off = 0 if off_value is None else untracked(off_value)
    hot = index[..., None] == np.arange(int(depth))
    return np.moveaxis(np.where(hot, on, off).astype(dtype), -1, axis)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: str | None = None) -> Any:
    """``t`` limited to ``[clip_value_min, clip_value_max]``."""
    return maximum(minimum(t, clip_value_max), clip_value_min)  # as TF composes it (and differentiates it)


def gather(params: Any, indices: Any, validate_indices: Any = None, axis: Any = None, batch_dims: int = 0,
           name: str | None = None) -> Any:
    """The slices of ``params`` at ``indices`` along ``axis`` (by default ``batch_dims``), TF's error for an index
    out of range (at its position in ``indices``). With ``batch_dims`` the first dimensions of both are batch
    dimensions gathered pairwise. ``validate_indices`` is ignored, as in TF 2."""
    params = watched(params)
    value, index = _tensor(params), _tensor(indices)
    check_types(index, "int16, int32, int64", "gather's indices", attr="Tindices")
    batch_dims = int(batch_dims) + index.ndim if batch_dims < 0 else int(batch_dims)
    axis = batch_dims if axis is None else int(untracked(axis)) % builtins.max(value.ndim, 1)
    if batch_dims > axis:  # (TF's eager gather then gathers along ``axis`` without batch dimensions)
        batch_dims = 0
    bound = value.shape[axis]
    for position in zip(*np.nonzero((index < 0) | (index >= bound))):
        where = ",".join(map(str, position))
        raise errors.InvalidArgumentError(f"indices[{where}] = {index[position]} is not in [0, {bound}) "
                                          "[Op:GatherV2]")
    if batch_dims:
        batch = int(np.prod(index.shape[:batch_dims]))
        flat_values = value.reshape((batch, *value.shape[batch_dims:]))
        flat_index = index.reshape((batch, *index.shape[batch_dims:]))
        inner = axis - batch_dims
        pieces = [np.take(flat_values[b], flat_index[b], axis=inner) for b in builtins.range(batch)]
        result = np.stack(pieces).reshape((*index.shape[:batch_dims], *pieces[0].shape)) if pieces else \
            np.zeros((*index.shape[:batch_dims], *value.shape[batch_dims:axis], *index.shape[batch_dims:],
                      *value.shape[axis + 1:]), value.dtype)

        def batched_grads(g: Any) -> list[Any]:
            full = np.zeros(flat_values.shape, g.dtype)
            flat_g = g.reshape((batch, *g.shape[batch_dims:]))
            span = flat_index.ndim - 1
            for b in builtins.range(batch):
                moved = np.moveaxis(flat_g[b], list(builtins.range(inner, inner + span)), list(builtins.range(span)))
                np.add.at(np.moveaxis(full[b], inner, 0), flat_index[b], moved)
            return [full.reshape(value.shape)]
        return with_gradient(result, [params], batched_grads)

    def grads(g: Any) -> list[Any]:
        """The gathered slices' gradients added back where they came from (dense, where TF's are IndexedSlices)."""
        full = array_module(value).zeros_like(value)
        gathered = np.moveaxis(g, list(builtins.range(axis, axis + index.ndim)), list(builtins.range(index.ndim)))
        np.add.at(np.moveaxis(full, axis, 0), index, gathered)
        return [full]
    return with_gradient(array_module(value).take(value, index, axis=axis), [params], grads)
