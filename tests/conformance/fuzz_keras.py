"""Random Keras training cases for fuzz_against_tf.py: a Sequential model of a random Dense stack (units, activations,
biases), started from the same weights in both frameworks (seeded ``set_weights`` or constant initializers), a random
loss (MSE, MAE, Huber, binary/categorical/sparse cross-entropy on logits or probabilities, by name, class or function),
optimizer (SGD with momentum/Nesterov, Adam with AMSGrad, RMSprop; clipping, weight decay, moving averages) and metrics (weighted ones
too), compiled in the strategy's scope or under the default strategy; then ``fit`` on NumPy arrays, a dataset or a
distributed dataset (random sizes and batch sizes, partial last batches, steps_per_epoch, initial_epoch, validation
data or split, sample or class weights), ``evaluate`` and ``predict``. The result: fit's History (or error), the
weights after it, evaluate's and predict's results, the model's config (``serialize_keras_object``) and a ``.keras``
save/load round trip (same predictions, the compile config and optimizer step loaded). Specs are JSON (see fuzz_datasets.py).

Under a strategy of 2 replicas, Keras on TF 2.21 fails when the first global batch of fit or evaluate splits unevenly
(a deliberate difference, fit_uneven_replica_batches in test_keras_conformance.py): such specs are not generated.
Arrays are never shuffled (the frameworks' shuffles differ)."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import random
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .fuzz_variables import outcome
from .harness import RTOL
from .harness import differences as harness_differences
from .keras_saving_cases import _stable

__all__ = ["build", "differences", "generate", "shrink", "valid"]

Spec = dict[str, Any]
ACTIVATIONS = (None, "linear", "relu", "relu", "tanh", "sigmoid", "softmax")
TASKS = ("regression", "binary", "categorical", "sparse")
LOSS_KINDS = {"regression": ("mse", "mae", "huber"), "binary": ("bce",), "categorical": ("cce",),
              "sparse": ("scce",)}
LOSS_NAMES = {"mse": ("mse", "mean_squared_error", "MeanSquaredError"), "mae": ("mae", "mean_absolute_error"),
              "huber": ("huber", "Huber"), "bce": ("binary_crossentropy", "bce", "crossentropy"),
              "cce": ("categorical_crossentropy", "crossentropy"),
              "scce": ("sparse_categorical_crossentropy", "crossentropy")}
LOSS_CLASSES = {"mse": "MeanSquaredError", "mae": "MeanAbsoluteError", "huber": "Huber", "bce": "BinaryCrossentropy",
                "cce": "CategoricalCrossentropy", "scce": "SparseCategoricalCrossentropy"}
LOSS_FUNCTIONS = {"mse": "mean_squared_error", "mae": "mean_absolute_error", "huber": "huber",
                  "bce": "binary_crossentropy", "cce": "categorical_crossentropy",
                  "scce": "sparse_categorical_crossentropy"}
METRICS = {"regression": ("mse", "mae", "MeanSquaredError", "MeanAbsoluteError", "accuracy"),
           "binary": ("accuracy", "binary_accuracy", "BinaryAccuracy", "BinaryCrossentropy", "mse", "precision",
                      "Recall", "auc", "AUC"),
           "categorical": ("accuracy", "categorical_accuracy", "CategoricalAccuracy", "TopKCategoricalAccuracy",
                           "CategoricalCrossentropy", "mae", "Precision", "recall"),
           "sparse": ("accuracy", "sparse_categorical_accuracy", "SparseCategoricalAccuracy",
                      "SparseTopKCategoricalAccuracy", "SparseCategoricalCrossentropy")}
REDUCTIONS = ("sum_over_batch_size", "sum_over_batch_size", "sum_over_batch_size", "sum", "mean_with_sample_weight",
              "none")
REPLICAS = 2  # setup A's replicas: the first global batch of fit and evaluate must split evenly over them
# Training amplifies float32 rounding (TF's kernels sum in other orders than NumPy): losses, weights and
# predictions after a few steps are compared at this relative (and absolute) tolerance.
TRAINED_RTOL = {**RTOL, "float32": 1e-4}


def differences(expected: Any, actual: Any) -> list[str]:
    """The differences between TF's and mirrorlab's results of a spec, floats within TRAINED_RTOL."""
    return harness_differences(expected, actual, rtol=TRAINED_RTOL)


# -- generating -------------------------------------------------------------------------------------------


def _loss(rng: random.Random, task: str) -> Spec:
    """A loss for ``task``: by name, as a class instance (with its options) or as a function."""
    kind = rng.choice(LOSS_KINDS[task])
    loss: Spec = {"kind": kind, "form": rng.choice(("name", "class", "class", "function"))}
    if loss["form"] == "name":
        loss["name"] = rng.choice(LOSS_NAMES[kind])
    if loss["form"] == "class":
        loss["reduction"] = rng.choice(REDUCTIONS)
        if kind == "huber":
            loss["delta"] = rng.choice((1.0, 0.5, 2.0))
        if kind in ("bce", "cce", "scce"):
            loss["from_logits"] = rng.random() < 0.6
        if kind in ("bce", "cce"):
            loss["label_smoothing"] = rng.choice((0.0, 0.0, 0.1))
    return loss


def _optimizer(rng: random.Random) -> Spec:
    """An optimizer: by name (its defaults) or a class instance with random options."""
    name = rng.choice(("sgd", "sgd", "adam", "adam", "adamw", "rmsprop"))
    if rng.random() < 0.15:
        return {"name": name, "form": "name"}
    opt: Spec = {"name": name, "form": "class", "learning_rate": rng.choice((0.01, 0.05, 0.1, 0.3))}
    if name == "sgd":
        opt["momentum"] = rng.choice((0.0, 0.0, 0.5, 0.9))
        opt["nesterov"] = rng.random() < 0.4
    elif name in ("adam", "adamw"):
        opt.update(beta_1=rng.choice((0.9, 0.5)), beta_2=rng.choice((0.999, 0.9)),
                   epsilon=rng.choice((1e-7, 1e-3, 0.1)), amsgrad=rng.random() < 0.4)
    else:
        opt.update(rho=rng.choice((0.9, 0.5)), momentum=rng.choice((0.0, 0.5)), epsilon=rng.choice((1e-7, 0.1)),
                   centered=rng.random() < 0.3)
    clip = rng.choice((None, None, None, "clipnorm", "clipvalue", "global_clipnorm"))
    if clip:
        opt[clip] = rng.choice((0.1, 1.0))
    if rng.random() < 0.15:
        opt["weight_decay"] = rng.choice((0.01, 0.1))
    if rng.random() < 0.2:
        opt.update(use_ema=True, ema_momentum=rng.choice((0.99, 0.5, 0.0)),
                   ema_overwrite_frequency=rng.choice((None, None, 1, 3)))
    return opt


def _metric(rng: random.Random, task: str) -> list[Any]:
    """A metric identifier for ``task``: a name, or a class name (instantiated with random options)."""
    name = rng.choice(METRICS[task])
    options: Spec = {}
    if name.startswith(("TopK", "SparseTopK")):
        options["k"] = rng.choice((1, 2))
    if name.endswith("Crossentropy"):
        options["from_logits"] = rng.random() < 0.5
    if name == "BinaryAccuracy":
        options["threshold"] = rng.choice((0.5, 0.0))
    if name in ("Precision", "Recall"):
        options.update(rng.choice(({}, {"thresholds": 0.3}, {"top_k": 1}, {"class_id": 0})))
    if name == "AUC":
        options.update(rng.choice(({}, {"num_thresholds": 9}, {"curve": "PR"}, {"from_logits": True},
                                   {"summation_method": "minoring"}, {"multi_label": True})))
    if name[0].isupper() and rng.random() < 0.3:
        options["name"] = rng.choice(("m", "loss", "accuracy"))
    return [name, options]


def _output(rng: random.Random, task: str, loss: Spec) -> tuple[int, str | None, str]:
    """The output layer's units and activation and the labels' shape kind for ``task``."""
    if task == "regression":
        units = rng.choice((1, 1, 2, 3))
        return units, rng.choice((None, None, "linear", "tanh")), rng.choice(("matrix", "flat")) if units == 1 \
            else rng.choice(("matrix", "matrix", "matrix", "flat"))
    if task == "binary":
        units = rng.choice((1, 1, 1, 2))
        logits = loss.get("from_logits", False)
        activation = rng.choice((None, None, "sigmoid")) if logits else rng.choice(("sigmoid", "sigmoid", None))
        return units, activation, rng.choice(("matrix", "flat")) if units == 1 else "matrix"
    units = rng.choice((2, 3, 4))
    logits = loss.get("from_logits", False)
    activation = rng.choice((None, None, "softmax")) if logits else rng.choice(("softmax", "softmax", None))
    return units, activation, rng.choice(("flat", "flat", "column")) if task == "sparse" else "matrix"


def _batching(rng: random.Random) -> Spec:
    """How fit reads its data: arrays (a batch size or Keras' default), a dataset (batched, maybe with a dropped
    remainder, maybe repeated) or a distributed dataset."""
    kind = rng.choice(("arrays", "arrays", "dataset", "dataset", "distributed"))
    batch = rng.choice((None, 2, 3, 4, 4, 6, 8)) if kind == "arrays" else rng.choice((2, 3, 4, 4, 5, 6, 8))
    fit: Spec = {"kind": kind, "batch": batch}
    if kind != "arrays":
        fit["drop_remainder"] = rng.random() < 0.15
        fit["repeat"] = rng.random() < 0.25
    if fit.get("repeat") or rng.random() < 0.2:
        fit["steps_per_epoch"] = rng.choice((1, 2, 3, 5))
    return fit


def _validation(rng: random.Random, fit: Spec) -> Spec | None:
    """Validation data (arrays, with weights or not, or a dataset) or split, and its steps/batch size/frequency."""
    kind = rng.choice((None, None, "split", "arrays", "dataset"))
    if kind is None or (kind == "split" and fit["kind"] != "arrays"):
        return None
    validation: Spec = {"kind": kind}
    if kind == "split":
        validation["fraction"] = rng.choice((0.2, 0.25, 0.5))
    else:
        validation["n"] = rng.choice((2, 3, 4, 6))
        validation["weights"] = rng.random() < 0.3
    if kind == "dataset":
        validation["batch"] = rng.choice((2, 3, 4))
    elif rng.random() < 0.3:
        validation["batch_size"] = rng.choice((2, 4))
    if kind == "dataset" and rng.random() < 0.3:
        validation["steps"] = rng.choice((1, 2))
    if rng.random() < 0.3:
        validation["freq"] = rng.choice((2, [1, 3], [2]))
    return validation


def _weighting(rng: random.Random, spec: Spec) -> None:
    """Sample weights (a vector or a column) or class weights (classification: maybe missing a class)."""
    choice = rng.choice((None, None, None, "sample", "class" if spec["task"] != "regression" else "sample"))
    if choice == "sample":
        spec["sample_weight"] = rng.choice(("vector", "vector", "column"))
    elif choice == "class" and spec["fit"]["kind"] != "distributed":
        classes = 2 if spec["task"] == "binary" else spec["units"]
        spec["class_weight"] = {str(c): rng.choice((0.5, 1.0, 2.0, 0.0)) for c in range(classes)
                                if rng.random() < 0.85}
        if not spec["class_weight"]:
            spec["class_weight"] = {"0": 2.0}


def generate(rng: random.Random) -> Spec:
    """A random training setup whose first global batches split evenly over setup A's replicas (in its scope)."""
    while True:
        spec = _candidate(rng)
        if valid(spec):
            return spec


