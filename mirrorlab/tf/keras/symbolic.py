"""Keras' symbolic tensors: ``keras.Input`` and what layers and operators called on it return. Each remembers the
call that made it (a ``Node`` of its operation), so ``keras.Model(inputs, outputs)`` can replay the graph on data.

A symbolic call finds its outputs' shapes and dtypes by calling the operation once, not training, on zeros (an
unknown dimension as 1; a batch dimension every input leaves unknown stays unknown), as Keras traces a layer on
symbolic inputs; the call builds the layer, in the active strategy's scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ... import nest
from ...distribute import context
from .naming import auto_name

__all__ = ["KerasHistory", "KerasTensor", "Node", "TensorOp", "is_symbolic", "shapes_of", "symbolic_call"]


class KerasHistory(NamedTuple):
    """Where a symbolic tensor comes from: the ``node_index``-th call of ``operation``, its ``tensor_index``-th
    output."""

    operation: Any
    node_index: int
    tensor_index: int


def _operator(fn_name: str, reflected: bool = False) -> Callable[..., Any]:
    """A binary operator of symbolic tensors: ``keras.ops.<fn_name>`` of the operands (swapped for the reflected
    form, ``2.0 - x``), a new graph operation with Keras' dtype promotion."""
    def apply(self: "KerasTensor", other: Any) -> "KerasTensor":
        from . import ops  # (ops builds on this module)
        return getattr(ops, fn_name)(*((other, self) if reflected else (self, other)))
    return apply


class KerasTensor:
    """A symbolic tensor: a shape (None where unknown, the batch dimension first), a dtype and a name; the arithmetic
    operators on it record operations of the graph (``keras.ops``), as Keras' do."""

    __array_priority__ = 300  # NumPy operands defer to these operators

    def __init__(self, shape: tuple, dtype: Any = "float32", name: str | None = None) -> None:
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = np.dtype(dtype).name
        self.name = name or auto_name("KerasTensor")
        self._keras_history: KerasHistory | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return (f"<KerasTensor shape={self.shape}, dtype={self.dtype}, sparse=False, ragged=False, "
                f"name={self.name}>")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"{self!r} is symbolic: it has no value to convert to a NumPy array.\nFix: use it only as "
                        "the input of Keras layers and of the operators + - * / (or wrap other tensor functions in "
                        "a Layer subclass's call), and build keras.Model(inputs, outputs) to compute on data.")

    def __bool__(self) -> bool:
        raise TypeError(f"A symbolic KerasTensor has no truth value: {self!r}.\nFix: branch on data inside a Layer "
                        "subclass's call.")

    __add__, __radd__ = _operator("add"), _operator("add", reflected=True)
    __sub__, __rsub__ = _operator("subtract"), _operator("subtract", reflected=True)
    __mul__, __rmul__ = _operator("multiply"), _operator("multiply", reflected=True)
    __truediv__, __rtruediv__ = _operator("true_divide"), _operator("true_divide", reflected=True)

    def __neg__(self) -> "KerasTensor":
        from . import ops  # (ops builds on this module)
        return ops.negative(self)


def is_symbolic(*structures: Any) -> bool:
    """Whether any of the nests holds a ``KerasTensor``."""
    return any(isinstance(leaf, KerasTensor) for leaf in nest.flatten(list(structures)))


def shapes_of(inputs: Any) -> Any:
    """The shape of ``inputs``, or the nest of shapes of a list, tuple or dict of tensors (what ``build`` takes)."""
    if isinstance(inputs, (list, tuple, dict)):
        return nest.map_structure(lambda x: tuple(x.shape) if isinstance(x, KerasTensor) else tuple(np.shape(x)),
                                  inputs)
    return tuple(inputs.shape) if isinstance(inputs, KerasTensor) else tuple(np.shape(inputs))


