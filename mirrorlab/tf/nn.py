"""``mirrorlab.nn``: the loss scaling helpers of ``tf.nn`` that distributed training needs, its activations, softmax,
cross-entropies and ``l2_loss`` (from ``nn_ops``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import errors
from .array_ops import relu, sigmoid, tanh
from .autodiff import track, unbroadcast, untracked
from .composed_activations import gelu
from ..distribute import context
from ..distribute.batch_safe import stacked_replicas
from .nn_ops import (bias_add, elu, l2_loss, leaky_relu, log_softmax, moments, relu6, selu,
                     sigmoid_cross_entropy_with_logits, silu, softmax, softmax_cross_entropy_with_logits, softplus, softsign,
                     sparse_softmax_cross_entropy_with_logits, swish)
from ._kernels.summation import tf_sum, tf_sum_rows
from ..tensor import as_tensor, asarray, like, to_host

__all__ = ["compute_average_loss", "scale_regularization_loss", "relu", "sigmoid", "tanh", "softmax", "log_softmax",
           "sparse_softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits",
           "sigmoid_cross_entropy_with_logits", "l2_loss", "relu6", "leaky_relu", "elu", "selu", "softplus", "softsign",
           "silu", "swish", "gelu", "bias_add", "moments"]


def broadcasting(op: Callable[[Any, Any], Any], name: str, a: Any, b: Any, fix: str) -> Any:
    """``op(a, b)`` with TF's error for shapes that do not broadcast (``Incompatible shapes: [3] vs. [2]``)."""
    try:
        return op(a, b)
    except ValueError:
        shapes = " vs. ".join("[" + ",".join(map(str, x.shape)) + "]" for x in (a, b))
        raise errors.InvalidArgumentError(f"Incompatible shapes: {shapes} [Op:{name}]\nFix: {fix}") from None


def _weighted(losses: Any, weights: Any) -> tuple[Any, Any]:
    """``losses * weights`` and the weights after TF's rank fix-up: a scalar weight broadcasts; weights one rank
    above the losses lose their last dimension (which must be 1), weights one rank below gain one. As TF, both
    are multiplied in float32 and the product cast back to the losses' dtype (integer losses truncate)."""
    weights = weights.astype(np.float32)
    if weights.ndim == losses.ndim + 1:
        if weights.shape[-1] != 1:
            raise errors.InvalidArgumentError(
                f"Can not squeeze dim[{weights.ndim - 1}], expected a dimension of 1, got {weights.shape[-1]} "
                "[Op:Squeeze]\nFix: give sample_weight one weight per example.")
        weights = weights[..., 0]
    elif weights.ndim and weights.ndim == losses.ndim - 1:
        weights = weights[..., None]
    product = broadcasting(np.multiply, "Mul", losses.astype(np.float32), weights,
                           "give sample_weight one weight per example (or a scalar).")
    return product.astype(losses.dtype), weights


def compute_average_loss(per_example_loss: Any, sample_weight: Any = None, global_batch_size: int | None = None) -> Any:
    """``sum(per_example_loss * sample_weight) / global_batch_size`` (TF's ``tf.nn.compute_average_loss``).

    Call it in a replica function. Without ``global_batch_size`` it assumes every replica has this
    replica's batch size (wrong on uneven last batches: pass the global batch size, or all-reduce counts).
    Differentiable on a recording ``GradientTape``."""
    per_example = as_tensor(untracked(per_example_loss))
    stacked = stacked_replicas() is not None  # (in a @batch_safe function run stacked: each replica's own sum)
    if per_example.ndim == int(stacked):  # (rank 0 for one replica)
        one = to_host(per_example[0] if stacked else per_example).item()
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor with at least rank 1. "
                         f"Received per_example_loss={one!r} with rank 0")
    losses, weights = per_example, None
    if sample_weight is not None:
        if stacked:
            raise NotImplementedError("compute_average_loss with sample_weight cannot run in a @batch_safe function "
                                      "run stacked.\nFix: multiply the per-example losses by the weights first, or "
                                      "remove @batch_safe.")
        losses, weights = _weighted(per_example, like(as_tensor(untracked(sample_weight)), per_example))
    if global_batch_size is None:
        if context.in_cross_replica_context():
            raise RuntimeError("You are calling `compute_average_loss` in cross replica context, while it was "
                               "expected to be called in replica context.")
        global_batch_size = losses.shape[stacked] * context.get_strategy().num_replicas_in_sync
    size = np.asarray(to_host(as_tensor(global_batch_size)))
    if size.ndim != 0:
        raise ValueError(f"global_batch_size must be scalar..  Expected scalar shape, saw shape: {size.shape}.")
    if size.dtype.kind not in "iu":
        raise TypeError("global_batch_size must be an integer..  Expected \"x\" to be integer type.  Found: tensor "
                        f"of dtype <dtype: '{size.dtype.name}'>")
    if size < 0:
        raise errors.InvalidArgumentError(f"global_batch_size must be non-negative..  \nCondition x >= 0 did not hold "
                                          f"element-wise:\nx (shape=() dtype={size.dtype.name}) = \n{int(size)}\n"
                                          "Fix: pass the number of examples in the global batch.")
    dtype = losses.dtype if np.dtype(losses.dtype).kind in "fc" else np.dtype(np.float64)
    # TF divides with div_no_nan: a global batch of 0 (every replica empty) gives 0, not NaN.
    scale = (lambda v: v / dtype.type(size)) if size else (lambda v: v * dtype.type(0))

    def backward(g: Any) -> list[tuple[Any, Any]]:
        scaled = scale(g)
        upstream = np.broadcast_to(np.reshape(scaled, np.shape(scaled) + (1,) * (losses.ndim - 1)) if stacked
                                   else scaled, losses.shape)
        if weights is not None:
            upstream = (upstream.astype(np.float32) * weights).astype(upstream.dtype)
        return [(per_example_loss, unbroadcast(upstream, per_example.shape))]
    values = asarray(losses, dtype)
    total = tf_sum_rows(values.reshape(len(values), -1)) if stacked else tf_sum(values)
    return track(asarray(scale(total), dtype), backward, (per_example_loss,))


def scale_regularization_loss(regularization_loss: Any) -> Any:
    """``sum(regularization_loss) / num_replicas_in_sync`` (TF's ``tf.nn.scale_regularization_loss``): each replica
    adds its share, so the sum over replicas counts the regularization once. Call it in a replica function."""
    if context.has_strategy() and context.in_cross_replica_context():
        raise RuntimeError("You are calling `scale_regularization_loss` in cross replica context, while it was "
                           "expected to be called in replica context.")
    parts = list(regularization_loss) if isinstance(regularization_loss, (list, tuple)) else [regularization_loss]
    values = [as_tensor(untracked(v)) for v in parts]
    total = as_tensor(values[0]) if not isinstance(regularization_loss, (list, tuple)) else \
        np.stack([to_host(v) for v in values])
    total = tf_sum(total)
    replicas = context.get_strategy().num_replicas_in_sync
    dtype = total.dtype if np.dtype(total.dtype).kind in "fc" else np.dtype(np.float64)

    def backward(g: Any) -> list[tuple[Any, Any]]:
        share = g / dtype.type(replicas)
        return [(part, np.broadcast_to(share, np.shape(value)) + value.dtype.type(0)) for part, value in zip(parts, values)]
    return track(asarray(total / dtype.type(replicas), dtype), backward, parts)
