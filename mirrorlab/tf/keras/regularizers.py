"""Weight regularizers (``L1``, ``L2``, ``L1L2``): a penalty of a weight and its gradient, as Keras 3's."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels.summation import tf_sum
from ...tensor import array_module
from .registry import resolve
from .saving.serialization import deserialize_keras_object, serialize_keras_object

__all__ = ["Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get", "serialize", "deserialize"]


class Regularizer:
    """``penalty(w) = l1 * sum(|w|) + l2 * sum(w ** 2)`` in the weight's dtype."""

    def __init__(self, l1: float = 0.0, l2: float = 0.0) -> None:
        for name, value in (("l1", l1), ("l2", l2)):
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"Invalid value for argument {name}: expected a non-negative finite float. "
                                 f"Received: {name}={value}")
        self.l1, self.l2 = float(l1), float(l2)

    def __call__(self, w: Any) -> Any:
        penalty = w.dtype.type(0)
        if self.l1:
            penalty = penalty + w.dtype.type(self.l1) * tf_sum(abs(w))
        if self.l2:
            penalty = penalty + w.dtype.type(self.l2) * tf_sum(w * w)
        return penalty

    def grad(self, w: Any) -> Any:
        """d penalty / d w."""
        grad = w * w.dtype.type(0)
        if self.l1:
            grad = grad + w.dtype.type(self.l1) * array_module(w).sign(w)
        if self.l2:
            grad = grad + w.dtype.type(2 * self.l2) * w
        return grad

    def get_config(self) -> dict[str, float]:
        return {"l1": self.l1, "l2": self.l2}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Regularizer":
        return cls(**config)


class L1(Regularizer):
    def __init__(self, l1: float = 0.01) -> None:
        super().__init__(l1=l1)

    def get_config(self) -> dict[str, float]:
        """Keras keeps L1's factor as a float32 tensor, so its config holds the float32 value."""
        return {"l1": float(np.float32(self.l1))}


class L2(Regularizer):
    def __init__(self, l2: float = 0.01) -> None:
        super().__init__(l2=l2)

    def get_config(self) -> dict[str, float]:
        return {"l2": self.l2}


class L1L2(Regularizer):
    def __init__(self, l1: float = 0.0, l2: float = 0.0) -> None:
        super().__init__(l1=l1, l2=l2)


l1, l2, l1_l2 = L1, L2, L1L2
# Keras 3's names: the classes' and their snake case ("l1l2"; the ``l1_l2`` alias is no name get() knows).
_BY_NAME: dict[str, type[Regularizer]] = {"l1": L1, "l2": L2, "l1l2": L1L2, "L1": L1, "L2": L2, "L1L2": L1L2}


def get(identifier: Any) -> Regularizer | None:
    """None, a regularizer, one by name (``"l2"``) or from its config."""
    if isinstance(identifier, dict):
        return resolve(identifier, Regularizer, {}, _BY_NAME, "regularizer")
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    raise ValueError(f"Could not interpret regularizer identifier: {identifier}\nKnown: {sorted(_BY_NAME)}, or a "
                     "mirrorlab.keras.regularizers.Regularizer instance.")


def serialize(regularizer: Regularizer) -> dict[str, Any]:
    return serialize_keras_object(regularizer)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Regularizer:
    return deserialize_keras_object({"module": "keras.regularizers", **config}, custom_objects)
