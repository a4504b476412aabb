"""``tf.nn``'s softmax, cross-entropies and ``l2_loss`` with TF 2.21's dtypes, shapes, errors and gradients (the
kernels' arithmetic is ``nn_kernels``'). Differentiable on a recording ``GradientTape`` with TF's gradients: the
softmax's Jacobian product, the cross-entropies' ``softmax - labels`` (and ``-log_softmax`` for dense labels),
the sigmoid cross-entropy's through TF's composition of it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import errors
from ._kernels import nn_kernels
from .array_ops import (_RELU_TYPES, FLOAT_TYPES, _tensor, _unary, add, cast, check_types, reduce_mean, sigmoid, square,
                        squeeze, stop_gradient, subtract)
from .autodiff import untracked, watched, with_gradient
from ..distribute.kernel_dtypes import tf_dtype
from ._kernels.summation import tf_sum, tf_sum_along
from ..tensor import array_module, to_host
from .tensor_conversion import convert_to_tensor

__all__ = ["softmax", "log_softmax", "sparse_softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits",
           "sigmoid_cross_entropy_with_logits", "l2_loss", "check_labels", "relu6", "leaky_relu", "bias_add", "moments"]

_SOFTMAX_TYPES = "half, bfloat16, float, double"
_LABEL_TYPES = "int32, int64"
_SPARSE_OP = "SparseSoftmaxCrossEntropyWithLogits"
_ONE_LABEL = "give one integer class label per example: labels of the logits' shape without its last dimension."


def _dims(shape: tuple[int, ...]) -> str:
    """A shape as TF's kernels print it: ``[2,3]``."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def _precise(value: Any) -> Any:
    """The logits TF's cross-entropies compute from: float16 widened to float32."""
    return value.astype(np.float32) if value.dtype == np.float16 else value


# -- softmax ----------------------------------------------------------------------------------------------------


def _softmax_op(logits: Any, axis: Any, op: str, kernel: Callable[[Any, int], Any],
                derivative: Callable[[Any, Any, int], Any]) -> Any:
    """``kernel`` along ``axis`` with TF's checks (the axis range for any but the last axis, the dtype, a scalar);
    on a tape the result carries ``derivative(g, result, axis)``."""
    logits = convert_to_tensor(logits)
    value = untracked(logits)
    axis = -1 if axis is None else axis
    if axis not in (-1, value.ndim - 1) and not -value.ndim <= axis < value.ndim:
        raise errors.InvalidArgumentError(
            f"`dim` must be in the range [{-value.ndim}, {value.ndim}) where {value.ndim} is the number of dimensions "
            f"in the input. Received: dim={axis}\nFix: pass an axis of the logits (-1, the default, for the last).")
    check_types(value, _SOFTMAX_TYPES, f"nn.{op.lower()}")
    if value.ndim == 0:
        raise errors.InvalidArgumentError(f"logits must have >= 1 dimension, got [] [Op:{op}] name: \nFix: give "
                                          "the logits a class dimension.")
    result = kernel(value, axis)
    return with_gradient(result, [logits], lambda g: [derivative(g, result, axis)])


def softmax(logits: Any, axis: int | None = None, name: str | None = None) -> Any:
    """``exp(logits) / sum(exp(logits))`` along ``axis`` (the last by default), in the logits' float dtype."""
    return _softmax_op(logits, axis, "Softmax", nn_kernels.softmax,
                       lambda g, r, axis: (g - tf_sum_along(g * r, axis)) * r)


def log_softmax(logits: Any, axis: int | None = None, name: str | None = None) -> Any:
    """``logits - log(sum(exp(logits)))`` along ``axis`` (the last by default), in the logits' float dtype."""
    return _softmax_op(logits, axis, "LogSoftmax", nn_kernels.log_softmax,
                       lambda g, r, axis: g - tf_sum_along(g, axis) * nn_kernels.exp(r))


# -- cross-entropies --------------------------------------------------------------------------------------------


def check_labels(labels: Any, classes: int, fix: str) -> None:
    """TF's error for a class index outside ``[0, classes)``: it names the smallest label if negative, else the
    largest, and lists every label."""
    low, high = (int(to_host(labels.min())), int(to_host(labels.max()))) if labels.size else (0, 0)
    if low < 0 or high >= classes:
        shown = " ".join(str(int(v)) for v in to_host(labels).ravel())
        raise errors.InvalidArgumentError(
            f"Received a label value of {low if low < 0 else high} which is outside the valid range of [0, {classes})."
            f"  Label values: {shown} [Op:{_SPARSE_OP}] name: \nFix: {fix}")


