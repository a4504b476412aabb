"""Keras 3's ``BatchNormalization`` with an explicit backward pass.

Training normalizes with the batch's mean and (biased) variance over every axis but ``axis`` and moves the moving
statistics toward them; inference uses the moving statistics. The arithmetic is TF's ``tf.nn.moments`` and
``tf.nn.batch_normalization`` (``x * inv + (beta - mean * inv)`` with ``inv = rsqrt(variance + epsilon) * gamma``),
and the backward pass follows TF's gradients of those ops. Under a strategy each replica normalizes with its own
batch and assigns its own copy of the moving statistics (Keras 3 makes them ON_WRITE variables with aggregation
NONE, so the copies differ; the first replica's is what is read and saved), as on TF.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .layers import BuiltinLayer

__all__ = ["BatchNormalization"]


class BatchNormalization(BuiltinLayer):
    """Normalizes each feature along ``axis`` (the last by default)."""

    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True,
                 scale: bool = True, beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 moving_mean_initializer: Any = "zeros", moving_variance_initializer: Any = "ones",
                 synchronized: bool = False, **kwargs: Any) -> None:
        if synchronized:
            raise ValueError("BatchNormalization(synchronized=True) (statistics all-reduced across replicas) is not "
                             "built in mirrorlab.\nFix: use synchronized=False (each replica normalizes its own "
                             "batch, Keras' default).")
        super().__init__(**kwargs)
        self.axis, self.momentum, self.epsilon = int(axis), float(momentum), float(epsilon)
        self.center, self.scale = center, scale
        self._initializers = {"gamma": gamma_initializer, "beta": beta_initializer,
                              "moving_mean": moving_mean_initializer,
                              "moving_variance": moving_variance_initializer}

    def build(self, input_shape: tuple) -> None:
        features = (int(input_shape[self.axis]),)  # Keras' IndexError for an axis the input does not have
        if self.scale:
            self.gamma = self.add_weight(features, self._initializers["gamma"], name="gamma")
        if self.center:
            self.beta = self.add_weight(features, self._initializers["beta"], name="beta")
        self.moving_mean = self.add_weight(features, self._initializers["moving_mean"], trainable=False,
                                           name="moving_mean")
        self.moving_variance = self.add_weight(features, self._initializers["moving_variance"], trainable=False,
                                               name="moving_variance")

    def _axes(self, ndim: int) -> tuple[int, ...]:
        return tuple(a for a in range(ndim) if a != self.axis % ndim)

    def _broadcast(self, v: Any, ndim: int) -> Any:
        """A per-feature vector shaped to broadcast along ``axis``."""
        shape = [1] * ndim
        shape[self.axis % ndim] = v.shape[0]
        return v.reshape(shape)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        axes, t = self._axes(x.ndim), x.dtype.type
        centered = count = None  # the batch statistics' terms, which the backward pass differentiates
        if training:
            count = t(np.prod([x.shape[a] for a in axes]))
            with np.errstate(invalid="ignore"):  # an empty replica batch: NaN statistics (TF's fit hangs there)
                mean = x.sum(axis=axes, keepdims=True, dtype=x.dtype) / count
                centered = x - mean
                variance = (centered * centered).sum(axis=axes, keepdims=True, dtype=x.dtype) / count
            momentum = t(self.momentum)
            for var, batch in ((self.moving_mean, mean), (self.moving_variance, variance)):
                var.assign(var._read() * momentum + batch.reshape(-1) * t(1.0 - self.momentum))
        else:
            mean = self._broadcast(self.moving_mean._read(), x.ndim)
            variance = self._broadcast(self.moving_variance._read(), x.ndim)
        root = t(1) / np.sqrt(variance + t(self.epsilon))  # TF's rsqrt
        inv = root * self._broadcast(self.gamma._read(), x.ndim) if self.scale else root
        shift = self._broadcast(self.beta._read(), x.ndim) - mean * inv if self.center else -mean * inv
        return x * inv + shift, (x, mean, root, inv, centered, count)

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        x, mean, root, inv, centered, count = cache
        axes, t = self._axes(x.ndim), x.dtype.type
        dy_sum = dy.sum(axis=axes, keepdims=True)
        d_inv = (dy * x).sum(axis=axes, keepdims=True) + (-dy_sum) * mean
        grads = []
        if self.scale:
            grads.append((d_inv * root).reshape(-1))
            d_root = d_inv * self._broadcast(self.gamma._read(), x.ndim)
        else:
            d_root = d_inv
        if self.center:
            grads.append(dy_sum.reshape(-1))
        dx = dy * inv
        if centered is not None:  # normalized with the batch's own statistics
            d_variance = d_root * (root * root * root) * t(-0.5)
            d_mean = -dy_sum * inv
            dx = dx + (t(2) * (d_variance / count)) * centered + d_mean / count
        return dx, grads