def _candidate(rng: random.Random) -> Spec:
    """One random setup (maybe with an uneven first batch)."""
    task = rng.choice(TASKS)
    loss = _loss(rng, task)
    units, activation, labels = _output(rng, task, loss)
    spec: Spec = {"area": "keras", "scope": rng.choice(("strategy", "strategy", "default")),
                  "seed": rng.randrange(10**6), "features": rng.choice((1, 2, 3, 4)), "task": task,
                  "hidden": [[rng.choice((1, 2, 3, 5)), rng.choice(ACTIVATIONS), rng.random() < 0.8]
                             for _ in range(rng.choice((0, 1, 1, 2)))],
                  "units": units, "activation": activation, "use_bias": rng.random() < 0.85, "labels": labels,
                  "init": rng.choice(("set_weights", "set_weights", "set_weights", "seeded", "seeded", "zeros", "ones")),
                  "input": rng.choice(("Input", "Input", "input_shape", "none")),
                  "loss": loss, "optimizer": _optimizer(rng),
                  "metrics": [_metric(rng, task) for _ in range(rng.choice((0, 1, 1, 2)))],
                  "weighted_metrics": [_metric(rng, task) for _ in range(rng.choice((0, 0, 1)))],
                  "n": rng.randint(1, 20), "epochs": rng.choice((1, 2, 2, 3)),
                  "initial_epoch": rng.choice((0, 0, 0, 0, 1, 2))}
    if spec["input"] == "none" and spec["init"] == "set_weights":
        spec["init"] = "ones"  # a model without an input shape has no weights to set before fit
    spec["dropout"] = rng.choice((None, 0.2, 0.5)) if spec["init"] == "seeded" else None
    if spec["init"] not in ("set_weights", "seeded"):
        # Constant weights make units symmetric: gradients nearly 0, whose rounding Adam and RMSprop amplify to the
        # size of the learning rate; outputs that tie, which accuracies break by rounding; class scores summing to
        # about 0, which a cross-entropy on probabilities divides by. Noise, not differences.
        if spec["optimizer"]["name"] != "sgd":
            spec["optimizer"] = {"name": "sgd", "form": "name"}
        for key in ("metrics", "weighted_metrics"):
            spec[key] = [m for m in spec[key] if "ccuracy" not in m[0] and "rossentropy" not in m[0]]
        if task in ("categorical", "sparse"):
            spec["activation"] = "softmax"
    spec["regularizers"] = [rng.choice((None, None, None, ["l1"], ["l2"], ["l1l2"], ["L2", 0.1], ["L1", 0.05]))
                            for _ in range(len(spec["hidden"]) + 1)]
    spec["activation_layer"] = spec["activation"] is not None and rng.random() < 0.3
    spec["dtypes"] = {"x": rng.choice(("float32", "float32", "float64")),
                      "y": rng.choice(("int64", "int32", "float32")) if task == "sparse"
                      else rng.choice(("float32", "float32", "float64"))}
    spec["fit"] = _batching(rng)
    if spec["scope"] == "default" and spec["fit"]["kind"] == "distributed":
        spec["fit"]["kind"] = "dataset"
        spec["fit"].setdefault("drop_remainder", False)
        spec["fit"].setdefault("repeat", False)
    spec["validation"] = _validation(rng, spec["fit"])
    _weighting(rng, spec)
    spec["early_stopping"] = _early_stopping(rng, spec) if rng.random() < 0.25 else None
    if spec["early_stopping"]:
        spec["epochs"] = rng.choice((3, 4, 5))
    spec["schedule"] = rng.choice((None, None, None, None, "halve", "by_epoch"))
    spec["evaluate_first"] = rng.random() < 0.15
    epochs = rng.choice((1, 2, 3))
    spec["refit"] = {"epochs": epochs, "initial_epoch": rng.choice((0, 0, epochs - 1))} if rng.random() < 0.2 \
        else None
    spec["evaluate"] = {"kind": rng.choice(("arrays", "dataset", "distributed")), "batch": rng.choice((None, 2, 4, 3)),
                        "return_dict": rng.random() < 0.3, "weighted": rng.random() < 0.3,
                        "steps": rng.choice((None, None, None, 1, 2, 9))}
    spec["predict"] = {"kind": rng.choice(("arrays", "dataset", "distributed")), "batch": rng.choice((None, 1, 2, 3)),
                       "steps": rng.choice((None, None, None, 1, 2, 9))}
    if spec["init"] == "set_weights":  # the same layers in a subclass of Model (built by a first call) or a graph
        spec["form"] = rng.choice(("sequential", "sequential", "sequential", "subclassed", "functional"))
    for key in ("evaluate", "predict"):
        if spec["scope"] == "default" and spec[key]["kind"] == "distributed":
            spec[key]["kind"] = "dataset"
    return spec


