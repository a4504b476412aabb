"""Activations with their backward passes (gradient of the output w.r.t. the pre-activation).

Keras 3 remembers the input of a sigmoid or softmax on its output (``_keras_logits``), and the cross-entropy
losses compute from those logits instead of the probabilities. ``with_logits``/``logits_of`` keep that link
for the very array (or tape value) a layer or model returned; anything computed from it has none, as in TF.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .._kernels import portable_math
from .._kernels.summation import rows_summed_apart, tf_sum_along

__all__ = ["get", "serialize", "deserialize", "Activation", "linear", "relu", "sigmoid", "tanh", "softmax",
           "with_logits", "logits_of", "stack_refusal"]

_LOGITS: dict[int, tuple[weakref.ref, Any]] = {}  # id(output) -> (a reference to the output, its logits)


def with_logits(output: Any, logits: Any) -> Any:
    """``output``, remembered as computed from ``logits`` for as long as it lives."""
    key = id(output)
    _LOGITS[key] = (weakref.ref(output, lambda _: _LOGITS.pop(key, None)), logits)
    return output


def logits_of(output: Any) -> Any:
    """The logits ``output`` was computed from by a sigmoid or softmax (``with_logits``), else None."""
    entry = _LOGITS.get(id(output))
    return entry[1] if entry is not None and entry[0]() is output else None


class Activation:
    """``forward(z) -> a`` and ``backward(z, a, da) -> dz``; ``keeps_logits``: outputs remember ``z``."""

    def __init__(self, name: str, forward: Callable[[Any], Any], backward: Callable[[Any, Any, Any], Any],
                 keeps_logits: bool = False) -> None:
        self.name = self.__name__ = name  # ``layer.activation.__name__`` names it, as for Keras' functions
        self.forward = forward
        self.backward = backward
        self.keeps_logits = keeps_logits

    def __call__(self, z: Any) -> Any:
        return self.forward(z)


def softmax(z: Any, axis: int = -1) -> Any:
    """``exp(z - max) / sum(exp(z - max))`` along ``axis``: the softmax activation, and the probabilities TF's
    softmax cross-entropy kernels differentiate with."""
    e = portable_math.exp(z - z.max(axis=axis, keepdims=True))
    return e / tf_sum_along(e, axis)


def _sigmoid(z: Any) -> Any:
    return 0.5 * (portable_math.tanh(0.5 * z) + 1.0)


_ACTIVATIONS = {
    "linear": Activation("linear", lambda z: z, lambda z, a, da: da),
    "relu": Activation("relu", lambda z: np.maximum(z, 0), lambda z, a, da: da * (z > 0)),
    "sigmoid": Activation("sigmoid", _sigmoid, lambda z, a, da: da * a * (1 - a), keeps_logits=True),
    "tanh": Activation("tanh", portable_math.tanh, lambda z, a, da: da * (1 - a * a)),
    "softmax": Activation("softmax", softmax,
                          lambda z, a, da: a * (da - tf_sum_along(da * a, -1)), keeps_logits=True),
}


def stack_refusal(activation: Activation, width: Any, dtype: Any) -> str | None:
    """Why ``activation`` cannot run on stacked rows (replica, batch, ``width``) bit-identical to each replica's own
    rows; None when it can: the built-in element-wise ones, and softmax on rows its sums treat apart."""
    if not any(activation is known for known in _ACTIVATIONS.values()):
        return f"activation {activation.name!r} has no stacked execution"
    if activation is _ACTIVATIONS["softmax"] and (width is None or not rows_summed_apart(int(width), dtype)):
        return f"softmax over {width} values per row sums rows across replicas"
    return None


def _function_activation(fn: Callable[[Any], Any], name: str | None = None) -> Activation:
    """Any function of mirrorlab tensors as an activation: its output, and its gradient from a tape (the pre-activation
    held in a plain variable for the tape to follow), as Keras accepts a callable activation."""
    from ..autodiff import GradientTape, untracked
    from ...distribute.variables import plain_variable

    def backward(z: Any, a: Any, da: Any) -> Any:
        source = plain_variable(z, "activation_input")
        with GradientTape() as tape:
            tape.watch(source)
            out = fn(source)
        grad = tape.gradient(out, source, output_gradients=da)
        return np.zeros_like(z) if grad is None else np.asarray(grad, z.dtype)

    return Activation(name or getattr(fn, "__name__", "activation"), lambda z: np.asarray(untracked(fn(z))), backward)


@functools.cache
def _more_activations() -> dict[str, Activation]:
    """Keras 3's other element-wise activations by name, composed as its TensorFlow backend composes them of TF's
    functions (the tape differentiates them)."""
    import mirrorlab.tf as ml

    def hard_sigmoid(z: Any) -> Any:
        return ml.nn.relu6(z + 3.0) / 6.0

    def soft_shrink(z: Any, threshold: float = 0.5) -> Any:
        return ml.where(z > threshold, z - threshold, ml.where(z < -threshold, z + threshold, ml.zeros_like(z)))

    def sparsemax(z: Any, axis: int = -1) -> Any:
        ordered = ml.sort(z, direction="DESCENDING", axis=axis)
        cumulative = ml.math.cumsum(ordered, axis=axis)
        shape = [1] * len(z.shape)
        shape[axis] = -1
        ranks = ml.reshape(ml.range(1, ml.shape(z)[axis] + 1, dtype=z.dtype), shape)
        support = ordered - (cumulative - 1) / ranks > 0
        k = ml.reduce_sum(ml.cast(support, z.dtype), axis=axis, keepdims=True)
        tau = (ml.reduce_sum(ml.where(support, cumulative, 0.0), axis=axis, keepdims=True) - 1) / k
        return ml.maximum(z - tau, 0.0)

    def glu(z: Any, axis: int = -1) -> Any:
        if z.shape[axis] % 2 != 0:
            raise ValueError(f"axis size must be divisible by 2. Received: x.shape={ml.TensorShape(z.shape)} with "
                             f"axis={axis}\nFix: give the layer an even number of units (glu halves them).")
        first, second = ml.split(z, num_or_size_splits=2, axis=axis)
        return first * ml.sigmoid(second)

    functions = {"elu": ml.nn.elu, "sparsemax": sparsemax, "glu": glu, "selu": ml.nn.selu, "softplus": ml.nn.softplus, "softsign": ml.nn.softsign,
                 "silu": ml.nn.silu, "relu6": ml.nn.relu6, "exponential": ml.exp,
                 "leaky_relu": lambda z: ml.nn.leaky_relu(z, alpha=0.2), "log_softmax": ml.nn.log_softmax,
                 "hard_sigmoid": hard_sigmoid, "hard_silu": lambda z: z * hard_sigmoid(z),
                 "gelu": lambda z: ml.nn.gelu(z, approximate=False), "log_sigmoid": ml.math.log_sigmoid,
                 "celu": lambda z: ml.maximum(z, 0.0) + 1.0 * ml.math.expm1(ml.minimum(z, 0.0) / 1.0),
                 "hard_tanh": lambda z: ml.clip_by_value(z, -1.0, 1.0),
                 "mish": lambda z: z * ml.tanh(ml.math.softplus(z)), "soft_shrink": soft_shrink,
                 "hard_shrink": lambda z: ml.where(ml.abs(z) > 0.5, z, ml.zeros_like(z)),
                 "sparse_plus": lambda z: ml.where(z <= -1, ml.zeros_like(z),
                                                   ml.where(z < 1, (1 / 4) * ml.pow(z + 1, 2), z)),
                 "squareplus": lambda z: (z + ml.sqrt(ml.square(z) + 4.0)) / 2,
                 "tanh_shrink": lambda z: z - ml.tanh(z),
                 "sparse_sigmoid": lambda z: ml.where(z <= -1, 0.0, ml.where(z >= 1, 1.0, 0.5 * (z + 1)))}
    named = {name: _function_activation(fn, name) for name, fn in functions.items()}
    # Keras' aliases, whose configs name the function they stand for
    return {**named, "swish": named["silu"], "hard_swish": named["hard_silu"]}


@functools.cache
def _named_functions() -> dict[int, Activation]:
    """mirrorlab's own functions for the built-in activations (``tf.nn.relu``, ``tf.math.sigmoid``, ...), each the
    same activation as its name (so a sigmoid output keeps its logits)."""
    from .. import math, nn

    known = {softmax: "softmax"}
    for module in (nn, math):
        for name in ("relu", "sigmoid", "tanh", "softmax"):
            if callable(getattr(module, name, None)):
                known[getattr(module, name)] = name
    return {id(fn): _ACTIVATIONS[name] for fn, name in known.items()}


def serialize(activation: Activation) -> str:
    """Keras' config of an activation: its name."""
    return get(activation).name


def deserialize(name: str, custom_objects: dict[str, Any] | None = None) -> Activation:
    return get(name)


def get(identifier: str | Activation | Callable[[Any], Any] | None) -> Activation:
    """An activation by name (None means linear), or a function (the built-in ones by identity)."""
    if identifier is None:
        return _ACTIVATIONS["linear"]
    if isinstance(identifier, Activation):
        return identifier
    if callable(identifier):
        return _named_functions().get(id(identifier)) or _function_activation(identifier)
    known = {**_more_activations(), **_ACTIVATIONS}
    if identifier not in known:
        raise ValueError(f"Could not interpret activation function identifier: {identifier}\nFix: use one of "
                         f"{sorted(known)}, or pass a function.")
    return known[identifier]


linear, relu, sigmoid, tanh = (_ACTIVATIONS[name] for name in ("linear", "relu", "sigmoid", "tanh"))


def __getattr__(name: str) -> Activation:
    """Keras' other activations as attributes (``keras.activations.gelu``), made when first asked for."""
    if name in _more_activations():
        return _more_activations()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
