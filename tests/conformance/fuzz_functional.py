"""Random functional Keras models for fuzz_against_tf.py: a random graph over one to three ``keras.Input``s (named or
not) of Dense layers (some shared by two calls), nested Sequential models, Activation layers, merge layers (Add,
Subtract, Multiply, Average, Maximum, Minimum, Concatenate) and operators on symbolic tensors (``x * 0.5``,
``2.0 - x``, ``-x``), with one or two outputs; built in the strategy's scope or under the default strategy and
started from seeded weights. The result: the graph as Keras lists it (layers, types, shapes, checkpoint keys), the
outputs on data, tape gradients of their squares' sum, and for one output ``fit`` (MSE, SGD), the weights after it
and ``predict``. Specs are JSON (see fuzz_datasets.py)."""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .fuzz_keras import differences
from .fuzz_variables import outcome

__all__ = ["build", "differences", "generate", "shrink", "valid"]

Spec = dict[str, Any]
MERGES = ("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum")
ACTIVATIONS = (None, "relu", "tanh", "sigmoid")
REPLICAS = 2  # setup A's replicas: fit's first global batch must split evenly for TF (see fuzz_keras.py)


# -- generating -------------------------------------------------------------------------------------------


def generate(rng: random.Random) -> Spec:
    """A random graph: each node reads earlier tensors (the inputs come first); widths are tracked so merges get
    equal widths."""
    inputs = [{"width": rng.choice((1, 2, 3, 4)), "named": rng.random() < 0.4} for _ in range(rng.choice((1, 1, 2, 3)))]
    widths = [i["width"] for i in inputs]
    nodes: list[Spec] = []
    dense_nodes: list[int] = []  # node indices of Dense calls (candidates for sharing)
    for _ in range(rng.randint(1, 6)):
        src = rng.randrange(len(widths))
        kind = rng.choice(("dense", "dense", "dense", "merge", "concat", "scalar", "neg", "sequential", "activation"))
        if kind == "dense":
            shareable = [n for n in dense_nodes if widths[nodes[n]["src"]] == widths[src]]
            if shareable and rng.random() < 0.3:
                node = {"op": "dense", "src": src, "reuse": rng.choice(shareable)}
                width = nodes[node["reuse"]]["units"]
                node["units"] = width
            else:
                node = {"op": "dense", "src": src, "units": rng.choice((1, 2, 3)), "activation": rng.choice(ACTIVATIONS),
                        "use_bias": rng.random() < 0.8}
                width = node["units"]
            dense_nodes.append(len(nodes))
        elif kind == "merge":
            same = [i for i, w in enumerate(widths) if w == widths[src]]
            srcs = [src] + [rng.choice(same) for _ in range(rng.choice((1, 1, 2)))]
            merge = rng.choice(MERGES)
            node, width = {"op": "merge", "kind": merge, "srcs": srcs[:2] if merge == "Subtract" else srcs}, widths[src]
        elif kind == "concat":
            srcs = [src, rng.randrange(len(widths))]
            node, width = {"op": "concat", "srcs": srcs}, sum(widths[i] for i in srcs)
        elif kind == "scalar":
            node = {"op": "scalar", "src": src, "kind": rng.choice("+-*/"), "value": rng.choice((0.5, 2.0, -1.5)),
                    "reflected": rng.random() < 0.3}
            width = widths[src]
        elif kind == "neg":
            node, width = {"op": "neg", "src": src}, widths[src]
        elif kind == "sequential":
            node = {"op": "sequential", "src": src, "units": rng.choice((1, 2, 3))}
            width = node["units"]
        else:
            node, width = {"op": "activation", "src": src, "kind": rng.choice(("relu", "tanh", "sigmoid"))}, widths[src]
        nodes.append(node)
        widths.append(width)
    last = len(widths) - 1
    outputs = [last] if rng.random() < 0.8 or last == len(inputs) else [last, rng.randrange(len(inputs), last)]
    batch = rng.choice((2, 4, 6))
    return {"area": "functional", "seed": rng.randrange(10**6), "inputs": inputs, "nodes": nodes, "outputs": outputs,
            "scope": rng.choice(("strategy", "strategy", "default")), "n": batch * rng.choice((1, 2, 3)) +
            rng.choice((0, 0, 2)), "batch": batch, "epochs": rng.choice((1, 2)), "lr": rng.choice((0.01, 0.1))}


def valid(spec: Spec) -> bool:
    """Every node reads tensors made before it; fit's first global batch splits evenly over the replicas."""
    made = len(spec["inputs"])
    for node in spec["nodes"]:
        if any(i >= made for i in node.get("srcs", [node.get("src", 0)])):
            return False
        made += 1
    return spec["batch"] % REPLICAS == 0 and all(i < made for i in spec["outputs"])


def shrink(spec: Spec) -> Iterator[Spec]:
    """Plainer specs: one output, fewer epochs and examples."""
    if len(spec["outputs"]) > 1:
        yield {**spec, "outputs": spec["outputs"][:1]}
    if spec["epochs"] > 1:
        yield {**spec, "epochs": 1}
    if spec["n"] > spec["batch"]:
        yield {**spec, "n": spec["batch"]}


