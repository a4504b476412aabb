"""Layers with explicit forward and backward passes.

``_forward(x, training)`` returns the output and a cache; ``_backward(cache, dy)`` returns the input
gradient and the weight gradients. Caches travel with the call, never on the layer, so replicas that
run the same layer in turn cannot overwrite each other's state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..distribute.variables import Variable
from . import activations, initializers

__all__ = ["Layer", "Dense", "Flatten", "InputLayer"]


class Layer:
    """Base layer: weights are mirrorlab Variables created by ``build`` (in the active strategy scope)."""

    _count = 0

    def __init__(self, name: str | None = None, input_shape: tuple | None = None, input_dim: int | None = None,
                 dtype: Any = "float32") -> None:
        Layer._count += 1
        self.name = name or f"{type(self).__name__.lower()}_{Layer._count}"
        self.dtype = np.dtype(dtype)
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.built = False
        self._weights: dict[str, Variable] = {}

    def build(self, input_shape: tuple) -> None:
        self.built = True

    def add_weight(self, name: str, shape: tuple, initializer: Any, trainable: bool = True) -> Variable:
        value = initializers.get(initializer)(tuple(shape), self.dtype)
        var = Variable(value, name=f"{self.name}/{name}", trainable=trainable)
        self._weights[name] = var
        return var

    @property
    def weights(self) -> list[Variable]:
        return list(self._weights.values())

    @property
    def trainable_weights(self) -> list[Variable]:
        return [w for w in self._weights.values() if w.trainable]

    def _checkpoint_children(self) -> dict[str, Any]:
        return dict(self._weights)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return input_shape

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        raise NotImplementedError

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        raise NotImplementedError

    def __call__(self, x: Any, training: bool = False) -> Any:
        x = np.asarray(x)
        if not self.built:
            self.build(x.shape)
        return self._forward(x, training)[0]


class InputLayer(Layer):
    """Declares the input shape; passes data through."""

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x, None

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        return dy, []


class Dense(Layer):
    """``activation(x @ kernel + bias)``."""

    def __init__(self, units: int, activation: Any = None, use_bias: bool = True,
                 kernel_initializer: Any = "glorot_uniform", bias_initializer: Any = "zeros", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if int(units) <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive integer. Received: "
                             f"units={units}")
        self.units = int(units)
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def build(self, input_shape: tuple) -> None:
        self.kernel = self.add_weight("kernel", (int(input_shape[-1]), self.units), self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.units,), self.bias_initializer) if self.use_bias else None
        self.built = True

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (*input_shape[:-1], self.units)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        z = x @ self.kernel.value()
        if self.bias is not None:
            z = z + self.bias.value()
        a = self.activation.forward(z)
        return a, (x, z, a)

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        x, z, a = cache
        dz = self.activation.backward(z, a, dy)
        kernel = self.kernel.value()
        x2, dz2 = x.reshape(-1, x.shape[-1]), dz.reshape(-1, dz.shape[-1])
        grads = [(x2.T @ dz2).astype(self.dtype, copy=False)]
        if self.bias is not None:
            grads.append(dz2.sum(axis=0).astype(self.dtype, copy=False))
        return dz @ kernel.T, grads


class Flatten(Layer):
    """Collapse all but the batch dimension."""

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], int(np.prod(input_shape[1:])))

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x.reshape(x.shape[0], -1), x.shape

    def _backward(self, cache: Any, dy: Any) -> tuple[Any, list[Any]]:
        return dy.reshape(cache), []
