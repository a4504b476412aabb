"""``keras.ops``: Keras 3's backend-neutral tensor functions that custom layers and functional graphs use, over
mirrorlab's differentiable tensor functions (a recording tape follows them).

Operands are promoted as Keras 3 promotes them (JAX's lattice, not TF's strict rules): an int and a float array
give the float, Python numbers are weak (``int32 + 1.5`` is float32, ``float16 + 2.5`` stays float16), signed and
unsigned ints meet in the next wider signed int. On symbolic tensors (``keras.Input`` and what layers made of it)
each function records a graph operation named as Keras names it (``ops.mean`` -> ``mean``), which
``keras.Model(inputs, outputs)`` replays."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import array_ops, nn_ops
from ..autodiff import untracked
from .naming import to_snake_case
from .symbolic import TensorOp, is_symbolic

__all__ = ["abs", "add", "argmax", "argmin", "cast", "clip", "concatenate", "divide", "exp", "expand_dims", "log",
           "matmul", "max", "maximum", "mean", "min", "minimum", "multiply", "negative", "ones_like", "relu",
           "reshape", "result_type", "sigmoid", "softmax", "sqrt", "square", "squeeze", "stack", "subtract", "sum",
           "tanh", "transpose", "true_divide", "where", "zeros_like"]

_FLOATX = np.dtype("float32")
_INTX = np.dtype("int32")


def _dtype_of(value: Any) -> np.dtype | type:
    """An operand's dtype, or ``bool``/``int``/``float`` for a weakly typed Python number."""
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return type(value)
    dtype = getattr(untracked(value), "dtype", None)
    return np.dtype(dtype if dtype is not None else np.asarray(value).dtype)


def _join(a: np.dtype | type, b: np.dtype | type) -> np.dtype | type:
    """Keras 3's promotion of two operand types (weak Python types give way to arrays' dtypes)."""
    weak = {bool: 0, int: 1, float: 2}
    if a in weak or b in weak:
        if a in weak and b in weak:
            return max(a, b, key=weak.get)
        strong, light = (b, a) if a in weak else (a, b)
        if light is float and strong.kind in "biu":
            return _FLOATX
        if light is int and strong.kind == "b":
            return _INTX
        return strong
    if a.kind == "b" or b.kind == "b":
        return b if a.kind == "b" else a
    if a.kind == "f" or b.kind == "f":
        if a.kind == "f" and b.kind == "f":
            return a if a.itemsize >= b.itemsize else b
        return a if a.kind == "f" else b
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    return np.dtype(f"int{unsigned.itemsize * 16 if unsigned.itemsize < 4 else 64}")  # (``min`` is an op here)


def result_type(*values: Any) -> np.dtype:
    """The dtype Keras 3 computes ``values`` in (Python numbers alone: int32, float32 or bool)."""
    joined = functools.reduce(_join, [_dtype_of(v) for v in values])
    return {bool: np.dtype(bool), int: _INTX, float: _FLOATX}.get(joined, joined)


def _as(value: Any, dtype: np.dtype) -> Any:
    """``value`` in ``dtype`` (differentiably for floats)."""
    if isinstance(value, (bool, int, float)) or _dtype_of(value) != dtype:
        return array_ops.cast(value if not isinstance(value, (bool, int, float)) else np.asarray(value), dtype)
    return value


def _floating(value: Any) -> Any:
    """``value`` as floats: ints and bools in float32, as Keras' float-only functions take them."""
    return _as(value, _FLOATX) if _dtype_of(value) in (bool, int) or _dtype_of(value).kind in "biu" else value


