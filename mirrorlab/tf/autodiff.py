"""``GradientTape`` for custom training loops, over mirrorlab's explicit backward passes.

TF differentiates any op; mirrorlab's layers and losses carry their own backward passes, so the tape follows
values built from them. While a tape records (in the calling thread, i.e. one replica), Keras model calls, Keras
losses, regularization losses (``model.losses``), ``nn.compute_average_loss``, ``nn.scale_regularization_loss``,
``add_n``, the differentiable tensor functions of ``array_ops``, and the operators (``+ - * / ** @``, indexing,
``abs``) of such values and of trainable float variables return ``Tracked`` values: arrays that remember how
they were made (the tape watches trainable variables, as TF's). ``tape.gradient(target, sources)`` runs the chain
backwards to the sources (variables). What has no gradient in TF (comparisons, argmax, integer casts) and anything
computed outside these (NumPy functions) is a plain array: no gradient flows through it (TF's None).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .. import nest
from ..distribute.batch_safe import slice_replicas_of, stacked_replicas
from ._kernels import portable_math
from .indexed_slices import accumulate
from ._kernels.summation import tf_sum
from ..tensor import asarray, integer_division, like, tensor_view, to_host

__all__ = ["BINARY_GRADIENTS", "GradientTape", "Tracked", "add_n", "broadcast_back", "recording", "track",
           "unbroadcast", "untracked", "watched", "watching", "with_gradient"]

# A backward step: upstream gradient -> [(Tracked input or variable, its gradient), ...].
Backward = Callable[[Any], list[tuple[Any, Any]]]

_state = threading.local()
log = logging.getLogger("mirrorlab")


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

    def __int__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    __hash__ = object.__hash__  # by identity: the tape keys values by object

    # -- differentiable arithmetic (+ - * / ** @ and their reflections: see _install_operators) ----------

    def __neg__(self) -> Any:
        return Tracked(-self.value, lambda g: [(self, -g)], (self,))

    def __abs__(self) -> Any:
        return Tracked(abs(self.value), lambda g: [(self, g * np.sign(self.value))], (self,))

    def __getitem__(self, item: Any) -> "Tracked":
        def backward(g: Any) -> list[tuple[Any, Any]]:
            full = np.zeros_like(self.value)
            np.add.at(full, item, g)
            return [(self, full)]
        return Tracked(self.value[item], backward, (self,))

    def sum(self, axis: Any = None, keepdims: bool = False, dtype: Any = None, out: None = None) -> "Tracked":
        """The sum over ``axis`` (also what ``np.sum`` calls)."""
        total = tf_sum(self.value, axis, keepdims) if dtype is None or np.dtype(dtype) == self.value.dtype else \
            self.value.sum(axis=axis, keepdims=keepdims, dtype=dtype)
        return Tracked(total, lambda g: [(self, broadcast_back(g, self.value, axis, keepdims))], (self,))

    def mean(self, axis: Any = None, keepdims: bool = False, dtype: Any = None, out: None = None) -> "Tracked":
        """The mean over ``axis`` (also what ``np.mean`` calls)."""
        axes = range(self.value.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        count = int(np.prod([self.value.shape[a] for a in axes]))
        return self.sum(axis, keepdims, dtype) / self.value.dtype.type(max(count, 1))


def _plain(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``op`` on the values of ``a`` and ``b`` (Python operands in the tensor's dtype), untracked."""
    va, vb = _converted(untracked(a), untracked(b))
    return op(va, vb)


