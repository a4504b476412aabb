"""Keras 3's ``Rescaling`` layer: ``inputs * scale + offset`` in the layer's float dtype (e.g. uint8 images to
[0, 1] with ``scale=1/255``); it holds no weights."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autodiff import unbroadcast
from .layers import BuiltinLayer
from .saving.serialization import serialize_keras_object

__all__ = ["Rescaling"]


class Rescaling(BuiltinLayer):
    """``cast(inputs) * scale + offset``; ``scale`` and ``offset`` are numbers or arrays that broadcast against the
    input (per channel along the last axis)."""

    def __init__(self, scale: Any, offset: Any = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale, self.offset = scale, offset

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "scale": serialize_keras_object(self.scale),
                "offset": serialize_keras_object(self.offset)}

    def _convert_input(self, x: Any) -> Any:
        """Keras' Rescaling casts any input (integers, booleans, other floats) to its dtype."""
        return x.astype(self.dtype) if x.dtype != self.dtype else x

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        scale = np.asarray(self.scale, self.dtype)
        return x * scale + np.asarray(self.offset, self.dtype), (x.shape, scale)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        shape, scale = cache
        return unbroadcast(dy * scale, shape), []