def sparse_softmax_cross_entropy_with_logits(labels: Any, logits: Any, name: str | None = None) -> Any:
    """``-log(softmax(logits)[label])`` per example, for integer class ``labels`` of the logits' shape without its
    last dimension; differentiable in the logits (``softmax - one_hot(labels)``), not the labels (TF's None)."""
    labels_value = untracked(convert_to_tensor(labels))
    logits = convert_to_tensor(logits)
    value = untracked(logits)
    if value.ndim == 0:
        raise ValueError(f"`logits` cannot be a scalar. Received logits={value}`\nFix: give the logits a class "
                         "dimension.")
    if labels_value.ndim != value.ndim - 1:
        raise ValueError(f"`labels.shape.rank` must equal `logits.shape.rank - 1`. Received: labels.shape="
                         f"{labels_value.shape} of rank {labels_value.ndim} and logits.shape={value.shape} of rank "
                         f"{value.ndim}\nFix: {_ONE_LABEL}")
    if labels_value.shape != value.shape[:-1]:
        raise ValueError("`labels.shape` must equal `logits.shape` except for the last dimension. Received: "
                         f"labels.shape={labels_value.shape} and logits.shape={value.shape}\nFix: {_ONE_LABEL}")
    check_types(value, _SOFTMAX_TYPES, "nn.sparse_softmax_cross_entropy_with_logits")
    check_types(labels_value, _LABEL_TYPES, "the labels of nn.sparse_softmax_cross_entropy_with_logits", "Tlabels")
    classes = value.shape[-1]
    if not classes:
        raise errors.InvalidArgumentError(f"Must have at least one class, but got logits shape "
                                          f"{_dims((labels_value.size, 0))} [Op:{_SPARSE_OP}] name: \nFix: give "
                                          "the logits at least one class.")
    check_labels(labels_value, classes, "labels must be class indices below the number of logits per example.")
    precise = _precise(value)
    shifted, log_norm = nn_kernels.log_sum_exp(precise, -1)
    index = labels_value[..., None].astype(np.int64)
    loss = (log_norm - array_module(precise).take_along_axis(shifted, index, axis=-1))[..., 0]

    def grads(g: Any) -> list[Any]:
        onehot = (array_module(precise).arange(classes) == index).astype(precise.dtype)
        backprop = nn_kernels.xent_probabilities(precise, -1) - onehot
        return [(g.astype(precise.dtype)[..., None] * backprop).astype(value.dtype)]
    return with_gradient(loss.astype(value.dtype), [logits], grads)


def _move_axis_to_end(shape: tuple[int, ...], axis: int) -> None:
    """TF's errors for an ``axis`` its ``_move_dim_to_end`` cannot build a permutation for (negative ones but -1,
    or past the last dimension): the error of ``tf.range`` it calls."""
    start, limit = (0, axis) if axis < 0 else (axis + 1, len(shape))
    if start > limit:
        raise errors.InvalidArgumentError(f"Requires start <= limit when delta > 0: {start}/{limit} [Op:Range] "
                                          "name: \nFix: pass axis=-1 or a non-negative axis of the logits.")


def _as_matrix(value: Any) -> Any:
    """``value`` flattened to [examples, classes] as TF's ``_flatten_outer_dims`` does (a scalar has no classes)."""
    if value.ndim == 0:
        raise errors.InvalidArgumentError("Expected begin[0] == 0 (got -1) and size[0] == 0 (got 1) when "
                                          "input.dim_size(0) == 0 [Op:Slice] name: \nFix: give labels and logits "
                                          "a class dimension.")
    return value.reshape(-1, value.shape[-1])