def _early_stopping(rng: random.Random, spec: Spec) -> Spec:
    """EarlyStopping's options: the loss, the validation loss or a metric named by a string, a mode, patience,
    min_delta, a baseline, restoring the best weights, a first epoch to watch."""
    monitors = ["loss", "val_loss", *(m[0] for m in spec["metrics"] if not m[0][0].isupper())]
    return {"monitor": rng.choice(monitors), "mode": rng.choice(("auto", "auto", "min", "max")),
            "patience": rng.choice((0, 0, 1, 2)), "min_delta": rng.choice((0, 0, 0.01, -0.01)),
            "baseline": rng.choice((None, None, None, 0.5)), "restore_best_weights": rng.random() < 0.5,
            "start_from_epoch": rng.choice((0, 0, 0, 1))}


def _first_batches(spec: Spec) -> list[int]:
    """The sizes of the first global batches of fit, of its validation and of evaluate (0: no data)."""
    n, fit, validation = spec["n"], spec["fit"], spec["validation"]
    train = n
    if validation and validation["kind"] == "split":
        train = int(math.floor(n * (1.0 - validation["fraction"])))
    steps = fit.get("steps_per_epoch")
    batch = fit["batch"] or (int(math.ceil(train / steps)) if steps and fit["kind"] == "arrays" else 32)
    sizes = [0 if fit.get("drop_remainder") and train < batch else min(batch, train)]
    if validation:
        val_n = n - train if validation["kind"] == "split" else validation["n"]
        val_batch = validation.get("batch") or validation.get("batch_size") or (
            fit["batch"] if fit["kind"] == "arrays" else None) or 32
        sizes.append(min(val_batch, val_n))
        if validation.get("steps"):  # Keras' cached validation iterator builds on the batch where a pass stopped
            sizes.append(val_n % val_batch)
    evaluate = spec["evaluate"]
    steps = evaluate.get("steps")
    sizes.append(min(evaluate["batch"] or (int(math.ceil(n / steps)) if steps and evaluate["kind"] == "arrays"
                                           else 32), n))
    return sizes