def _op(class_name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make ``fn`` a Keras op: on symbolic operands a graph operation ``class_name``, else ``fn`` itself."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def apply(*args: Any, **kwargs: Any) -> Any:
            if is_symbolic(args, kwargs):
                return TensorOp(class_name, fn)(*args, **kwargs)
            return fn(*args, **kwargs)
        return apply
    return wrap


def _binary(class_name: str, fn: Callable[[Any, Any], Any], floats: bool = False) -> Callable[..., Any]:
    @_op(class_name)
    def apply(x1: Any, x2: Any) -> Any:
        dtype = result_type(x1, x2, 1.0) if floats else result_type(x1, x2)
        return fn(_as(x1, dtype), _as(x2, dtype))
    apply.__name__ = apply.__qualname__ = to_snake_case(class_name)
    apply.__doc__ = f"Keras' ``ops.{apply.__name__}`` (operands promoted as Keras does)."
    return apply


add = _binary("Add", array_ops.add)
subtract = _binary("Subtract", array_ops.subtract)
multiply = _binary("Multiply", array_ops.multiply)
divide = _binary("Divide", array_ops.divide, floats=True)
true_divide = _binary("TrueDivide", array_ops.divide, floats=True)
maximum = _binary("Maximum", array_ops.maximum)
minimum = _binary("Minimum", array_ops.minimum)
matmul = _binary("Matmul", array_ops.matmul)


def _unary(class_name: str, fn: Callable[[Any], Any], floats: bool) -> Callable[..., Any]:
    @_op(class_name)
    def apply(x: Any) -> Any:
        return fn(_floating(x) if floats else x)
    apply.__name__ = apply.__qualname__ = class_name.lower()
    apply.__doc__ = f"Keras' ``ops.{class_name.lower()}``{' (ints as float32)' if floats else ''}."
    return apply


sqrt = _unary("Sqrt", array_ops.sqrt, floats=True)
exp = _unary("Exp", array_ops.exp, floats=True)
log = _unary("Log", array_ops.log, floats=True)
tanh = _unary("Tanh", array_ops.tanh, floats=True)
square = _unary("Square", array_ops.square, floats=False)
abs = _unary("Absolute", array_ops.abs, floats=False)  # noqa: A001 (Keras' name)
negative = _unary("Negative", array_ops.negative, floats=False)
relu = _unary("Relu", array_ops.relu, floats=False)
sigmoid = _unary("Sigmoid", array_ops.sigmoid, floats=False)


@_op("Softmax")
def softmax(x: Any, axis: int = -1) -> Any:
    """Keras' ``ops.softmax`` along ``axis``."""
    return nn_ops.softmax(x, axis=axis)


@_op("Mean")
def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The mean (ints and bools as float32)."""
    return array_ops.reduce_mean(_as(x, result_type(x, 1.0)), axis=axis, keepdims=keepdims)


@_op("Sum")
def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001 (Keras' name)
    """The sum (bools and small ints summed as int32, small unsigned ints as uint32, as Keras does)."""
    dtype = _dtype_of(x)
    if dtype.kind == "b" or dtype in (np.dtype("int8"), np.dtype("int16")):
        x = _as(x, _INTX)
    elif dtype in (np.dtype("uint8"), np.dtype("uint16")):
        x = _as(x, np.dtype("uint32"))
    return array_ops.reduce_sum(x, axis=axis, keepdims=keepdims)


@_op("Max")
def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001 (Keras' name)
    """The maximum."""
    return array_ops.reduce_max(x, axis=axis, keepdims=keepdims)


@_op("Min")
def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001 (Keras' name)
    """The minimum."""
    return array_ops.reduce_min(x, axis=axis, keepdims=keepdims)


@_op("Argmax")
def argmax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The index of the maximum (int32; over the flattened input without ``axis``)."""
    return _arg(array_ops.argmax, x, axis, keepdims)


@_op("Argmin")
def argmin(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The index of the minimum (int32; over the flattened input without ``axis``)."""
    return _arg(array_ops.argmin, x, axis, keepdims)


def _arg(fn: Callable[..., Any], x: Any, axis: Any, keepdims: bool) -> Any:
    if axis is None:
        x, axis = array_ops.reshape(x, [-1]), 0
    out = fn(x, axis=axis, output_type=np.int32)
    return array_ops.expand_dims(out, axis) if keepdims else out


@_op("Concatenate")
def concatenate(xs: list[Any], axis: int = 0) -> Any:
    """``xs`` joined along ``axis``, in their promoted dtype."""
    dtype = result_type(*xs)
    return array_ops.concat([_as(x, dtype) for x in xs], axis=axis)


@_op("Stack")
def stack(x: list[Any], axis: int = 0) -> Any:
    """``x`` stacked along a new ``axis``, in their promoted dtype."""
    dtype = result_type(*x)
    return array_ops.stack([_as(v, dtype) for v in x], axis=axis)


@_op("Where")
def where(condition: Any, x1: Any = None, x2: Any = None) -> Any:
    """``x1`` where ``condition`` holds, else ``x2`` (promoted together)."""
    dtype = result_type(x1, x2)
    return array_ops.where(np.asarray(untracked(condition), bool), _as(x1, dtype), _as(x2, dtype))


@_op("Cast")
def cast(x: Any, dtype: Any) -> Any:
    """``x`` in ``dtype``."""
    return array_ops.cast(x, np.dtype(dtype))


@_op("Reshape")
def reshape(x: Any, newshape: Any) -> Any:
    """``x`` in shape ``newshape`` (one -1 allowed)."""
    return array_ops.reshape(x, list(newshape) if isinstance(newshape, (list, tuple)) else [newshape])


@_op("Transpose")
def transpose(x: Any, axes: Any = None) -> Any:
    """``x`` with its axes permuted (reversed without ``axes``)."""
    return array_ops.transpose(x, perm=axes)


@_op("ExpandDims")
def expand_dims(x: Any, axis: int) -> Any:
    """``x`` with a dimension of 1 inserted at ``axis``."""
    return array_ops.expand_dims(x, axis)


@_op("Squeeze")
def squeeze(x: Any, axis: Any = None) -> Any:
    """``x`` without its dimensions of 1 (those at ``axis``)."""
    return array_ops.squeeze(x, axis=axis)


@_op("Clip")
def clip(x: Any, x_min: Any, x_max: Any) -> Any:
    """``x`` limited to ``[x_min, x_max]`` (bools as int32)."""
    if _dtype_of(x) == np.dtype(bool):
        x = _as(x, _INTX)
    return array_ops.clip_by_value(x, x_min, x_max)


@_op("OnesLike")
def ones_like(x: Any, dtype: Any = None) -> Any:
    """Ones of ``x``'s shape (and dtype unless given)."""
    return array_ops.ones_like(x, dtype=None if dtype is None else np.dtype(dtype))


@_op("ZerosLike")
def zeros_like(x: Any, dtype: Any = None) -> Any:
    """Zeros of ``x``'s shape (and dtype unless given)."""
    return array_ops.zeros_like(x, dtype=None if dtype is None else np.dtype(dtype))

