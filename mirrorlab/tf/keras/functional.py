"""Keras' functional models: ``keras.Model(inputs, outputs)`` over the graph that layers (and operators) called on
``keras.Input`` recorded. The graph is ordered as Keras 3 orders it (operations by depth from the outputs, then by
first visit), which fixes ``model.layers`` and the checkpoint keys ``_operations/<index>/...``; a call replays the
nodes in topological order on data."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ... import nest
from ...distribute.batch_safe import stacked_replicas
from ..autodiff import untracked
from ...tensor import asarray
from .layers import InputLayer, Layer, takes_training
from .models import Model, first_shape
from .naming import auto_name
from .saving.functional_config import functional_config
from .symbolic import KerasTensor, Node

__all__ = ["Functional"]


def _walk(inputs: list[KerasTensor], outputs: list[KerasTensor]) -> tuple[list[Node], dict[Any, int]]:
    """The nodes that lead from ``inputs`` to ``outputs`` in topological order (depth first from each output), and
    each operation's index in the order it was first reached."""
    order: list[Node] = []
    first_seen: dict[Any, int] = {}
    finished: set[int] = set()
    in_progress: set[int] = set()
    input_ids = {id(t) for t in inputs}

    def visit(tensor: KerasTensor) -> None:
        operation, node_index, _ = tensor._keras_history
        node = operation._inbound_nodes[node_index]
        if id(node) in finished:
            return
        if not node.is_input and id(tensor) in input_ids:  # an intermediate tensor given as an input
            finished.add(id(node))
            return
        if id(node) in in_progress:
            raise ValueError(f"Tensor {tensor} from operation '{operation.name}' is part of a cycle.")
        first_seen.setdefault(operation, len(first_seen))
        in_progress.add(id(node))
        if not node.is_input:
            for parent in node.input_tensors:
                visit(parent)
        finished.add(id(node))
        in_progress.discard(id(node))
        order.append(node)
    for output in outputs:
        visit(output)
    return order, first_seen


def _operations_by_depth(inputs: list[KerasTensor], order: list[Node], first_seen: dict[Any, int]) -> list[Any]:
    """The graph's operations as Keras 3 lists them: deepest (farthest from the outputs) first, ties in first-visit
    order; an input no output uses comes last among the inputs' depth."""
    in_graph = {id(node) for node in order}
    node_depth: dict[int, int] = {}
    depth_of: dict[Any, int] = {}
    for node in reversed(order):
        depth = max(node_depth.setdefault(id(node), 0), depth_of.get(node.operation, 0))
        depth_of[node.operation] = node_depth[id(node)] = depth
        for parent in node.parent_nodes:
            if id(parent) in in_graph:
                node_depth[id(parent)] = max(depth + 1, node_depth.get(id(parent), 0))
    for tensor in inputs:
        operation = tensor._keras_history.operation
        if operation not in depth_of and isinstance(operation, InputLayer):
            depth_of[operation], first_seen[operation] = 0, -1
    return sorted(depth_of, key=lambda op: (-depth_of[op], first_seen[op]))


def _check_connected(inputs: list[KerasTensor], nodes: list[Node], outputs: Any) -> None:
    """Keras' error for an output the inputs do not lead to (an input it needs is not among ``inputs``)."""
    computable = {id(t) for t in inputs}
    for node in nodes:
        if all(id(t) in computable for t in node.input_tensors):
            computable.update(id(t) for t in node.outputs)
    for path, tensor in _with_paths(outputs):
        if id(tensor) not in computable:
            raise ValueError(f"Output with path `{path}` is not connected to `inputs`\nFix: list every keras.Input "
                             "the outputs depend on in `inputs`.")


