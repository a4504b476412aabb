"""A functional model's config as Keras 3 writes it, and the model rebuilt from one.

The config lists the graph's operations in the model's order, each with its ``inbound_nodes``: the arguments of
each call, symbolic tensors written as ``__keras_tensor__`` entries that name the operation, call and output they
come from. Rebuilding calls the restored layers on ``keras.Input`` tensors in that order (deferring a call until its
inputs exist), as Keras' ``functional_from_config`` does. Element-wise operators on symbolic tensors (``x + y``,
``ops.relu``) are written as Keras' op classes; operations with other arguments are refused with the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .... import nest
from ..symbolic import KerasTensor, TensorOp
from .serialization import deserialize_keras_object, serialize_keras_object

__all__ = ["functional_config", "functional_from_config", "is_functional_config"]

# the element-wise ops a config may hold: Keras class -> (Keras module, mirrorlab.keras.ops function name)
_OPS = {
    **{name: ("keras.src.ops.numpy", fn) for name, fn in (
        ("Add", "add"), ("Subtract", "subtract"), ("Multiply", "multiply"), ("Divide", "divide"),
        ("TrueDivide", "true_divide"), ("Maximum", "maximum"), ("Minimum", "minimum"), ("Matmul", "matmul"),
        ("Sqrt", "sqrt"), ("Exp", "exp"), ("Log", "log"), ("Tanh", "tanh"), ("Square", "square"),
        ("Absolute", "abs"), ("Negative", "negative"))},
    "Relu": ("keras.src.ops.nn", "relu"), "Sigmoid": ("keras.src.ops.nn", "sigmoid"),
}


def is_functional_config(config: dict[str, Any]) -> bool:
    """Whether ``config`` describes a functional model (``keras.Model.from_config`` then rebuilds the graph)."""
    return {"layers", "input_layers", "output_layers"} <= set(config)


def _operation_config(operation: Any) -> dict[str, Any]:
    """``serialize_keras_object`` of a layer, or Keras' entry for an element-wise op."""
    if not isinstance(operation, TensorOp):
        return serialize_keras_object(operation)
    if operation.class_name not in _OPS:
        raise NotImplementedError(
            f"The operation '{operation.name}' ({operation.class_name}) of this functional model cannot be saved in "
            f"its config: mirrorlab writes only the element-wise ops {sorted(_OPS)}.\nFix: wrap the computation in a "
            "Layer subclass (with get_config) or a Lambda of a named, registered function.")
    return {"module": _OPS[operation.class_name][0], "class_name": operation.class_name,
            "config": {"name": operation.name}, "registered_name": operation.class_name}


def functional_config(model: Any) -> dict[str, Any]:
    """Keras' ``get_config`` of the functional ``model``."""
    nodes = list(model._nodes) + [t._keras_history.operation._inbound_nodes[0] for t in model.inputs]
    own = {id(node) for node in nodes}

    def new_index(operation: Any, node_index: int) -> int:
        """The call's index among those of ``operation`` that belong to this model (Keras renumbers them)."""
        return sum(id(node) in own for node in operation._inbound_nodes[:node_index])

    def tensor_entry(x: Any) -> Any:
        if not isinstance(x, KerasTensor):
            return serialize_keras_object(x)
        operation, node_index, tensor_index = x._keras_history
        return {"class_name": "__keras_tensor__", "config": {
            "shape": list(x.shape), "dtype": x.dtype,
            "keras_history": [operation.name, new_index(operation, node_index), tensor_index]}}

    layers = []
    for operation in model._operations:
        entry = _operation_config(operation)
        entry["name"] = operation.name
        entry["inbound_nodes"] = [
            {"args": nest.map_structure(tensor_entry, list(node.args)),
             "kwargs": nest.map_structure(tensor_entry, dict(node.kwargs))}
            for node in operation.__dict__.get("_inbound_nodes", []) if id(node) in own and not node.is_input]
        layers.append(entry)

    def endpoint(x: KerasTensor) -> list[Any]:
        operation, node_index, tensor_index = x._keras_history
        return [operation.name, new_index(operation, node_index), tensor_index]
    return {"name": model.name, "trainable": model.trainable, "layers": layers,
            "input_layers": nest.map_structure(endpoint, model._inputs_struct),
            "output_layers": nest.map_structure(endpoint, model._outputs_struct)}


