"""Activations with their backward passes (gradient of the output w.r.t. the pre-activation)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["get", "Activation"]


class Activation:
    """``forward(z) -> a`` and ``backward(z, a, da) -> dz``."""

    def __init__(self, name: str, forward: Callable[[Any], Any], backward: Callable[[Any, Any, Any], Any]) -> None:
        self.name = name
        self.forward = forward
        self.backward = backward

    def __call__(self, z: Any) -> Any:
        return self.forward(z)


def _softmax(z: Any) -> Any:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sigmoid(z: Any) -> Any:
    return 0.5 * (np.tanh(0.5 * z) + 1.0)


_ACTIVATIONS = {
    "linear": Activation("linear", lambda z: z, lambda z, a, da: da),
    "relu": Activation("relu", lambda z: np.maximum(z, 0), lambda z, a, da: da * (z > 0)),
    "sigmoid": Activation("sigmoid", _sigmoid, lambda z, a, da: da * a * (1 - a)),
    "tanh": Activation("tanh", np.tanh, lambda z, a, da: da * (1 - a * a)),
    "softmax": Activation("softmax", _softmax,
                          lambda z, a, da: a * (da - (da * a).sum(axis=-1, keepdims=True))),
}


def get(identifier: str | Activation | None) -> Activation:
    """An activation by name (None means linear)."""
    if identifier is None:
        return _ACTIVATIONS["linear"]
    if isinstance(identifier, Activation):
        return identifier
    if identifier not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation function: '{identifier}'. Known: {sorted(_ACTIVATIONS)}.")
    return _ACTIVATIONS[identifier]
