"""Keras' ``Lambda`` layer: a function of the inputs as a layer (in a Sequential or functional model). The function
composes mirrorlab's tensor functions, so a recording tape differentiates through it; it holds no weights."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .layers import Layer

__all__ = ["Lambda"]


class Lambda(Layer):
    """``function(inputs, **arguments)`` (with ``training`` when the function takes it)."""

    _names_sublayers = False

    def __init__(self, function: Callable[..., Any], output_shape: Any = None, mask: Any = None,
                 arguments: dict | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not callable(function):
            raise TypeError(f"Lambda expects a callable function. Received: function={function!r}\nFix: pass a "
                            "function of the inputs, e.g. Lambda(lambda x: x * 2).")
        self.function, self.arguments = function, dict(arguments or {})
        self._output_shape = output_shape
        self._takes_training = "training" in inspect.signature(function).parameters

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """``output_shape`` (per example, the batch dimension added; or a function of the input shape) when given,
        else found by a call on zeros."""
        if self._output_shape is None:
            return super().compute_output_shape(input_shape)
        if callable(self._output_shape):
            return tuple(self._output_shape(input_shape))
        return (input_shape[0], *self._output_shape)

    def call(self, inputs: Any, training: Any = None) -> Any:
        kwargs = dict(self.arguments)
        if self._takes_training:
            kwargs["training"] = training
        return self.function(inputs, **kwargs)
