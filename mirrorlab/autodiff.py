"""``GradientTape`` for custom training loops, over mirrorlab's explicit backward passes.

TF differentiates any op; mirrorlab's layers and losses carry their own backward passes, so the tape follows
values built from them. While a tape records (in the calling thread, i.e. one replica), Keras model calls, Keras
losses, regularization losses (``model.losses``), ``nn.compute_average_loss``, ``nn.scale_regularization_loss``,
``add_n``, ``+ - * /`` with constants or other such values and the differentiable tensor functions of ``array_ops``
(which also watch trainable variables) return ``Tracked`` values: arrays that remember how
they were made. ``tape.gradient(target, sources)`` runs the chain backwards to the sources (variables). Anything
else a program computes is a plain array, and the tape says so if the target is one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from . import nest
from .tensor import asarray, like, to_host

__all__ = ["GradientTape", "Tracked", "add_n", "recording", "track", "untracked"]

# A backward step: upstream gradient -> [(Tracked input or variable, its gradient), ...].
Backward = Callable[[Any], list[tuple[Any, Any]]]

_state = threading.local()


def recording() -> bool:
    """Whether a tape records in this thread."""
    return bool(getattr(_state, "tapes", None))


class Tracked:
    """An array value and the backward step from it to the values (or variables) it was computed from."""

    __array_priority__ = 200  # NumPy operands defer to Tracked's operators

    def __init__(self, value: Any, backward: Backward, parents: Iterable["Tracked"] = ()) -> None:
        self.value = value
        self._backward = backward
        self._parents = tuple(p for p in parents if isinstance(p, Tracked))

    # -- array behaviour ---------------------------------------------------------------------------

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(to_host(self.value), dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def ndim(self) -> int:
        return self.value.ndim

    def __len__(self) -> int:
        return len(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def numpy(self) -> Any:
        return np.asarray(to_host(self.value))

    def __repr__(self) -> str:
        return f"<Tracked {self.value!r}>"

    # -- differentiable arithmetic -----------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        return _binary(self, other, np.add, lambda g, a, b: (g, g))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return _binary(self, other, np.subtract, lambda g, a, b: (g, -g))

    def __rsub__(self, other: Any) -> Any:
        return _binary(other, self, np.subtract, lambda g, a, b: (g, -g))

    def __mul__(self, other: Any) -> Any:
        return _binary(self, other, np.multiply, lambda g, a, b: (g * b, g * a))

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return _binary(self, other, np.true_divide, lambda g, a, b: (g / b, -g * a / (b * b)))

    def __neg__(self) -> Any:
        return Tracked(-self.value, lambda g: [(self, -g)], (self,))

    def sum(self, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> "Tracked":
        total = self.value.sum(axis=axis, keepdims=keepdims, dtype=dtype)
        return Tracked(total, lambda g: [(self, _expand_to(g, self.value, axis, keepdims))], (self,))

    def mean(self, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> "Tracked":
        axes = range(self.value.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        count = int(np.prod([self.value.shape[a] for a in axes]))
        return self.sum(axis, keepdims, dtype) / self.value.dtype.type(max(count, 1))


def _expand_to(g: Any, value: Any, axis: Any, keepdims: bool) -> Any:
    """``g`` (the gradient of a sum over ``axis``) broadcast back to ``value``'s shape."""
    g = asarray(g)
    if axis is not None and not keepdims:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        for a in sorted(a % value.ndim for a in axes):
            g = np.expand_dims(g, a)
    return np.broadcast_to(g, value.shape) + value.dtype.type(0)


def untracked(value: Any) -> Any:
    """The plain array inside a ``Tracked`` (anything else unchanged)."""
    return value.value if isinstance(value, Tracked) else value


def unbroadcast(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``grad`` over the dimensions broadcasting added, down to ``shape``."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def _binary(a: Any, b: Any, op: Callable[[Any, Any], Any],
            grads: Callable[[Any, Any, Any], tuple[Any, Any]]) -> Tracked:
    """``op(a, b)`` with its backward step (gradients reduced to each operand's shape)."""
    va, vb = untracked(a), untracked(b)
    if isinstance(va, (list, tuple)) and isinstance(b, Tracked):  # a Python list converts to the tensor's dtype
        va = np.asarray(va, vb.dtype)
    if isinstance(vb, (list, tuple)):
        vb = np.asarray(vb, va.dtype)
    out = op(va, vb)

    def backward(g: Any) -> list[tuple[Any, Any]]:
        ga, gb = grads(g, va, vb)
        return [(x, unbroadcast(asarray(gx), np.shape(untracked(x))))
                for x, gx in ((a, ga), (b, gb)) if isinstance(x, Tracked)]
    return Tracked(out, backward, (a, b))


def track(value: Any, backward: Backward, parents: Iterable[Any] = ()) -> Any:
    """``value`` as a ``Tracked`` with ``backward`` (from the ``Tracked`` among ``parents``) while a tape records
    here, or when a parent is tracked; else ``value`` itself."""
    parents = tuple(parents)
    if recording() or any(isinstance(p, Tracked) for p in parents):
        return Tracked(value, backward, parents)
    return value


def add_n(inputs: Iterable[Any]) -> Any:
    """The element-wise sum of ``inputs`` (``tf.add_n``); differentiable on a tape."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("add_n needs at least one input (got an empty list).")
    total = inputs[0]
    for value in inputs[1:]:
        total = total + value
    return total


class GradientTape:
    """Records, in this thread, how ``Tracked`` values are made; ``gradient`` differentiates a target.
    (``watch_accessed_variables`` is accepted for TF's signature: the variables the tape follows are watched.)"""

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._persistent = persistent
        self._used = False

    def __enter__(self) -> "GradientTape":
        if not hasattr(_state, "tapes"):
            _state.tapes = []
        _state.tapes.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.tapes.remove(self)

    def watch(self, tensor: Any) -> None:
        """Accepted for TF compatibility: variables reached through models, losses and regularizers are
        always watched; other values cannot be differentiated by mirrorlab."""

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None) -> Any:
        """d(sum of ``target``)/d(each source), in the structure of ``sources`` (None where unconnected)."""
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients "
                               "(or jacobians)")
        self._used = True
        if not isinstance(target, Tracked):
            raise ValueError(
                "mirrorlab's GradientTape cannot differentiate this target: it was not computed from values the "
                "tape follows.\nFix: build the loss from Keras model calls, Keras losses, model.losses, "
                "nn.compute_average_loss / scale_regularization_loss, add_n, + - * / and tensor functions such as "
                "reduce_sum, matmul and sigmoid on trainable variables (call the model inside "
                "the `with GradientTape()` block).")
        seed = asarray(output_gradients) if output_gradients is not None else np.ones_like(target.value)
        found = _backpropagate(target, like(seed, target.value))
        return nest.map_structure(lambda source: found.get(id(source)), sources)


def _backpropagate(target: Tracked, seed: Any) -> dict[int, Any]:
    """Gradients of every variable reached from ``target``, keyed by ``id``: values in reverse topological
    order, each one's gradient complete before its backward step runs."""
    order: list[Tracked] = []
    visited: set[int] = set()
    stack: list[tuple[Tracked, bool]] = [(target, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        stack += [(parent, False) for parent in node._parents]
    grads: dict[int, Any] = {id(target): seed}
    found: dict[int, Any] = {}
    for node in reversed(order):
        g = grads.pop(id(node), None)
        if g is None:
            continue
        for source, partial in node._backward(g):
            key = id(source)
            store = grads if isinstance(source, Tracked) else found
            store[key] = partial if key not in store else store[key] + partial
    return found
