"""Keras 3's ``BatchNormalization`` and ``LayerNormalization`` with explicit backward passes.

Training normalizes with the batch's mean and (biased) variance over every axis but ``axis`` and moves the moving
statistics toward them; inference uses the moving statistics. The arithmetic is TF's ``tf.nn.moments`` and
``tf.nn.batch_normalization`` (``x * inv + (beta - mean * inv)`` with ``inv = rsqrt(variance + epsilon) * gamma``),
and the backward pass follows TF's gradients of those ops. Under a strategy each replica normalizes with its own
batch and assigns its own copy of the moving statistics (Keras 3 makes them ON_WRITE variables with aggregation
NONE, so the copies differ; the first replica's is what is read and saved), as on TF. ``LayerNormalization``
normalizes each example on its own (no moving statistics), so replicas need nothing from each other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...distribute.mirror_check import allow_differing_copies
from ..autodiff import unbroadcast
from .._kernels.summation import tf_sum
from . import initializers, regularizers
from .layers import BuiltinLayer
from .saving.serialization import serialize_keras_object

__all__ = ["BatchNormalization", "LayerNormalization"]


class BatchNormalization(BuiltinLayer):
    """Normalizes each feature along ``axis`` (the last by default)."""

    _fixed_arguments = {"beta_regularizer": (None,), "gamma_regularizer": (None,), "beta_constraint": (None,),
                        "gamma_constraint": (None,), "renorm": (False,), "renorm_clipping": (None,),
                        "renorm_momentum": (0.99,)}

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
        self._initializers = {name: initializers.get(value) for name, value in (
            ("gamma", gamma_initializer), ("beta", beta_initializer), ("moving_mean", moving_mean_initializer),
            ("moving_variance", moving_variance_initializer))}

    def get_config(self) -> dict[str, Any]:
        initializer = {f"{name}_initializer": serialize_keras_object(self._initializers[name])
                       for name in ("beta", "gamma", "moving_mean", "moving_variance")}
        return {**super().get_config(), "axis": self.axis, "momentum": self.momentum, "epsilon": self.epsilon,
                "center": self.center, "scale": self.scale, **initializer, "beta_regularizer": None,
                "gamma_regularizer": None, "beta_constraint": None, "gamma_constraint": None, "synchronized": False,
                "renorm": False, "renorm_clipping": None, "renorm_momentum": 0.99}

    def build(self, input_shape: tuple) -> None:
        features = (int(input_shape[self.axis]),)  # Keras' IndexError for an axis the input does not have
        if self.scale:
            self.gamma = self.add_weight(features, self._initializers["gamma"], name="gamma")
        if self.center:
            self.beta = self.add_weight(features, self._initializers["beta"], name="beta")
        # per replica on purpose, as in TF: the check of mirrored copies skips them
        self.moving_mean = allow_differing_copies(self.add_weight(
            features, self._initializers["moving_mean"], trainable=False, name="moving_mean"))
        self.moving_variance = allow_differing_copies(self.add_weight(
            features, self._initializers["moving_variance"], trainable=False, name="moving_variance"))

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
                mean = tf_sum(x, axis=axes, keepdims=True) / count
                centered = x - mean
                variance = tf_sum(centered * centered, axis=axes, keepdims=True) / count
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

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
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


class LayerNormalization(BuiltinLayer):
    """Normalizes each example over ``axis`` (an int or a list of ints; the last by default), then scales by
    ``gamma`` and shifts by ``beta`` (weights shaped as the input along ``axis``).

    Keras 3's arithmetic on TF (``ops.layer_normalization``): ``tf.nn.moments``, ``inv = rsqrt(variance + epsilon) *
    gamma`` and ``x * inv + (beta - mean * inv)``, computed in float64 for float64 inputs and float32 for the others
    (its autocast is off), then cast back to the input's dtype and to the layer's (so integer inputs give truncated
    values and no gradient, as in Keras). The backward pass follows TF's gradients of those ops, summed in the order
    TF's tape sums them. On 8 or more normalized groups TF's CPU kernel switches to a vectorised ``rsqrt`` that can
    differ from the correctly rounded one in the last bit (cancellation in the output can magnify it)."""

    _fixed_arguments = {"rms_scaling": (False,), "beta_constraint": (None,), "gamma_constraint": (None,)}

    def __init__(self, axis: int | list | tuple = -1, epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", beta_regularizer: Any = None,
                 gamma_regularizer: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(axis, (list, tuple)):
            self.axis: int | list[int] = list(axis)
        elif isinstance(axis, int):
            self.axis = axis
        else:
            raise TypeError(f"Expected an int or a list/tuple of ints for the argument 'axis', but received: {axis!r}")
        self.epsilon, self.center, self.scale = float(epsilon), center, scale
        self._initializers = {"gamma": initializers.get(gamma_initializer), "beta": initializers.get(beta_initializer)}
        self._weight_regularizers = {"gamma": regularizers.get(gamma_regularizer),
                                     "beta": regularizers.get(beta_regularizer)}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "axis": self.axis, "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale, "rms_scaling": False,
                "beta_initializer": serialize_keras_object(self._initializers["beta"]),
                "gamma_initializer": serialize_keras_object(self._initializers["gamma"]),
                "beta_regularizer": serialize_keras_object(self._weight_regularizers["beta"]),
                "gamma_regularizer": serialize_keras_object(self._weight_regularizers["gamma"]),
                "beta_constraint": None, "gamma_constraint": None}

    def build(self, input_shape: tuple) -> None:
        """``gamma`` then ``beta``, shaped as the input along the (sorted) axes (Keras' IndexError for an axis the
        input does not have)."""
        self.axis = sorted(self.axis) if isinstance(self.axis, list) else [self.axis]
        shape = tuple(int(input_shape[a]) for a in self.axis)
        for name, wanted in (("gamma", self.scale), ("beta", self.center)):
            setattr(self, name, self.add_weight(shape, self._initializers[name],
                                                regularizer=self._weight_regularizers[name], name=name)
                    if wanted else None)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        for axis in self.axis if isinstance(self.axis, list) else [self.axis]:
            if axis >= len(input_shape) or axis < -len(input_shape):
                raise ValueError(f"Axis {axis} is out of bounds for input shape {tuple(input_shape)}. Received: "
                                 f"axis={self.axis}")
        return input_shape

    def _convert_input(self, x: Any) -> Any:
        """No autocast: the input's dtype decides the computation's."""
        return x

    def _output_dtype(self, input_dtype: np.dtype) -> np.dtype:
        return self.dtype

    def _weight_shape(self, shape: tuple) -> tuple:
        """The shape the weights take to broadcast against an input of ``shape``: its sizes along the axes, else 1."""
        target = [1] * len(shape)
        for a in self.axis:
            target[a] = shape[a]
        return tuple(target)

    def _broadcast(self, v: Any, shape: tuple) -> Any:
        """A weight reshaped to broadcast along the axes (as Keras reshapes it, element order kept)."""
        return v.reshape(self._weight_shape(shape))

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        compute = np.dtype(np.float64 if x.dtype == np.float64 else np.float32)  # Keras' result_type(x, float32)
        xc, t = x.astype(compute, copy=False), compute.type
        axes = tuple(a % x.ndim for a in self.axis)
        count = t(np.prod([x.shape[a] for a in axes]))
        mean = tf_sum(xc, axis=axes, keepdims=True) / count
        centered = xc - mean
        variance = tf_sum(centered * centered, axis=axes, keepdims=True) / count
        root = t(1) / np.sqrt(variance + t(self.epsilon))  # TF's rsqrt
        gamma = self._broadcast(self.gamma._read().astype(compute, copy=False), x.shape) if self.scale else None
        inv = root * gamma if self.scale else root
        shift = -mean * inv
        if self.center:
            shift = shift + self._broadcast(self.beta._read().astype(compute, copy=False), x.shape)
        out = (xc * inv + shift).astype(x.dtype, copy=False).astype(self.dtype, copy=False)
        return out, (xc, x.dtype, mean, centered, count, root, gamma, inv, shift.shape)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        xc, dtype, mean, centered, count, root, gamma, inv, shift_shape = cache
        if dtype.kind != "f":  # the cast back to integers stops every gradient
            return None, []
        dy, t = dy.astype(dtype, copy=False).astype(xc.dtype, copy=False), xc.dtype.type
        d_shift = unbroadcast(dy, shift_shape)  # shift = -mean * inv (+ beta)
        d_product = unbroadcast(d_shift, np.broadcast_shapes(mean.shape, inv.shape))
        d_inv = unbroadcast(dy * xc, inv.shape) + unbroadcast(-mean * d_product, inv.shape)
        d_mean = -unbroadcast(d_product * inv, mean.shape)
        grads = []
        if self.scale:  # inv = root * gamma
            grads.append(self._weight_gradient(unbroadcast(root * d_inv, gamma.shape), self.gamma))
            d_root = unbroadcast(d_inv * gamma, root.shape)
        else:
            d_root = d_inv
        if self.center:
            grads.append(self._weight_gradient(unbroadcast(d_shift, self._weight_shape(xc.shape)), self.beta))
        d_variance = t(-0.5) * (d_root * root) * (root * root)  # TF's rsqrt gradient
        dx = dy * inv + d_mean / count + (t(2) * (d_variance / count)) * centered
        return dx.astype(dtype, copy=False), grads

    @staticmethod
    def _weight_gradient(grad: Any, weight: Any) -> Any:
        """A gradient in the broadcast shape as the weight's shape and dtype (the gradient of Keras' cast)."""
        return grad.reshape(weight.shape).astype(weight.dtype, copy=False)