def _install_operators() -> None:
    """Tracked's binary operators: ``+ - * / ** @`` (and reflected) with their gradients; those without a gradient
    (TF gives None through them) with plain results: comparisons (element-wise, as a tensor's), ``//`` and ``%``."""
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide, "pow": portable_math.power,
           "matmul": np.matmul}
    for name, grads in BINARY_GRADIENTS.items():
        setattr(Tracked, f"__{name}__", lambda self, other, op=ops[name], grads=grads: _binary(self, other, op, grads))
        setattr(Tracked, f"__r{name}__", lambda self, other, op=ops[name], grads=grads: _binary(other, self, op, grads))
    for name, op in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                     ("eq", np.equal), ("ne", np.not_equal),
                     ("floordiv", functools.partial(integer_division, np.floor_divide, name="FloorDiv")),
                     ("mod", functools.partial(integer_division, np.mod, name="FloorMod"))):
        setattr(Tracked, f"__{name}__", lambda self, other, op=op: _plain(op, self, other))
        if name in ("floordiv", "mod"):
            setattr(Tracked, f"__r{name}__", lambda self, other, op=op: _plain(op, other, self))


def _quotient_grads(g: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """The partial derivatives of ``a / b``, rounded as TF's RealDiv gradient: ``g / b`` and ``g * ((-a / b) / b)``."""
    return g / b, g * ((-a / b) / b)


def _power_grads(g: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """The partial derivatives of ``a ** b``; as TF's, the exponent's is 0 where ``a <= 0`` (no log there)."""
    a, b = asarray(a), asarray(b)
    positive = a > 0
    log_a = np.where(positive, portable_math.log(np.where(positive, a, 1)), 0).astype(a.dtype)
    power = portable_math.power
    return g * b * power(a, b - b.dtype.type(1)), g * power(a, b) * log_a


def _matmul_grads(g: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """The partial derivatives of the matrix product ``a @ b``."""
    return g @ np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2) @ g


# The partial derivatives of each differentiable binary operation: (upstream g, a, b) -> (d/da, d/db).
BINARY_GRADIENTS: dict[str, Callable[[Any, Any, Any], tuple[Any, Any]]] = {
    "add": lambda g, a, b: (g, g), "sub": lambda g, a, b: (g, -g), "mul": lambda g, a, b: (g * b, g * a),
    "truediv": _quotient_grads, "pow": _power_grads, "matmul": _matmul_grads}


def broadcast_back(g: Any, value: Any, axis: Any, keepdims: bool) -> Any:
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


_PYTHON = (list, tuple, int, float)  # operands TF converts to the other operand's dtype


def watched(value: Any) -> Any:
    """``value``, or while a tape here watches it (a float variable, see ``watching``), a ``Tracked`` leaf whose
    gradient goes to that variable."""
    leaf = getattr(value, "_tape_leaf", None)
    return leaf() if leaf is not None and recording() else value


def watching(var: Any) -> bool:
    """Whether a recording tape in this thread watches the variable ``var`` as it is read now: TF's tape watches
    the trainable float variables a computation reads, and those given to ``watch`` (other dtypes are listed as
    watched, but no gradient flows to them)."""
    hits = [tape._watches(var) for tape in getattr(_state, "tapes", ())]  # every tape remembers its own reads
    return any(hits) and np.dtype(var.dtype).kind in "fc"


def _converted(va: Any, vb: Any) -> tuple[Any, Any]:
    """Two operands, one an array: a Python one converted to the array's dtype, as TF converts it."""
    if isinstance(va, _PYTHON):
        va = np.asarray(va, vb.dtype)
    if isinstance(vb, _PYTHON):
        vb = np.asarray(vb, va.dtype)
    return va, vb


def _binary(a: Any, b: Any, op: Callable[[Any, Any], Any],
            grads: Callable[[Any, Any, Any], tuple[Any, Any]]) -> Any:
    """``op(a, b)`` with its backward step (gradients reduced to each operand's shape)."""
    a, b = watched(a), watched(b)
    va, vb = _converted(untracked(a), untracked(b))
    return with_gradient(op(va, vb), (a, b), lambda g: grads(g, va, vb))


def with_gradient(result: Any, inputs: Sequence[Any], grads: Callable[[Any], Sequence[Any]]) -> Any:
    """``result``, carrying the backward step ``grads(g)`` (one gradient per input, each summed down to its input's
    shape) when one of ``inputs`` is tracked; else ``result`` itself."""
    if not any(isinstance(x, Tracked) for x in inputs):
        return result

    def backward(g: Any) -> list[tuple[Any, Any]]:
        return [(x, unbroadcast(asarray(part), np.shape(untracked(x))))
                for x, part in zip(inputs, grads(g)) if isinstance(x, Tracked)]
    return Tracked(result, backward, inputs)


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

    As TF's tape it watches the trainable float variables read while it records (unless
    ``watch_accessed_variables=False``) and the variables given to ``watch``; gradients of other sources are None.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._persistent = persistent
        self._watch_accessed = watch_accessed_variables
        self._watched: dict[int, Any] = {}  # id -> variable
        self._used = False

    def __enter__(self) -> "GradientTape":
        if not hasattr(_state, "tapes"):
            _state.tapes = []
        _state.tapes.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.tapes.remove(self)

    def watch(self, tensor: Any) -> None:
        """Watch the variables in the nest ``tensor`` (trainable or not), as TF does; integer ones are listed as
        watched, with TF's warning, but get no gradient. mirrorlab's tensors are plain arrays the tape cannot follow:
        watching one raises."""
        for value in nest.flatten(tensor):
            if isinstance(value, Tracked):
                continue  # computed on this tape from watched variables: already followed
            if getattr(value, "_tape_leaf", None) is None:
                raise TypeError(
                    f"GradientTape.watch got a {type(value).__name__}: mirrorlab's tape follows variables, not "
                    "tensors (they are plain arrays).\nFix: hold the value in a variable (ml.Variable(x)) and "
                    "differentiate with respect to that variable.")
            if np.dtype(value.dtype).kind not in "fc":  # listed as watched, but no gradient flows (TF's warning)
                log.warning("The dtype of the watched tensor must be floating (e.g. tf.float32), got %r",
                            np.dtype(value.dtype).name)
            self._watched.setdefault(id(value), value)

    def watched_variables(self) -> tuple[Any, ...]:
        """The variables this tape watches, in the order they were created (as TF's ``watched_variables``)."""
        return tuple(sorted(self._watched.values(), key=lambda var: var._serial))

    def _watches(self, var: Any) -> bool:
        """Whether this tape follows a read of ``var``: given to ``watch``, or a trainable one read while it
        watches accessed variables (then it is remembered as watched)."""
        if id(var) in self._watched:
            return True
        if self._watch_accessed and var._created_trainable:
            self._watched[id(var)] = var
            return True
        return False

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Compute without this tape recording (nor watching) inside the block."""
        tapes = getattr(_state, "tapes", [])
        if self not in tapes:
            raise ValueError("Tape must be recording.\nFix: call stop_recording inside the tape's `with` block.")
        at = tapes.index(self)
        tapes.remove(self)
        try:
            yield
        finally:
            tapes.insert(at, self)

    def reset(self) -> None:
        """Forget the variables watched so far, as TF's reset does (reads after it watch them again)."""
        self._watched.clear()
        self._used = False

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: Any = "none") -> Any:
        """d(sum of ``target``, a tensor or a nest of them)/d(each source), in the structure of ``sources``
        (None where unconnected, or zeros with ``unconnected_gradients="zero"``)."""
        mode = getattr(unconnected_gradients, "value", unconnected_gradients)
        if mode not in ("none", "zero"):
            raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}")
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients "
                               "(or jacobians)")
        if sources is None:
            raise TypeError("Cannot convert the argument `type_value`: None to a TensorFlow DType.")
        self._used = True
        targets = nest.flatten(target)
        if any(isinstance(t, (int, float)) and not isinstance(t, bool) for t in targets):
            raise ValueError(
                f"GradientTape.gradient got the Python number {target!r} as its target: it was converted out of the "
                "tape (e.g. by float() or .numpy()), so nothing connects it to the sources.\nFix: keep the loss a "
                "tensor: build it inside the `with GradientTape()` block from model calls, losses and tensor "
                "functions (reduce_sum, matmul, ...) or a variable's operators.")
        replicas = stacked_replicas()
        for one in targets:
            if replicas is not None and isinstance(one, Tracked) and one.value.shape[:1] != (replicas,):
                raise NotImplementedError(
                    f"GradientTape.gradient's target has shape {one.value.shape}: in a @batch_safe function run "
                    f"stacked it must carry the {replicas} local replicas first (each replica's loss), or it mixes "
                    "them.\nFix: reduce each replica's losses alone (nn.compute_average_loss, or a reduction over "
                    "axes from 1), or remove @batch_safe.")
        seeds = nest.flatten(output_gradients) if output_gradients is not None else [None] * len(targets)
        wanted = {id(source) for source in nest.flatten(sources) if isinstance(source, Tracked)}
        found: dict[int, Any] = {}
        for one, seed in zip(targets, seeds):
            if not isinstance(one, Tracked):  # not computed from watched variables: contributes nothing
                continue
            start = asarray(untracked(seed), one.value.dtype) if seed is not None else np.ones_like(one.value)
            for key, grad in _backpropagate(one, like(start, one.value), wanted).items():
                found[key] = grad if key not in found else found[key] + grad

        def gradient_of(source: Any) -> Any:
            followed = isinstance(source, Tracked) or id(source) in self._watched
            grad = found.get(id(source)) if followed else None
            if isinstance(source, Tracked) or replicas is None:
                shape = np.shape(untracked(source))
            else:  # a variable's gradient in a @batch_safe function run stacked: each local replica's
                shape = (replicas, *np.shape(untracked(source)))
                if grad is not None and np.shape(grad) != shape:
                    raise NotImplementedError(
                        f"the gradient of {getattr(source, 'name', 'a variable')} has shape {np.shape(grad)}, not "
                        f"{shape}: an op that reads it in this @batch_safe function run stacked mixes the {replicas} "
                        "local replicas (only Keras layers that run stacked keep each replica's gradient).\nFix: "
                        "read weights through such layers, or remove @batch_safe.")
            if grad is None and mode == "zero":
                return np.zeros(shape, np.dtype(getattr(untracked(source), "dtype", np.float32)))
            return grad
        return nest.map_structure(lambda source: tensor_view(gradient_of(source)), sources)

    def jacobian(self, target: Any, sources: Any, unconnected_gradients: Any = "none",
                 parallel_iterations: Any = None, experimental_use_pfor: bool = True) -> Any:
        """d(each element of ``target``)/d(each source): per source, an array of shape target.shape + source.shape."""
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients "
                               "(or jacobians)")
        self._used = True
        value = untracked(target)
        flat_sources = nest.flatten(sources)
        rows: list[list[Any]] = [[] for _ in flat_sources]
        for k in range(int(np.prod(np.shape(value)))):
            seed = np.zeros(np.shape(value), np.asarray(to_host(value)).dtype)
            seed.flat[k] = 1
            persistent, self._persistent, self._used = self._persistent, True, False
            try:
                grads = self.gradient(target, flat_sources, output_gradients=seed,
                                      unconnected_gradients=unconnected_gradients)
            finally:
                self._persistent, self._used = persistent, True
            for row, grad in zip(rows, grads):
                row.append(grad)

        def stacked(row: list[Any], source: Any) -> Any:
            if not row or all(g is None for g in row):
                return None
            shape = (*np.shape(value), *np.shape(untracked(source)))
            return np.stack([np.asarray(to_host(g)) for g in row]).reshape(shape)
        return nest.pack_sequence_as(sources, [stacked(row, source) for row, source in zip(rows, flat_sources)])


def _backpropagate(target: Tracked, seed: Any, intermediates: set[int] = frozenset()) -> dict[int, Any]:
    """Gradients of every variable reached from ``target`` and of the tracked values in ``intermediates``, keyed
    by ``id``: values in reverse topological order, each one's gradient complete before its backward step runs."""
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
        if id(node) in intermediates:
            found[id(node)] = g
        for source, partial in node._backward(g):
            key = id(source)
            store = grads if isinstance(source, Tracked) else found
            store[key] = partial if key not in store else accumulate(store[key], partial)
    return found


_install_operators()
slice_replicas_of(Tracked)  # (a @batch_safe function run stacked returns each replica's slice of its tape values)
