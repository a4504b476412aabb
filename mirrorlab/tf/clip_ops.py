"""``tf.clip_by_norm``, ``tf.clip_by_global_norm`` and ``tf.linalg.global_norm``, composed of the differentiable
tensor functions in TF's order of operations, so values, NaN behaviour and gradients are TF's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import errors
from .array_ops import (add, divide, greater, identity, maximum, minimum, multiply, ones_like, reduce_sum, sqrt,
                        stack, stop_gradient, subtract, where)
from .autodiff import untracked
from ..distribute.kernel_dtypes import tf_dtype
from .nn_ops import l2_loss
from ..tensor import IndexedSlices
from .tensor_conversion import convert_to_tensor

__all__ = ["clip_by_norm", "clip_by_global_norm", "global_norm"]


def _dense(t: Any) -> Any:
    """The values of ``t`` as a tensor (an ``IndexedSlices``' values)."""
    return convert_to_tensor(t.values if isinstance(t, IndexedSlices) else t)


def _like(t: Any, values: Any) -> Any:
    """``values`` in ``t``'s form: ``IndexedSlices`` at ``t``'s indices, else as they are."""
    return IndexedSlices(values, t.indices, t.dense_shape) if isinstance(t, IndexedSlices) else values


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Any:
    """``t * clip_norm / max(l2norm(t), clip_norm)``: ``t`` scaled down to an L2 norm (over ``axes``, all by
    default) of at most ``clip_norm`` (negative: zero); a zero norm passes ``t`` unchanged with finite gradients."""
    values = _dense(t)
    clip_norm = maximum(clip_norm, 0)  # a negative norm clips to zero, as TF's
    l2sum = reduce_sum(multiply(values, values), axes, keepdims=True)
    positive = greater(l2sum, 0)
    l2norm = where(positive, sqrt(where(positive, l2sum, ones_like(l2sum))), l2sum)  # no NaN gradient at 0
    intermediate = multiply(values, clip_norm)
    if np.shape(untracked(intermediate)) != np.shape(untracked(values)):
        raise ValueError(f"Shapes {np.shape(untracked(values))} and {np.shape(untracked(intermediate))} are "
                         "incompatible\nFix: give clip_norm a shape that broadcasts to the tensor's (or a scalar).")
    return _like(t, identity(divide(intermediate, maximum(l2norm, clip_norm))))


def _tensor_list(t_list: Any) -> list[Any]:
    """``t_list`` (a sequence of tensors, IndexedSlices or None) with TF's error for anything else."""
    if not isinstance(t_list, Sequence) or isinstance(t_list, (str, bytes)):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}.\nFix: pass a list of "
                        "tensors (a single tensor in a list).")
    return list(t_list)


def global_norm(t_list: Any, name: str | None = None) -> Any:
    """``sqrt(sum of every element squared)`` over the tensors in ``t_list`` (None entries skipped), as TF computes
    it: twice the sum of their ``l2_loss``."""
    halves = [l2_loss(_dense(t)) for t in _tensor_list(t_list) if t is not None]
    for k, half in enumerate(halves[1:], start=1):
        if half.dtype != halves[0].dtype:
            raise errors.InvalidArgumentError(
                f"cannot compute Pack as input #{k}(zero-based) was expected to be a {tf_dtype(halves[0])} tensor but "
                f"is a {tf_dtype(half)} tensor [Op:Pack] name: stack\nFix: give every tensor one float dtype.")
    total = reduce_sum(stack(halves))
    return sqrt(multiply(total, np.asarray(2, total.dtype)))


def clip_by_global_norm(t_list: Any, clip_norm: Any, use_norm: Any = None,
                        name: str | None = None) -> tuple[list[Any], Any]:
    """The tensors of ``t_list`` scaled by ``clip_norm / max(global_norm, clip_norm)``, and the global norm (or
    ``use_norm``). An infinite or NaN norm makes every clipped value NaN, as in TF."""
    t_list = _tensor_list(t_list)
    norm = global_norm(t_list) if use_norm is None else convert_to_tensor(use_norm)
    dtype = untracked(norm).dtype
    one, clip = np.asarray(1, dtype), convert_to_tensor(clip_norm, dtype)
    scale = multiply(minimum(divide(one, norm), divide(one, clip)), clip)
    # NaN for an infinite or NaN norm; no gradient, as TF's g - g through it is exactly 0
    scale = add(scale, stop_gradient(subtract(norm, norm)))
    clipped = [None if t is None else _like(t, identity(multiply(_dense(t), scale))) for t in t_list]
    return clipped, norm
