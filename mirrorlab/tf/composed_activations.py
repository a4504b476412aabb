"""``tf.nn.gelu`` and ``tf.math.log_sigmoid``: TF composes them of other ops in Python, and so does mirrorlab, in the
same order (so values round alike and a recording tape differentiates them through the same ops)."""

from __future__ import annotations

from typing import Any

from .array_ops import _tensor, add, cast, multiply, negative, tanh
from .math_ops import erfc, pow
from .nn_ops import softplus
from .tensor_conversion import convert_to_tensor

__all__ = ["gelu", "log_sigmoid"]


def gelu(features: Any, approximate: bool = False, name: str | None = None) -> Any:
    """Gaussian error linear unit: ``0.5 * x * erfc(-x / sqrt(2))``, or with ``approximate`` TF's tanh form
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``."""
    features = convert_to_tensor(features)
    dtype = _tensor(features).dtype
    if dtype.kind != "f":
        raise ValueError(f"`features.dtype` must be a floating point tensor.Received:features.dtype=<dtype: "
                         f"'{dtype.name}'>\nFix: cast the features to a float dtype first (e.g. tf.cast(x, "
                         "tf.float32)).")
    half = multiply(features, 0.5)  # (TF's ``0.5 * features``: the product is the same either way round)
    if approximate:
        inner = add(features, multiply(cast(0.044715, dtype), pow(features, 3)))
        return multiply(half, add(tanh(multiply(inner, 0.7978845608028654)), 1.0))
    return multiply(half, erfc(multiply(negative(features), cast(0.7071067811865476, dtype))))


def log_sigmoid(x: Any, name: str | None = None) -> Any:
    """``log(sigmoid(x))`` as ``-softplus(-x)``, which neither overflows nor loses large negative inputs."""
    return negative(softplus(negative(convert_to_tensor(x))))