def softmax_cross_entropy_with_logits(labels: Any, logits: Any, axis: int = -1, name: str | None = None) -> Any:
    """``-sum(labels * log_softmax(logits))`` along ``axis``, for label distributions (cast to the logits' dtype)
    broadcastable to the logits; differentiable in the logits (``softmax - labels``) and the labels
    (``-log_softmax``)."""
    logits = convert_to_tensor(logits)
    value = untracked(logits)
    precise = _precise(value)
    labels = convert_to_tensor(labels)
    labels_value = untracked(labels)
    if labels_value.dtype != precise.dtype:  # TF casts the labels to the (widened) logits' dtype
        labels_value = cast(labels_value, precise.dtype)
    xp = array_module(value)
    if axis != -1:
        _move_axis_to_end(value.shape, axis)
        precise, labels_value = xp.moveaxis(precise, axis, -1), xp.moveaxis(labels_value, axis, -1)
    outer = precise.shape[:-1]
    matrix, targets = _as_matrix(precise), _as_matrix(labels_value)
    check_types(value, _SOFTMAX_TYPES, "nn.softmax_cross_entropy_with_logits")
    if any(a != b and 1 not in (a, b) for a, b in zip(matrix.shape, targets.shape)):
        raise errors.InvalidArgumentError(
            f"logits and labels must be broadcastable: logits_size={_dims(matrix.shape)} labels_size="
            f"{_dims(targets.shape)} [Op:SoftmaxCrossEntropyWithLogits] name: \nFix: give labels the logits' "
            "shape (or one that broadcasts to it).")
    shape = np.broadcast_shapes(matrix.shape, targets.shape)
    matrix, targets = xp.broadcast_to(matrix, shape), xp.broadcast_to(targets, shape)
    if shape[0] != int(np.prod(outer)):
        raise errors.InvalidArgumentError(f"Input to reshape is a tensor with {shape[0]} values, but the requested "
                                          f"shape has {int(np.prod(outer))} [Op:Reshape] name: \nFix: give labels "
                                          "no more examples than the logits.")
    shifted, log_norm = nn_kernels.log_sum_exp(matrix, -1, log_packets=True)  # (the dense kernel packs its log)
    cost = tf_sum(targets * (log_norm - shifted), axis=-1).reshape(outer)

    def back(part: Any, like: Any) -> Any:
        """A [examples, classes] gradient in the shape and dtype of ``like`` (its axis moved back)."""
        return xp.moveaxis(part.reshape(*outer, shape[-1]), -1, axis).astype(like.dtype)

    def grads(g: Any) -> list[Any]:
        upstream = g.astype(matrix.dtype).reshape(-1, 1)
        return [back(upstream * (nn_kernels.xent_probabilities(matrix, -1) - targets), value),
                back(upstream * -nn_kernels.log_softmax(matrix, -1), untracked(labels))]
    return with_gradient(cost.astype(value.dtype), [logits, labels], grads)


def sigmoid_cross_entropy_with_logits(labels: Any = None, logits: Any = None, name: str | None = None) -> Any:
    """``max(x, 0) - x * z + log(1 + exp(-|x|))`` element-wise for logits ``x`` and labels ``z`` of one shape and
    dtype; differentiable in both, with the gradient of TF's composition of it."""
    if labels is None or logits is None:
        raise ValueError("Both `labels` and `logits` must be provided for sigmoid_cross_entropy_with_logits"
                         f"Received: labels={labels} and logits={logits}\nFix: pass both labels= and logits=.")
    logits, labels = convert_to_tensor(logits), convert_to_tensor(labels)
    x, z = untracked(logits), untracked(labels)
    if x.shape != z.shape:
        raise ValueError(f"`logits` and `labels` must have the same shape, received ({x.shape} vs {z.shape})."
                         "\nFix: give labels the logits' shape.")
    if x.dtype != z.dtype:
        raise errors.InvalidArgumentError(
            f"cannot compute Mul as input #1(zero-based) was expected to be a {tf_dtype(x)} tensor but is a "
            f"{tf_dtype(z)} tensor [Op:Mul] name: \nFix: give labels the logits' dtype (tf.cast).")
    check_types(x, FLOAT_TYPES, "nn.sigmoid_cross_entropy_with_logits")

    def grads(g: Any) -> list[Any]:
        """TF's tape through where/-/*/exp/log1p: the relu's, product's and exp's terms summed in its order."""
        positive = x >= 0
        e = nn_kernels.exp(array_module(x).where(positive, -x, x))
        through_exp = g * (x.dtype.type(1) / (x.dtype.type(1) + e)) * e
        product = -g * z
        return [array_module(x).where(positive, g + product - through_exp, product + through_exp), -g * x]
    return with_gradient(nn_kernels.sigmoid_xent(z, x), [logits, labels], grads)


def l2_loss(t: Any, name: str | None = None) -> Any:
    """``sum(t ** 2) / 2`` as a scalar of ``t``'s float dtype; its gradient is ``t``."""
    t = convert_to_tensor(t)
    value = untracked(t)
    check_types(value, _SOFTMAX_TYPES, "nn.l2_loss")
    half = value.dtype.type(0.5)
    result = array_module(value).asarray(tf_sum(value * value * half))
    return with_gradient(result, [t], lambda g: [value * g])


def relu6(features: Any, name: str | None = None) -> Any:
    """``min(max(features, 0), 6)``; the gradient passes strictly between 0 and 6, as TF's Relu6."""
    return _unary(features, lambda v: np.minimum(np.maximum(v, 0), 6), _RELU_TYPES, "nn.relu6",
                  lambda g, v, r: g * ((v > 0) & (v < 6)))


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


def elu(features: Any, name: str | None = None) -> Any:
    """``exp(x) - 1`` where negative, else ``x`` (TF's Elu kernel); the gradient from the result, as EluGrad."""
    return _unary(features, lambda v: np.where(v < 0, nn_kernels.exp(v) - v.dtype.type(1), v), _SOFTMAX_TYPES,
                  "nn.elu", lambda g, v, r: np.where(r < 0, g * (r + r.dtype.type(1)), g))