def _with_paths(structure: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(path, leaf)`` of each leaf of a nest of lists, tuples and dicts (keys sorted), paths joined by dots."""
    if isinstance(structure, dict):
        items = [(str(key), structure[key]) for key in sorted(structure)]
    elif isinstance(structure, (list, tuple)):
        items = [(str(i), value) for i, value in enumerate(structure)]
    else:
        return [(prefix, structure)]
    return [pair for key, value in items for pair in _with_paths(value, f"{prefix}.{key}" if prefix else key)]


class Functional(Model):
    """A model over a graph of layers: ``Functional(inputs, outputs)`` (what ``keras.Model(inputs, outputs)``
    returns). ``inputs`` and ``outputs`` are a KerasTensor or a list or dict of them; calling the model on data
    of the same structure (a single array for one input) runs the graph and returns the outputs' structure (one
    output unwrapped from a list). Its layers are built already; ``fit`` trains models with one output."""

    def __init__(self, inputs: Any, outputs: Any, name: str | None = None, trainable: bool = True) -> None:
        super().__init__(name=name or auto_name(type(self).__name__), trainable=trainable)
        if isinstance(inputs, dict):
            for key, tensor in inputs.items():
                if isinstance(tensor, KerasTensor) and key != tensor.name:
                    warnings.warn(f"When providing `inputs` as a dict, all keys in the dict must match the names of "
                                  f"the corresponding tensors. Received key '{key}' mapping to value {tensor} which "
                                  f"has name '{tensor.name}'. Change the tensor name to '{key}' (via "
                                  f"`Input(..., name='{key}')`)", stacklevel=3)
        for what, structure in (("inputs", inputs), ("outputs", outputs)):
            for x in nest.flatten(structure):
                if not isinstance(x, KerasTensor):
                    raise ValueError(f"All `{what}` values must be KerasTensors. Received: {what}={structure} "
                                     f"including invalid value {x} of type {type(x)}\nFix: build them from "
                                     "keras.Input(shape) and layers called on it.")
        self._inputs_struct, self._outputs_struct = inputs, outputs
        self.inputs, self.outputs = nest.flatten(inputs), nest.flatten(outputs)
        order, first_seen = _walk(self.inputs, self.outputs)
        self._operations = _operations_by_depth(self.inputs, order, first_seen)
        names = [op.name for op in self._operations]
        for op_name in names:
            if names.count(op_name) != 1:
                raise ValueError(f'The name "{op_name}" is used {names.count(op_name)} times in the model. All '
                                 "operation names should be unique.\nFix: give the layers distinct names.")
        self._nodes = [node for node in order if not node.is_input]
        _check_connected(self.inputs, self._nodes, outputs)
        self.__dict__["_layers"] = [op for op in self._operations if isinstance(op, Layer)]
        self.built = True
        self._called = True
        self.output_names = [t._keras_history.operation.name for t in self.outputs]

    @property
    def layers(self) -> list[Layer]:
        """Every layer of the graph, input layers included, in Keras' order."""
        return list(self._layers)

    @property
    def input(self) -> Any:
        return self._inputs_struct

    @property
    def output(self) -> Any:
        return self._outputs_struct

    @property
    def input_shape(self) -> Any:
        return _unpack_singleton(nest.map_structure(lambda t: t.shape, self._inputs_struct))

    @property
    def output_shape(self) -> Any:
        return _unpack_singleton(nest.map_structure(lambda t: t.shape, self._outputs_struct))

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """``Model.compile`` for a model of one output (several outputs are called and predicted, not trained)."""
        if len(self.outputs) > 1:
            raise NotImplementedError(
                f"Model '{self.name}' has {len(self.outputs)} outputs ({self.output_names}); mirrorlab compiles and fits "
                "functional models of one output.\nFix: train a model whose single output joins the heads (e.g. "
                "keras.layers.Concatenate), or write a custom loop with GradientTape over the outputs.")
        super().compile(*args, **kwargs)

    def _checkpoint_children(self) -> dict[str, Any]:
        """Keras 3's object graph: the operations by index (``_operations/1/_kernel``...), then the optimizer."""
        children: dict[str, Any] = {"_operations": [op if isinstance(op, Layer) and not isinstance(op, InputLayer)
                                                    else None for op in self._operations]}
        if self._optimizer is not None:
            children["optimizer"] = self._optimizer
        return children

    def get_config(self) -> dict[str, Any]:
        """Keras' config of the graph (see ``saving.functional_config``)."""
        return functional_config(self)

    def get_build_config(self) -> dict[str, Any]:
        """Keras writes no input shape for a functional model (its graph fixes the shapes)."""
        return {"input_shape": None}

    def build_from_config(self, config: dict[str, Any]) -> None:
        """Nothing: the graph built the layers."""

    def compute_output_shape(self, input_shape: Any) -> Any:
        """The outputs' shapes, their batch dimension that of the (first) input."""
        batch = first_shape(input_shape)[0]
        shapes = [t.shape if not t.shape or t.shape[0] is not None else (batch, *t.shape[1:]) for t in self.outputs]
        return _unpack_singleton(nest.pack_sequence_as(self._outputs_struct, shapes))

    def _check_inputs(self, inputs: Any) -> None:
        """Keras' input spec of a functional model: one input per ``keras.Input`` (a dict found by the input layers'
        names, or a dict model's keys), each of the input's shape (the batch size free, a last dimension of 1 on
        either side ignored)."""
        struct = self._inputs_struct
        names = sorted(struct) if isinstance(struct, dict) else [t._keras_history.operation.name for t in self.inputs]
        if isinstance(inputs, dict):
            for name in names:
                if name not in inputs:
                    raise ValueError(f'Missing data for input "{name}". You passed a data dictionary with keys '
                                     f"{list(inputs)}. Expected the following keys: {names}")
            inputs = [inputs[name] for name in names]
        flat = nest.flatten(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if len(flat) != len(names):
            example = ", ".join(f"'{name}': ..." for name in names)
            raise ValueError(f'Layer "{self.name}" expects {len(names)} named input(s) with keys {names}, but it '
                             f"received {len(flat)} input tensors. Pass inputs as a dict, e.g. `layer({{{example}}})`.")
        for index, (x, name, tensor) in enumerate(zip(flat, names, self.inputs)):
            expected = (None, *tensor.shape[1:]) if tensor.shape else ()
            shape, spec = tuple(np.shape(untracked(x)))[_replica_axes():], expected
            shape, spec = (shape[:-1] if shape and shape[-1] == 1 else shape), (spec[:-1] if spec and spec[-1] == 1
                                                                              else spec)
            if any(want is not None and want != got for want, got in zip(spec, shape)):
                raise ValueError(f"Input {index} with name '{name}' of layer '{self.name}' is incompatible with the "
                                 f"layer: expected shape={expected}, found shape={shape}")

    def _standardize(self, inputs: Any) -> list[Any]:
        """The call's inputs as a flat list in the order of ``self.inputs``, converted to their dtypes and ranks."""
        self._check_inputs(inputs)
        struct = self._inputs_struct
        if isinstance(struct, (list, tuple)) and len(struct) == 1 and not isinstance(inputs, (list, tuple, dict)):
            inputs = [inputs]
        elif isinstance(inputs, dict) and not isinstance(struct, dict):
            names = [t.name for t in self.inputs]
            if not set(names) <= set(inputs):
                raise ValueError(self._structure_error(inputs))
            inputs = [inputs[name] for name in names]
        flat = nest.flatten(inputs) if isinstance(inputs, (list, tuple, dict)) else [inputs]
        return [self._adjust_rank(i, self._convert(x, tensor)) for i, (x, tensor) in
                enumerate(zip(flat, self.inputs))]

    @staticmethod
    def _convert(x: Any, tensor: KerasTensor) -> Any:
        """``x`` in the input's dtype (Keras converts every input to it)."""
        value = untracked(x)
        return x if getattr(value, "dtype", None) == np.dtype(tensor.dtype) else asarray(value, tensor.dtype)

    def _adjust_rank(self, index: int, x: Any) -> Any:
        """Keras' rank matching: a trailing dimension of 1 too many is squeezed, one too few is added."""
        expected = self.inputs[index].shape
        full = np.shape(untracked(x))
        shape = full[_replica_axes():]
        if len(shape) == len(expected):
            return x
        if len(shape) == len(expected) + 1 and shape[-1] == 1:
            return untracked(x).reshape(full[:-1])
        if len(shape) == len(expected) - 1 and expected[-1] == 1:
            return untracked(x).reshape((*full, 1))
        raise ValueError(f"Invalid input shape for input {x!r} with name '{self.inputs[index].name}'. Expected shape "
                         f"{expected}, but input has incompatible shape {shape}")

    def call(self, inputs: Any, training: Any = None) -> Any:
        """The graph replayed on ``inputs``: each node's layer called on its inputs' values (with the model's
        ``training`` mode, when given, for layers that take it)."""
        values = {id(t): x for t, x in zip(self.inputs, self._standardize(inputs))}
        for node in self._nodes:
            args, kwargs = node.fill_in(values)
            operation = node.operation
            if training is not None and isinstance(operation, Layer) and (
                    "training" in kwargs or takes_training(operation)):
                kwargs["training"] = training
            for tensor, value in zip(node.outputs, nest.flatten(operation(*args, **kwargs))):
                values[id(tensor)] = value
        outputs = [values[id(t)] for t in self.outputs]
        return _unpack_singleton(nest.pack_sequence_as(self._outputs_struct, outputs))


def _replica_axes() -> int:
    """How many leading axes of a call's inputs are not one replica's: 1 in a ``@batch_safe`` function run stacked
    (the local replicas), else 0."""
    return 0 if stacked_replicas() is None else 1


def _unpack_singleton(x: Any) -> Any:
    return x[0] if isinstance(x, (list, tuple)) and len(x) == 1 else x