class Node:
    """One call of an operation on symbolic tensors: its arguments (with the tensors in place) and its outputs."""

    def __init__(self, operation: Any, args: tuple = (), kwargs: dict | None = None,
                 outputs: list[KerasTensor] | None = None) -> None:
        self.operation = operation
        self.args, self.kwargs = args, dict(kwargs or {})
        self.input_tensors = [t for t in nest.flatten([list(args), self.kwargs]) if isinstance(t, KerasTensor)]
        self.outputs = outputs or []
        self.is_input = not self.input_tensors

    @property
    def parent_nodes(self) -> list["Node"]:
        return [t._keras_history.operation._inbound_nodes[t._keras_history.node_index] for t in self.input_tensors]

    def fill_in(self, values: dict[int, Any]) -> tuple[tuple, dict]:
        """The call's arguments with each symbolic tensor replaced by ``values[id(tensor)]``."""
        def fill(x: Any) -> Any:
            return values[id(x)] if isinstance(x, KerasTensor) else x
        args, kwargs = nest.map_structure(fill, [list(self.args), self.kwargs])
        return tuple(args), kwargs


def _zeros(x: Any, unknown: int = 1) -> Any:
    """Zeros standing for a symbolic tensor (an unknown dimension as ``unknown``), on the active strategy's first
    device (where the weights built in its scope live); other values as they are."""
    if not isinstance(x, KerasTensor):
        return x
    zeros = np.zeros(tuple(unknown if d is None else d for d in x.shape), x.dtype)
    placement = getattr(context.get_strategy().extended, "_placement", None)
    return zeros if placement is None else placement.put(zeros, 0)


def symbolic_call(operation: Any, run: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``operation`` applied to symbolic inputs: ``run(*args, **kwargs)`` on zeros gives the outputs' shapes and
    dtypes (with an unknown dimension beyond the batch one, a second run with it as 2 shows which output dimensions
    follow it: those are unknown too); returns them as KerasTensors of a new node of ``operation`` (the same nest
    as ``run``'s result)."""
    tensors = [t for t in nest.flatten([list(args), kwargs]) if isinstance(t, KerasTensor)]
    unknown_batch = all(t.ndim and t.shape[0] is None for t in tensors)
    zero_args, zero_kwargs = nest.map_structure(_zeros, [list(args), kwargs])
    result = run(*zero_args, **zero_kwargs)
    varying: list[tuple | None] = [None] * len(nest.flatten(result))
    if any(None in t.shape[1:] for t in tensors):
        probe_args, probe_kwargs = nest.map_structure(lambda x: _zeros(x, 2), [list(args), kwargs])
        varying = [tuple(a != b for a, b in zip(np.shape(first), np.shape(second))) for first, second in
                   zip(nest.flatten(result), nest.flatten(run(*probe_args, **probe_kwargs)))]
    changes = iter(varying)

    def symbolic(value: Any) -> KerasTensor:
        shape = tuple(np.shape(value))
        moved = next(changes)
        if moved is not None:
            shape = tuple(None if m else d for d, m in zip(shape, moved))
        if unknown_batch and shape:
            shape = (None, *shape[1:])
        return KerasTensor(shape, value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype)
    outputs = nest.map_structure(symbolic, result)
    inbound = operation.__dict__.setdefault("_inbound_nodes", [])
    node = Node(operation, args, kwargs, nest.flatten(outputs))
    for index, tensor in enumerate(node.outputs):
        tensor._keras_history = KerasHistory(operation, len(inbound), index)
    inbound.append(node)
    return outputs


class TensorOp:
    """An operator applied to symbolic tensors (``x + y``, ``-x``, ...): an operation of the graph that is not a layer
    (``model.layers`` leaves it out; it holds no weights), named as Keras names the op (``add``, ``add_1``, ...)."""

    def __init__(self, class_name: str, fn: Callable[..., Any]) -> None:
        self.name = auto_name(class_name)
        self.class_name = class_name  # Keras' class of the op (``Add``), which its config names
        self._fn = fn

    def __repr__(self) -> str:
        return f"<Operation name={self.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if is_symbolic(args, kwargs):
            return symbolic_call(self, self._fn, args, kwargs)
        return self._fn(*args, **kwargs)