def selu(features: Any, name: str | None = None) -> Any:
    """``scale * alpha * (exp(x) - 1)`` where negative, else ``scale * x`` (TF's Selu kernel and SeluGrad)."""
    def forward(v: Any) -> Any:
        one, scale, scale_alpha = v.dtype.type(1), v.dtype.type(_SELU_SCALE), v.dtype.type(_SELU_SCALE_ALPHA)
        return np.where(v < 0, scale_alpha * (nn_kernels.exp(v) - one), scale * v)
    return _unary(features, forward, _SOFTMAX_TYPES, "nn.selu", lambda g, v, r: np.where(
        r < 0, g * (r + r.dtype.type(_SELU_SCALE_ALPHA)), g * r.dtype.type(_SELU_SCALE)))


def softplus(features: Any, name: str | None = None) -> Any:
    """``log1p(exp(x))``, with TF's kernel's cut-offs: ``x`` above ``-(log(eps) + 2)``, ``exp(x)`` below
    ``log(eps) + 2``; the gradient ``g / (exp(-x) + 1)`` as SoftplusGrad. (Between the cut-offs TF's vectorized
    log1p can differ from the C library's in the last bit.)"""
    def forward(v: Any) -> Any:
        threshold = v.dtype.type(math.log(np.finfo(v.dtype).eps) + 2)
        e = nn_kernels.exp(v)
        return np.where(v > -threshold, v, np.where(v < threshold, e, nn_kernels.log1p(e)))
    return _unary(features, forward, _SOFTMAX_TYPES, "nn.softplus",
                  lambda g, v, r: g / (nn_kernels.exp(-v) + v.dtype.type(1)))


def softsign(features: Any, name: str | None = None) -> Any:
    """``x / (|x| + 1)`` (TF's Softsign kernel and SoftsignGrad)."""
    return _unary(features, lambda v: v / (np.abs(v) + v.dtype.type(1)), _SOFTMAX_TYPES, "nn.softsign",
                  lambda g, v, r: g / np.square(np.abs(v) + v.dtype.type(1)))


def silu(features: Any, beta: float = 1.0, name: str | None = None) -> Any:
    """``x * sigmoid(beta * x)`` (``tf.nn.silu``/``swish``), with TF's custom gradient for ``x``."""
    x = watched(convert_to_tensor(features))
    value = _tensor(x)
    check_types(value, _SOFTMAX_TYPES, "nn.silu")
    scaled = value * value.dtype.type(beta)
    gate = _tensor(sigmoid(scaled))
    one = value.dtype.type(1)
    return with_gradient(value * gate, [x], lambda g: [g * (gate * (one + scaled * (one - gate)))])


swish = silu


def leaky_relu(features: Any, alpha: float = 0.2, name: str | None = None) -> Any:
    """``features`` where positive, else ``alpha * features`` (integers computed as float32, as TF's)."""
    features = watched(features)
    value = _tensor(features)
    if value.dtype.kind in "iu":
        value = value.astype(np.float32)
    slope = value.dtype.type(alpha)
    result = np.where(value > 0, value, value * slope).astype(value.dtype)
    return with_gradient(result, [features], lambda g: [np.where(value > 0, g, g * slope)])


def bias_add(value: Any, bias: Any, data_format: str | None = None, name: str | None = None) -> Any:
    """``value + bias`` along the last dimension (``bias`` 1-D, one entry per channel)."""
    channels = _tensor(bias)
    shape = np.shape(_tensor(value))
    if channels.ndim != 1:
        raise errors.InvalidArgumentError(f"Biases must be 1D: [{','.join(map(str, channels.shape))}] [Op:BiasAdd]")
    if len(shape) < 2 or shape[-1] != channels.shape[0]:
        raise errors.InvalidArgumentError(f"Must provide as many biases as the last dimension of the input tensor: "
                                          f"[{channels.shape[0]}] vs. [{','.join(map(str, shape))}] [Op:BiasAdd]")
    return add(value, bias)


def moments(x: Any, axes: Any, shift: Any = None, keepdims: bool = False, name: str | None = None) -> tuple[Any, Any]:
    """``(mean, variance)`` over ``axes`` (the variance around the mean, which it does not differentiate through,
    as TF composes it); float16 inputs computed in float32."""
    if isinstance(untracked(x), (list, tuple)):
        raise AttributeError(f"'{type(untracked(x)).__name__}' object has no attribute 'dtype'")  # (as TF's moments)
    value = _tensor(x)
    y = cast(x, np.float32) if value.dtype == np.float16 else x
    mean = reduce_mean(y, axis=axes, keepdims=True)
    variance = reduce_mean(square(subtract(y, stop_gradient(mean))), axis=axes, keepdims=True)
    if not keepdims:
        mean, variance = squeeze(mean, axis=axes), squeeze(variance, axis=axes)
    if value.dtype == np.float16:
        mean, variance = cast(mean, np.float16), cast(variance, np.float16)
    return mean, variance