def valid(spec: Spec) -> bool:
    """False for specs TF refuses for the deliberate difference (an uneven first batch under the strategy)."""
    return spec["scope"] == "default" or all(size % REPLICAS == 0 for size in _first_batches(spec))


def shrink(spec: Spec) -> Iterator[Spec]:
    """Plainer setups: fewer hidden layers, metrics, epochs and options; no validation, weights or clipping."""
    candidates: list[Spec] = []
    for i in range(len(spec["hidden"])):
        fewer = {**spec, "hidden": spec["hidden"][:i] + spec["hidden"][i + 1:]}
        if "regularizers" in spec:
            fewer["regularizers"] = spec["regularizers"][:i] + spec["regularizers"][i + 1:]
        candidates.append(fewer)
    for key in ("metrics", "weighted_metrics"):
        for i in range(len(spec[key])):
            candidates.append({**spec, key: spec[key][:i] + spec[key][i + 1:]})
    for key in ("validation", "sample_weight", "class_weight"):
        if spec.get(key) is not None:
            candidates.append({k: v for k, v in spec.items() if k != key} if key != "validation"
                              else {**spec, "validation": None})
    if spec["epochs"] > 1:
        candidates.append({**spec, "epochs": spec["epochs"] - 1, "initial_epoch": min(spec["initial_epoch"],
                                                                                     spec["epochs"] - 1)})
    if spec["initial_epoch"]:
        candidates.append({**spec, "initial_epoch": 0})
    if spec["n"] > 1:
        candidates.append({**spec, "n": spec["n"] - 1})
    plain_opt = {k: v for k, v in spec["optimizer"].items()
                 if k not in ("clipnorm", "clipvalue", "global_clipnorm", "weight_decay", "use_ema", "ema_momentum",
                              "ema_overwrite_frequency")}
    if plain_opt != spec["optimizer"]:
        candidates.append({**spec, "optimizer": plain_opt})
    for key in ("early_stopping", "activation_layer", "schedule", "evaluate_first", "refit"):
        if spec.get(key):
            candidates.append({**spec, key: None})
    if any(spec.get("regularizers") or ()):
        candidates.append({**spec, "regularizers": [None] * len(spec["regularizers"])})
    if spec["fit"].get("steps_per_epoch") and not spec["fit"].get("repeat"):
        candidates.append({**spec, "fit": {k: v for k, v in spec["fit"].items() if k != "steps_per_epoch"}})
    yield from (c for c in candidates if valid(c))


