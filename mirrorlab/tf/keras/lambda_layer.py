"""Keras' ``Lambda`` layer: a function of the inputs as a layer (in a Sequential or functional model). The function
composes mirrorlab's tensor functions, so a recording tape differentiates through it; it holds no weights."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .layers import Layer
from .saving.serialization import deserialize_keras_object, serialize_keras_object

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

    def get_config(self) -> dict[str, Any]:
        """Keras' config: a named function by name; a Python lambda as Keras' ``__lambda__`` entry without its
        code (mirrorlab never saves or loads code), which loading refuses with the fix."""
        config: dict[str, Any] = {"function": _function_entry(self.function)}
        if self._output_shape is not None:
            config["output_shape"] = _function_entry(self._output_shape) if callable(self._output_shape) \
                else list(self._output_shape)
        config["arguments"] = serialize_keras_object(self.arguments)
        return {**super().get_config(), **config}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Lambda":
        config = dict(config)
        for key in ("function", "output_shape"):
            if isinstance(config.get(key), dict):
                if config[key].get("class_name") == "__lambda__":
                    raise ValueError(f"Requested the deserialization of a `Lambda` layer ('{config.get('name')}') "
                                     "whose `{key}` is a Python lambda. mirrorlab never saves or runs code from a "
                                     "file, in any safe_mode.\nFix: make it a named function decorated with "
                                     "@keras.saving.register_keras_serializable() (or pass it in custom_objects) "
                                     "before saving the model.".replace("{key}", key))
                config[key] = deserialize_keras_object(config[key])
        return cls(**config)

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


def _function_entry(fn: Callable[..., Any]) -> dict[str, Any]:
    """A function's config entry: by name, or Keras' ``__lambda__`` marker (its code left out) for a lambda."""
    if getattr(fn, "__name__", "") == "<lambda>":
        return {"class_name": "__lambda__", "config": {"code": None, "defaults": None, "closure": None}}
    return serialize_keras_object(fn)