# -- building ---------------------------------------------------------------------------------------------


def _frameworks(api: Any) -> tuple[Any, Any]:
    """The TF namespace (tensorflow or mirrorlab.tf) and its ``keras``."""
    if api.framework == "tensorflow":
        import keras
        import tensorflow as tf
        return tf, keras
    import mirrorlab.tf as tf
    return tf, tf.keras


def _graph(keras: Any, spec: Spec) -> Any:
    """The spec's functional model (its layers made in the current scope)."""
    tensors = [keras.Input((i["width"],), name=f"in{k}" if i["named"] else None) for k, i in enumerate(spec["inputs"])]
    dense_layers: dict[int, Any] = {}
    for index, node in enumerate(spec["nodes"]):
        op = node["op"]
        if op == "dense":
            layer = dense_layers[node["reuse"]] if "reuse" in node else keras.layers.Dense(
                node["units"], activation=node["activation"], use_bias=node["use_bias"])
            dense_layers[index] = layer
            out = layer(tensors[node["src"]])
        elif op == "merge":
            out = getattr(keras.layers, node["kind"])()([tensors[i] for i in node["srcs"]])
        elif op == "concat":
            out = keras.layers.Concatenate()([tensors[i] for i in node["srcs"]])
        elif op == "scalar":
            x, c = tensors[node["src"]], node["value"]
            operands = (c, x) if node["reflected"] else (x, c)
            out = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
                   "/": lambda a, b: a / b}[node["kind"]](*operands)
        elif op == "neg":
            out = -tensors[node["src"]]
        elif op == "sequential":
            out = keras.Sequential([keras.layers.Dense(node["units"])])(tensors[node["src"]])
        else:
            out = keras.layers.Activation(node["kind"])(tensors[node["src"]])
        tensors.append(out)
    inputs = [tensors[k] for k in range(len(spec["inputs"]))]
    outputs = [tensors[i] for i in spec["outputs"]]
    return keras.Model(inputs if len(inputs) > 1 else inputs[0], outputs if len(outputs) > 1 else outputs[0])


def _keys(tf: Any, model: Any) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = tf.train.Checkpoint(model=model).write(os.path.join(tmp, "ckpt"))
        return sorted(name for name, _ in tf.train.list_variables(path) if "OBJECT_GRAPH" not in name)


def _arrays(spec: Spec, n: int) -> tuple[Any, np.ndarray]:
    """Seeded inputs (a list for several) and MSE targets of the first output's width."""
    rng = np.random.RandomState(spec["seed"])
    xs = [rng.uniform(-1, 1, (n, i["width"])).astype(np.float32) for i in spec["inputs"]]
    return (xs if len(xs) > 1 else xs[0]), rng.uniform(-1, 1, (n, 1)).astype(np.float32)


def build(spec: Spec) -> Callable[[Any, Any], dict[str, Any]]:
    """The case function of ``spec``: the graph, its outputs and gradients, then fit and predict (one output)."""
    def fn(api: Any, s: Any) -> dict[str, Any]:
        tf, keras = _frameworks(api)
        keras.backend.clear_session()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with s.scope() if spec["scope"] == "strategy" else contextlib.nullcontext():
                model = outcome(lambda: _graph(keras, spec))
                if isinstance(model, Exception):
                    return {"model": model}
                rng = np.random.RandomState(spec["seed"])
                model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
            result: dict[str, Any] = {
                "name": model.name, "layers": [layer.name for layer in model.layers],
                "types": [type(layer).__name__ for layer in model.layers],
                "input_shape": str(model.input_shape), "output_shape": str(model.output_shape),
                "keys": outcome(lambda: _keys(tf, model))}
            x, y = _arrays(spec, spec["n"])

            def gradients() -> list[Any]:
                with tf.GradientTape() as tape:
                    outs = model(x)
                    outs = outs if isinstance(outs, list) else [outs]
                    loss = tf.add_n([tf.reduce_sum(out * out) for out in outs])
                return [outcome(lambda: g) for g in tape.gradient(loss, model.trainable_variables)]
            result["output"] = outcome(lambda: model(x))
            result["gradients"] = outcome(gradients)
            if len(spec["outputs"]) == 1:
                width = model.output_shape[-1]
                targets = np.repeat(y, width, axis=1)
                with s.scope() if spec["scope"] == "strategy" else contextlib.nullcontext():
                    model.compile(optimizer=keras.optimizers.SGD(spec["lr"]), loss="mse")
                fit = outcome(lambda: model.fit(x, targets, batch_size=spec["batch"], epochs=spec["epochs"], verbose=0,
                                                shuffle=False))
                result["fit"] = fit if isinstance(fit, Exception) else {  # float32 sums: compared at TRAINED_RTOL
                    key: np.float32(values) for key, values in fit.history.items()}
                result["weights"] = outcome(model.get_weights)
                result["predict"] = outcome(lambda: model.predict(x, batch_size=spec["batch"], verbose=0))
            return result
    return fn