def _is_endpoint(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 3 and isinstance(value[0], str) and \
        all(isinstance(i, int) for i in value[1:])


def functional_from_config(cls: type, config: dict[str, Any], custom_objects: dict[str, Any] | None = None,
                           make: Callable[[dict[str, Any]], Any] | None = None,
                           call: Callable[..., Any] | None = None) -> Any:
    """The functional model (of class ``cls``) a ``functional_config`` describes, its layers made from their
    configs (or by ``make(entry)``: ``clone_model``'s clone function) and called (through ``call(layer, *args,
    **kwargs)`` when given) on new ``keras.Input`` tensors in the saved order."""
    from .. import ops  # (ops builds on the layers)
    from ..layers import InputLayer
    made: dict[str, Any] = {}  # operation name -> the layer, or the ops function of an element-wise op
    calls: dict[str, list[list[Any]]] = {}  # operation name -> the outputs of each of its calls, in order
    pending: list[tuple[str, dict[str, Any]]] = []
    op_names: set[str] = set()
    for entry in config["layers"]:
        name = entry["name"]
        if entry.get("class_name") in _OPS and str(entry.get("module", "")).startswith("keras.src.ops"):
            made[name] = getattr(ops, _OPS[entry["class_name"]][1])
            op_names.add(name)
        else:
            layer_config = {key: value for key, value in entry.items() if key not in ("name", "inbound_nodes")}
            made[name] = deserialize_keras_object(layer_config, custom_objects) if make is None or \
                layer_config.get("class_name") == "InputLayer" else make(entry)
            if isinstance(made[name], InputLayer):
                calls[name] = [[made[name].output]]
        pending += [(name, node) for node in entry.get("inbound_nodes", [])]

    def fill(value: Any) -> Any:
        """``value`` with each ``__keras_tensor__`` entry replaced by the tensor it names (LookupError: not yet)."""
        if isinstance(value, dict) and value.get("class_name") == "__keras_tensor__":
            name, node_index, tensor_index = value["config"]["keras_history"]
            if name not in made:
                raise ValueError(f"Invalid Functional model configuration. Missing node: {name}")
            done = calls.get(name, [])
            if node_index >= len(done):
                raise LookupError(name)
            return done[node_index][tensor_index]
        if isinstance(value, dict):
            return {key: fill(item) for key, item in value.items()}
        if isinstance(value, list):
            return [fill(item) for item in value]
        return value

    progress = True
    while pending and progress:
        progress, waiting = False, []
        for name, node in pending:
            try:
                args, kwargs = fill(node.get("args", [])), fill(node.get("kwargs", {}))
            except LookupError:
                waiting.append((name, node))
                continue
            target = made[name]
            outputs = nest.flatten(target(*args, **kwargs) if call is None or name in op_names else
                                   call(target, *args, **kwargs))
            operation = outputs[0]._keras_history.operation
            if isinstance(operation, TensorOp):
                operation.name = name  # the saved name, not a new automatic one
            calls.setdefault(name, []).append(outputs)
            progress = True
        pending = waiting
    if pending:
        raise ValueError(f"Invalid Functional model configuration: the calls of {sorted({n for n, _ in pending})} "
                         "wait on tensors no layer makes.")

    def endpoints(structure: Any) -> Any:
        if _is_endpoint(structure):
            name, node_index, tensor_index = structure
            if node_index >= len(calls.get(name, [])):
                raise ValueError(f"Invalid Functional model configuration: no call {node_index} of '{name}'.")
            return calls[name][node_index][tensor_index]
        if isinstance(structure, dict):
            return {key: endpoints(value) for key, value in structure.items()}
        return [endpoints(value) for value in structure]
    return cls(endpoints(config["input_layers"]), endpoints(config["output_layers"]), name=config.get("name"),
               trainable=config.get("trainable", True))