# -- building ---------------------------------------------------------------------------------------------


def _frameworks(api: Any) -> tuple[Any, Any]:
    """The ``keras`` module (Keras 3 on TF, mirrorlab.tf.keras) and the ``data`` module of ``api``'s framework."""
    if api.framework == "tensorflow":
        import keras
    else:
        from mirrorlab.tf import keras
    return keras, api.data


def _examples(spec: Spec, n: int, offset: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` seeded inputs, labels of the spec's task and label shape, and positive sample weights (``offset``
    seeds validation data apart from training data)."""
    rng = np.random.RandomState(spec["seed"] + offset)
    x = rng.uniform(-2, 2, (n, spec["features"])).astype(np.float32)
    units, task = spec["units"], spec["task"]
    if task == "regression":
        y = rng.uniform(-1, 1, (n, units)).astype(np.float32)
    elif task == "binary":
        y = rng.randint(0, 2, (n, units)).astype(np.float32)
    else:
        classes = rng.randint(0, units, n)
        y = np.eye(units, dtype=np.float32)[classes] if task == "categorical" else classes.astype(np.int64)
    if spec["labels"] == "flat" and y.ndim == 2:
        y = y[:, 0]
    elif spec["labels"] == "column":
        y = y.reshape(n, 1)
    weights = rng.choice(np.array([0.0, 0.5, 1.0, 2.0], np.float32), n)
    dtypes = spec.get("dtypes", {"x": "float32", "y": y.dtype.name})
    return (x.astype(dtypes["x"]), y.astype(dtypes["y"]),
            weights.reshape(n, 1) if spec.get("sample_weight") == "column" else weights)


def _make_loss(keras: Any, loss: Spec) -> Any:
    """The compiled loss: a name, a class instance or a function."""
    kind = loss["kind"]
    if loss["form"] == "name":
        return loss["name"]
    if loss["form"] == "function":
        return getattr(keras.losses, LOSS_FUNCTIONS[kind])
    options = {k: loss[k] for k in ("reduction", "delta", "from_logits", "label_smoothing") if k in loss}
    return getattr(keras.losses, LOSS_CLASSES[kind])(**options)


def _make_optimizer(keras: Any, opt: Spec) -> Any:
    """The optimizer: its name or an instance with the spec's options."""
    if opt["form"] == "name":
        return opt["name"]
    cls = {"sgd": keras.optimizers.SGD, "adam": keras.optimizers.Adam, "adamw": keras.optimizers.AdamW,
           "rmsprop": keras.optimizers.RMSprop}
    return cls[opt["name"]](**{k: v for k, v in opt.items() if k not in ("name", "form")})


def _make_metric(keras: Any, metric: list[Any]) -> Any:
    """A metric name, or an instance of the named class with the spec's options."""
    name, options = metric
    return getattr(keras.metrics, name)(**options) if name[0].isupper() else name


def _make_regularizer(keras: Any, regularizer: list[Any] | None) -> Any:
    """A kernel regularizer: None, a name, or a class with its factor."""
    if regularizer is None or len(regularizer) == 1:
        return regularizer and regularizer[0]
    return getattr(keras.regularizers, regularizer[0])(regularizer[1])


def _model(keras: Any, s: Any, spec: Spec) -> Any:
    """The spec's Sequential model (or the same layers in a subclass of Model or a functional model), compiled (in ``s``'s scope or under the default strategy) and started from the
    spec's weights."""
    layers = []
    shape = (spec["features"],)
    if spec["input"] == "Input":
        layers.append(keras.Input(shape))
    separate = spec.get("activation_layer", False)
    stack = [*spec["hidden"], [spec["units"], None if separate else spec["activation"], spec["use_bias"]]]
    init = {} if spec["init"] in ("set_weights", "seeded") else {"kernel_initializer": spec["init"],
                                                                 "bias_initializer": spec["init"]}
    if spec["init"] == "seeded":  # Keras' default initializers and Dropout seeds come from Python's random
        keras.utils.set_random_seed(spec["seed"])
    regularizers = spec.get("regularizers", [None] * len(stack))
    for i, (units, activation, use_bias) in enumerate(stack):
        first = {"input_shape": shape} if i == 0 and spec["input"] == "input_shape" else {}
        layers.append(keras.layers.Dense(units, activation=activation, use_bias=use_bias, name=f"d{i}", **init,
                                         **first, kernel_regularizer=_make_regularizer(keras, regularizers[i])))
        if spec.get("dropout") and i == len(stack) - 2:  # before the output layer
            layers.append(keras.layers.Dropout(spec["dropout"], name="drop"))
    if separate:
        layers.append(keras.layers.Activation(spec["activation"], name="out"))
    with s.scope() if spec["scope"] == "strategy" else contextlib.nullcontext():
        if spec.get("form") == "subclassed":
            model = _subclassed(keras, layers[1:] if spec["input"] == "Input" else layers)
            model(np.zeros((1, *shape), np.float32))
        elif spec.get("form") == "functional":
            model = _functional(keras, shape, layers[1:] if spec["input"] == "Input" else layers)
        else:
            model = keras.Sequential(layers)
        if spec["init"] == "set_weights":
            rng = np.random.RandomState(spec["seed"])
            model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
        model.compile(optimizer=_make_optimizer(keras, spec["optimizer"]), loss=_make_loss(keras, spec["loss"]),
                      metrics=[_make_metric(keras, m) for m in spec["metrics"]],
                      weighted_metrics=[_make_metric(keras, m) for m in spec["weighted_metrics"]] or None)
    return model


def _functional(keras: Any, shape: tuple, layers: list[Any]) -> Any:
    """``keras.Model(inputs, outputs)`` over ``layers`` called in order on a ``keras.Input`` of ``shape``."""
    x = inputs = keras.Input(shape)
    for layer in layers:
        x = layer(x)
    return keras.Model(inputs, x)


def _subclassed(keras: Any, layers: list[Any]) -> Any:
    """A subclass of ``keras.Model`` applying ``layers`` (held in a list) in order, passing the training mode on."""

    class Stack(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.stack = layers

        def call(self, x: Any, training: Any = None) -> Any:
            for layer in self.stack:
                x = layer(x, training=training)
            return x
    return Stack()


def _dataset(data: Any, s: Any, arrays: tuple, batch: int, how: Spec) -> Any:
    """``arrays`` as a batched (repeated, distributed) dataset."""
    dataset = data.Dataset.from_tensor_slices(arrays).batch(batch, drop_remainder=how.get("drop_remainder", False))
    if how.get("repeat"):
        dataset = dataset.repeat()
    return s.experimental_distribute_dataset(dataset) if how["kind"] == "distributed" else dataset


SCHEDULES: dict[str, Callable[..., float]] = {"halve": lambda epoch, lr: lr * 0.5,
                                              "by_epoch": lambda epoch: 0.1 / (epoch + 1)}


def _fit(keras: Any, data: Any, s: Any, spec: Spec, model: Any, epochs: int, initial_epoch: int) -> Any:
    """fit's History (logs as float32, epochs) and callback hooks for the spec's data, validation, weights and
    callbacks."""
    x, y, w = _examples(spec, spec["n"], 0)
    fit, validation = spec["fit"], spec["validation"]
    weights = w if spec.get("sample_weight") else None
    class_weight = {int(c): v for c, v in spec["class_weight"].items()} if spec.get("class_weight") else None
    kwargs: Spec = {"epochs": epochs, "initial_epoch": initial_epoch, "verbose": 0,
                    "steps_per_epoch": fit.get("steps_per_epoch"), "class_weight": class_weight}
    if fit["kind"] == "arrays":
        kwargs.update(x=x, y=y, sample_weight=weights, batch_size=fit["batch"], shuffle=False)
    else:
        kwargs["x"] = _dataset(data, s, (x, y) if weights is None else (x, y, weights), fit["batch"], fit)
    if validation:
        if validation["kind"] == "split":
            kwargs["validation_split"] = validation["fraction"]
        else:
            xv, yv, wv = _examples(spec, validation["n"], 1)
            arrays = (xv, yv, wv) if validation["weights"] else (xv, yv)
            kwargs["validation_data"] = arrays if validation["kind"] == "arrays" else \
                data.Dataset.from_tensor_slices(arrays).batch(validation["batch"])
        for key in ("steps", "batch_size", "freq"):
            if key in validation and not (key == "batch_size" and validation["kind"] == "dataset"):
                kwargs[f"validation_{key}"] = validation[key]
    events: list[str] = []
    callbacks = [_recorder(keras, events)]
    if spec.get("early_stopping"):
        callbacks.append(keras.callbacks.EarlyStopping(**spec["early_stopping"]))
    if spec.get("schedule"):
        callbacks.append(keras.callbacks.LearningRateScheduler(SCHEDULES[spec["schedule"]]))
    history = model.fit(**kwargs, callbacks=callbacks)
    return {"history": {k: [np.float32(v) for v in values] for k, values in sorted(history.history.items())},
            "epoch": list(history.epoch), "events": events}


def _recorder(keras: Any, events: list[str]) -> Any:
    """A callback writing each hook fit calls (epoch and batch numbers, the epoch logs' keys) to ``events``."""
    hooks = {"on_epoch_begin": lambda self, epoch, logs=None: events.append(f"epoch {epoch}"),
             "on_train_batch_begin": lambda self, batch, logs=None: events.append(f"batch {batch}"),
             "on_train_batch_end": lambda self, batch, logs=None: events.append(f"end {batch}"),
             "on_epoch_end": lambda self, epoch, logs=None: events.append(f"epoch end {sorted(logs or {})}")}
    return type("Recorder", (keras.callbacks.Callback,), hooks)()


def _evaluate(data: Any, s: Any, spec: Spec, model: Any) -> Any:
    """evaluate on the training examples (weighted or not) as arrays or a (distributed) dataset; its results as
    float32."""
    x, y, w = _examples(spec, spec["n"], 0)
    how = spec["evaluate"]
    weights = w if how["weighted"] else None
    if how["kind"] == "arrays":
        result = model.evaluate(x, y, sample_weight=weights, batch_size=how["batch"], verbose=0,
                                return_dict=how["return_dict"], steps=how.get("steps"))
    else:
        arrays = (x, y) if weights is None else (x, y, weights)
        dataset = data.Dataset.from_tensor_slices(arrays).batch(how["batch"] or 32)
        result = model.evaluate(s.experimental_distribute_dataset(dataset) if how["kind"] == "distributed"
                                else dataset, verbose=0, return_dict=how["return_dict"], steps=how.get("steps"))
    if isinstance(result, dict):
        return {k: np.float32(v) for k, v in sorted(result.items())}
    return [np.float32(v) for v in result] if isinstance(result, list) else np.float32(result)


def _predict(data: Any, s: Any, spec: Spec, model: Any) -> Any:
    """predict on the training inputs as arrays, a dataset or a distributed dataset."""
    x = _examples(spec, spec["n"], 0)[0]
    how = spec["predict"]
    if how["kind"] == "arrays":
        return model.predict(x, batch_size=how["batch"], verbose=0, steps=how.get("steps"))
    dataset = data.Dataset.from_tensor_slices(x).batch(how["batch"] or 32)
    return model.predict(s.experimental_distribute_dataset(dataset) if how["kind"] == "distributed" else dataset,
                         verbose=0, steps=how.get("steps"))


def _reloaded(keras: Any, s: Any, spec: Spec, model: Any) -> dict[str, Any]:
    """The model saved to a ``.keras`` file and loaded back (in the spec's scope): whether it predicts as the model
    does, its compile config and its optimizer's step count."""
    x = _examples(spec, spec["n"], 0)[0]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        model.save(path)
        with s.scope() if spec["scope"] == "strategy" else contextlib.nullcontext():
            loaded = keras.models.load_model(path)
    optimizer = getattr(loaded, "optimizer", None)
    return {"same_predictions": bool(np.array_equal(model.predict(x, verbose=0), loaded.predict(x, verbose=0))),
            "compile_config": _stable(loaded.get_compile_config()),
            "iterations": None if optimizer is None else int(np.asarray(optimizer.iterations))}


def build(spec: Spec) -> Callable[[Any, Any], dict[str, Any]]:
    """The case function of ``spec``: build and compile, fit, then the weights, evaluate and predict (each an
    outcome: a value or the error it raised)."""
    def fn(api: Any, s: Any) -> dict[str, Any]:
        keras, data = _frameworks(api)
        keras.backend.clear_session()  # automatic names (in the configs) from 1 again
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = outcome(lambda: _model(keras, s, spec))
            if isinstance(model, Exception):
                return {"model": model}
            result: dict[str, Any] = {}

            def run(label: str, stage: Callable[[], Any]) -> None:
                value = outcome(stage)
                if isinstance(value, Exception) and spec["scope"] == "default" and any(
                        isinstance(earlier, Exception) for earlier in result.values()):
                    # TF's accident: after a step failed to trace, the next trace can fail on TF's own state
                    # ("Attr 'Toutput_types' of 'OptionalFromValue' Op passed list of length 0..."): the class counts.
                    value = type(type(value).__name__, (Exception,), {})("")
                result[label] = value
            if spec.get("evaluate_first"):
                run("evaluate_first", lambda: _evaluate(data, s, spec, model))
            run("fit", lambda: _fit(keras, data, s, spec, model, spec["epochs"], spec["initial_epoch"]))
            if isinstance(result["fit"], Exception) and spec["input"] == "none" and spec["scope"] == "default":
                # TF's accident: a first step that fails to trace leaves the weights it built empty (shape (0,)) and
                # the model unusable; mirrorlab's keep their shapes.
                return result
            if spec.get("refit"):
                run("refit", lambda: _fit(keras, data, s, spec, model, **spec["refit"]))
            if spec["optimizer"].get("weight_decay") and any(
                    type(v).__name__ == "InvalidArgumentError" for v in result.values()):
                # TF's accident: a step failing as it runs may have applied the weight decay already (an op of the
                # step's graph that does not wait for the loss).
                return result
            result["weights"] = outcome(model.get_weights)
            run("evaluate", lambda: _evaluate(data, s, spec, model))
            run("predict", lambda: _predict(data, s, spec, model))
            if spec.get("form") != "subclassed":  # (a subclass of Model has no config Keras can write)
                result["config"] = outcome(lambda: _stable(keras.saving.serialize_keras_object(model)))
                if not any(isinstance(result.get(stage), Exception) for stage in ("fit", "refit")):
                    # (TF's failed steps may have moved its state: a step failing in its loss still counts itself)
                    result["reloaded"] = outcome(lambda: _reloaded(keras, s, spec, model))
            return result
    return fn
