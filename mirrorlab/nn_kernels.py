"""The arithmetic of TF's softmax and cross-entropy kernels on NumPy/CuPy arrays, rounded as TF 2.21's CPU kernels
round it element by element: ``exp`` and ``log`` correctly rounded (computed in float64 for narrower floats, as
glibc's ``expf``/``logf`` give TF but for rare last-bit misroundings of ``logf``), their results below the smallest
normal float flushed to zero (TF runs with flush-to-zero), sums in order, for ``nn_ops`` (``tf.nn``).

TF's Eigen kernels switch to a vectorised ``exp`` on 8 or more values in a row; those results can differ from these
in the last bit or two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .tensor import array_module

__all__ = ["exp", "log", "log1p", "softmax", "log_softmax", "log_sum_exp", "xent_probabilities", "sigmoid_xent"]


def _rounded(fn: Callable[[Any], Any], x: Any) -> Any:
    """``fn(x)`` computed in float64 for narrower floats, rounded back to ``x``'s dtype, subnormal results flushed to
    (signed) zero as TF's flush-to-zero mode does."""
    wide = x.astype(np.float64) if x.dtype.itemsize < 8 else x
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = array_module(x).asarray(fn(wide)).astype(x.dtype, copy=False)
    tiny = np.finfo(x.dtype).tiny
    return array_module(x).where(abs(result) < tiny, result * 0, result)


def exp(x: Any) -> Any:
    """``e ** x`` as TF's element-wise kernels give it."""
    return _rounded(array_module(x).exp, x)


def log(x: Any) -> Any:
    """The natural logarithm as TF's element-wise kernels give it."""
    return _rounded(array_module(x).log, x)


def log1p(x: Any) -> Any:
    """``log(1 + x)`` as TF's element-wise kernels give it: the C library's, in ``x``'s dtype (NumPy calls the same
    ``log1pf``, which is not correctly rounded)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return array_module(x).log1p(x)


def _shifted(x: Any, axis: int) -> Any:
    """``x - max(x)`` along ``axis`` (``x`` itself when that axis is empty)."""
    if not x.shape[axis]:
        return x
    return x - x.max(axis=axis, keepdims=True)


def softmax(x: Any, axis: int = -1) -> Any:
    """TF's Softmax kernel: ``exp(x - max)`` times the reciprocal of its sum along ``axis``."""
    e = exp(_shifted(x, axis))
    return e * (x.dtype.type(1) / e.sum(axis=axis, keepdims=True, dtype=x.dtype))


def log_softmax(x: Any, axis: int = -1) -> Any:
    """TF's LogSoftmax kernel: ``(x - max) - log(sum(exp(x - max)))`` along ``axis``."""
    shifted, log_norm = log_sum_exp(x, axis)
    return shifted - log_norm


def log_sum_exp(x: Any, axis: int) -> tuple[Any, Any]:
    """``x - max(x)`` along ``axis`` and the log of the sum of its exponentials (kept dimension): the terms of TF's
    softmax cross-entropy kernels (the loss is ``log_norm - shifted`` at the label)."""
    shifted = _shifted(x, axis)
    return shifted, log(exp(shifted).sum(axis=axis, keepdims=True, dtype=x.dtype))


def xent_probabilities(x: Any, axis: int) -> Any:
    """The softmax TF's cross-entropy kernels differentiate with: ``exp(x - max) / sum(exp(x - max))`` (a quotient,
    where the Softmax kernel multiplies by the reciprocal)."""
    e = exp(_shifted(x, axis))
    return e / e.sum(axis=axis, keepdims=True, dtype=x.dtype)


def sigmoid_xent(labels: Any, logits: Any) -> Any:
    """TF's ``sigmoid_cross_entropy_with_logits``: ``max(x, 0) - x * z + log1p(exp(-|x|))``, as TF composes it."""
    xp = array_module(logits)
    positive = logits >= 0
    relu = xp.where(positive, logits, logits.dtype.type(0))
    return (relu - logits * labels) + log1p(exp(xp.where(positive, -logits, logits)))
