"""Keras conformance cases: losses, metrics and ``fit`` of ``mirrorlab.tf.keras`` against Keras 3 on TF 2.21.

Each case is ``fn(env) -> {label: value}`` written once against ``KerasEnv`` (the ``keras`` module, a ``data``
module, and a MirroredStrategy over 2 CPUs), so the same code runs on TF (record_keras_golden.py writes
``golden/keras.json``) and on mirrorlab (test_keras_conformance.py compares without TF). A value is normalized
like the strategy cases: arrays as dtype/shape/value, exceptions as class and first message line.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .adapters import _array_json, error_json

__all__ = ["KERAS_CASES", "KerasEnv", "run_case"]

Result = dict[str, Any]
KERAS_CASES: dict[str, Callable[["KerasEnv"], Result]] = {}

Y_PRED = np.array([[0.2, 0.8], [0.6, 0.4], [0.1, 0.9], [0.3, 0.7]], np.float32)
LABELS = np.array([1, 0, 0, 1])
WEIGHT_SHAPES = {"vector": np.array([1.0, 0.0, 2.0, 1.0]), "column": np.array([[1.0], [0.0], [2.0], [1.0]]),
                 "scalar": 2.0, "matrix": np.array([[1.0, 2.0], [0.0, 1.0], [2.0, 2.0], [1.0, 0.5]])}
REDUCTIONS = ("sum_over_batch_size", "sum", "none", "mean_with_sample_weight")


@dataclass
class KerasEnv:
    """What a case may use: ``keras``, ``data`` and ``train`` (TF's or mirrorlab's) and a 2-replica ``strategy``."""

    keras: Any
    data: Any
    strategy: Any
    get_replica_context: Callable[[], Any]
    train: Any
    tf: Any  # the top-level module (tensorflow or mirrorlab): GradientTape, nn, add_n, ReduceOp

    def local(self, value: Any) -> list[Any]:
        """The strategy's local results of ``value`` as NumPy arrays."""
        return [np.asarray(v) for v in self.strategy.experimental_local_results(value)]


def case(fn: Callable[[KerasEnv], Result]) -> Callable[[KerasEnv], Result]:
    """Register ``fn`` under its name."""
    KERAS_CASES[fn.__name__] = fn
    return fn


def attempt(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the exception it raised."""
    try:
        return fn()
    except Exception as error:  # noqa: BLE001 (an error is a result here)
        return error


def warned(fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``attempt(fn)`` and the messages of the warnings it emitted (recorded, so none reaches the test output)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = attempt(fn)
    return result, [str(warning.message) for warning in caught]


def normalize(value: Any) -> Any:
    """JSON form of a case's value (object reprs in messages, which name each framework's classes and
    addresses, become ``<object>``)."""
    if isinstance(value, BaseException):
        error = error_json(value)
        return {**error, "message": re.sub(r"<[\w.]+ object at 0x[0-9a-f]+>", "<object>", error["message"])}
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return _array_json(np.asarray(value))


def run_case(name: str, env: KerasEnv) -> Result:
    """The normalized result of case ``name``."""
    return normalize(attempt(lambda: KERAS_CASES[name](env)))


# -- losses -------------------------------------------------------------------------------------------


@case
def loss_reductions_and_dtypes(env: KerasEnv) -> Result:
    """Each reduction on float64 and float32 inputs (Keras computes in float32) and on one example."""
    L = env.keras.losses
    out: Result = {}
    for red in REDUCTIONS:
        out[f"mse64|{red}"] = attempt(lambda: L.MeanSquaredError(reduction=red)(Y_PRED.astype(np.float64) * 0 + 1,
                                                                                  Y_PRED.astype(np.float64)))
        out[f"scce64|{red}"] = attempt(lambda: L.SparseCategoricalCrossentropy(reduction=red)(
            LABELS, Y_PRED.astype(np.float64)))
        out[f"scce_one|{red}"] = attempt(lambda: L.SparseCategoricalCrossentropy(reduction=red)(LABELS[:1], Y_PRED[:1]))
        out[f"mse_vector|{red}"] = attempt(lambda: L.MeanSquaredError(reduction=red)(
            np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0], np.float32)))
        out[f"mse_scalar|{red}"] = attempt(lambda: L.MeanSquaredError(reduction=red)(np.float32(1.0), np.float32(3.0)))
        out[f"mse_empty|{red}"] = attempt(lambda: L.MeanSquaredError(reduction=red)(np.zeros((0, 2)), np.zeros((0, 2))))
        out[f"int_inputs|{red}"] = attempt(lambda: L.MeanSquaredError(reduction=red)(np.array([[1, 2]]),
                                                                                       np.array([[2, 4]])))
    return out


@case
def loss_sample_weights(env: KerasEnv) -> Result:
    """sample_weight as a vector, a column, a scalar and a full matrix under each reduction."""
    L = env.keras.losses
    out: Result = {}
    for red in REDUCTIONS:
        for shape, weight in WEIGHT_SHAPES.items():
            out[f"mse|{shape}|{red}"] = attempt(lambda: L.MeanSquaredError(reduction=red)(
                Y_PRED * 0 + 1, Y_PRED, sample_weight=weight))
            out[f"scce|{shape}|{red}"] = attempt(lambda: L.SparseCategoricalCrossentropy(reduction=red)(
                LABELS, Y_PRED, sample_weight=weight))
            out[f"mae|{shape}|{red}"] = attempt(lambda: L.MeanAbsoluteError(reduction=red)(
                Y_PRED * 0 + 1, Y_PRED, sample_weight=weight))
    out["rank3_weights"] = attempt(lambda: L.MeanSquaredError()(np.ones((2, 3, 4)), np.zeros((2, 3, 4)),
                                                                sample_weight=np.array([1.0, 0.0])))
    return out


@case
def loss_shapes(env: KerasEnv) -> Result:
    """Keras' rank matching of y_true and y_pred, and the errors for shapes that do not fit."""
    L = env.keras.losses
    mse = L.MeanSquaredError(reduction="none")
    return {
        "pred_vector_true_column": attempt(lambda: mse(np.array([[1.0], [2.0]]), np.array([1.0, 1.0]))),
        "pred_column_true_vector": attempt(lambda: mse(np.array([1.0, 2.0]), np.array([[1.0], [1.0]]))),
        "true_broadcasts": attempt(lambda: mse(np.array([1.0, 2.0]), np.array([[1.0, 1.0], [0.0, 0.0], [3.0, 3.0]]))),
        "true_does_not_fit": attempt(lambda: mse(np.array([1.0, 2.0, 3.0]),
                                                 np.array([[1.0, 1.0], [0.0, 0.0], [3.0, 3.0]]))),
        "rank3": attempt(lambda: L.MeanSquaredError()(np.ones((2, 3, 4)), np.zeros((2, 3, 4)))),
        "scce_column_labels": attempt(lambda: L.SparseCategoricalCrossentropy()(LABELS[:, None], Y_PRED)),
        "scce_rank_mismatch": attempt(lambda: L.SparseCategoricalCrossentropy()(np.array([[1, 0], [0, 1]]),
                                                                               Y_PRED[:2])),
        "scce_label_out_of_range": attempt(lambda: L.SparseCategoricalCrossentropy()(np.array([2]), Y_PRED[:1])),
        "scce_logits": attempt(lambda: L.SparseCategoricalCrossentropy(from_logits=True)(LABELS, Y_PRED * 5)),
        # Keras lists the allowed reductions as a set, in hash order: compare the class only.
        "bad_reduction": type(attempt(lambda: L.MeanSquaredError(reduction="avg"))).__name__,
    }


@case
def loss_functions_and_identifiers(env: KerasEnv) -> Result:
    """The per-example functions keep their input dtype; ``losses.get`` resolves names, aliases and classes."""
    L = env.keras.losses
    out: Result = {
        "mse_fn64": L.mean_squared_error(np.array([[1.0, 2.0]]), np.array([[2.0, 4.0]], np.float64)),
        "mae_fn": L.mean_absolute_error(np.array([[1.0, 2.0]]), np.array([[2.0, 5.0]], np.float32)),
        "scce_fn64": L.sparse_categorical_crossentropy(LABELS, Y_PRED.astype(np.float64)),
        "scce_logits_fn": L.sparse_categorical_crossentropy(LABELS, Y_PRED, from_logits=True),
        "names": [L.MeanSquaredError().name, L.MeanAbsoluteError().name, L.SparseCategoricalCrossentropy().name],
    }
    for name in ("mse", "MSE", "mean_squared_error", "mae", "MAE", "mean_absolute_error", "MeanSquaredError",
                 "MeanAbsoluteError", "sparse_categorical_crossentropy"):
        out[f"get|{name}"] = attempt(lambda: L.get(name)(np.array([[1, 0]]), np.array([[0.7, 0.3]], np.float32)))
    out["get|unknown"] = attempt(lambda: L.get("no_such_loss"))
    return out


@case
def loss_in_strategy(env: KerasEnv) -> Result:
    """Inside the strategy (scope or replica), mean reductions are divided by the number of replicas."""
    L, s = env.keras.losses, env.strategy
    out: Result = {}
    for red in REDUCTIONS:
        def in_scope(red: str = red) -> Any:
            with s.scope():
                return L.SparseCategoricalCrossentropy(reduction=red)(LABELS, Y_PRED)

        def in_replicas(red: str = red) -> Any:
            weight = np.array([1.0, 2.0, 0.0, 1.0])
            return env.local(s.run(lambda: L.SparseCategoricalCrossentropy(reduction=red)(LABELS, Y_PRED, weight)))

        out[f"scope|{red}"] = attempt(in_scope)
        out[f"run|{red}"] = attempt(in_replicas)
    return out


BINARY_TRUE = np.array([[1.0], [0.0], [1.0], [0.0]])
BINARY_PRED = np.array([[0.9], [0.2], [0.4], [1.0]], np.float32)  # 1.0 is clipped
ONE_HOT = np.eye(2)[LABELS]


def _by_reduction(loss: Any, y_true: np.ndarray, y_pred: np.ndarray, weight: np.ndarray) -> Result:
    """A cross-entropy class on probabilities, on logits (``8 * y_pred - 4``) and weighted, under each reduction."""
    out: Result = {}
    for red in REDUCTIONS:
        out[f"probs|{red}"] = attempt(lambda: loss(reduction=red)(y_true, y_pred))
        out[f"logits|{red}"] = attempt(lambda: loss(from_logits=True, reduction=red)(y_true, y_pred * 8 - 4))
        out[f"weighted|{red}"] = attempt(lambda: loss(reduction=red)(y_true, y_pred, sample_weight=weight))
    return out


@case
def loss_binary_crossentropy(env: KerasEnv) -> Result:
    """BinaryCrossentropy from probabilities and logits, label smoothing, axis, rank matching, shape errors."""
    L = env.keras.losses
    out = _by_reduction(L.BinaryCrossentropy, BINARY_TRUE, BINARY_PRED, np.array([1.0, 0.0, 2.0, 1.0]))
    bce = L.BinaryCrossentropy(reduction="none")
    out.update({
        "smoothing": attempt(lambda: L.BinaryCrossentropy(label_smoothing=0.2, reduction="none")(BINARY_TRUE, BINARY_PRED)),
        "smoothing_logits": attempt(lambda: L.BinaryCrossentropy(from_logits=True, label_smoothing=0.1)(
            BINARY_TRUE, BINARY_PRED * 8 - 4)),
        "multilabel": attempt(lambda: bce(np.array([[1, 0], [0, 0], [1, 1], [0, 1]]), Y_PRED)),
        "extreme_logits": attempt(lambda: L.BinaryCrossentropy(from_logits=True, reduction="none")(
            BINARY_TRUE, np.array([[100.0], [-100.0], [0.0], [30.0]], np.float32))),
        "vector_true_column_pred": attempt(lambda: bce(BINARY_TRUE[:, 0], BINARY_PRED)),
        "column_true_vector_pred": attempt(lambda: bce(BINARY_TRUE, BINARY_PRED[:, 0])),
        "vectors": attempt(lambda: bce(BINARY_TRUE[:, 0], BINARY_PRED[:, 0])),
        "axis0": attempt(lambda: L.BinaryCrossentropy(axis=0, reduction="none")(Y_PRED * 0 + 1, Y_PRED)),
        "shape_mismatch": attempt(lambda: bce(np.ones((4, 3)), Y_PRED)),
        "rank_mismatch": attempt(lambda: bce(np.ones((4, 2, 2)), Y_PRED)),
        "fn_rank_mismatch": attempt(lambda: L.binary_crossentropy(BINARY_TRUE[:, 0], BINARY_PRED)),
        "fn64": attempt(lambda: L.binary_crossentropy(BINARY_TRUE, BINARY_PRED.astype(np.float64))),
        "fn_logits_smoothing": attempt(lambda: L.binary_crossentropy(BINARY_TRUE, BINARY_PRED, from_logits=True,
                                                                     label_smoothing=0.1)),
        "int_labels": attempt(lambda: bce(np.array([[1], [0], [1], [0]]), BINARY_PRED)),
        "name": L.BinaryCrossentropy().name,
    })
    return out


@case
def loss_categorical_crossentropy(env: KerasEnv) -> Result:
    """CategoricalCrossentropy from probabilities (renormalised, clipped) and logits, smoothing, axis, errors."""
    L = env.keras.losses
    out = _by_reduction(L.CategoricalCrossentropy, ONE_HOT, Y_PRED, np.array([[1.0], [0.0], [2.0], [1.0]]))
    cce = L.CategoricalCrossentropy(reduction="none")
    probs3 = np.random.RandomState(1).rand(2, 2, 3).astype(np.float32)
    out.update({
        "unnormalized": attempt(lambda: cce(ONE_HOT, Y_PRED * 3)),
        "zero_probability": attempt(lambda: cce(ONE_HOT, np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
                                                                  np.float32))),
        "soft_labels": attempt(lambda: cce(np.array([[0.3, 0.7], [0.5, 0.5], [1.0, 0.0], [0.2, 0.8]]), Y_PRED)),
        "smoothing": attempt(lambda: L.CategoricalCrossentropy(label_smoothing=0.1, reduction="none")(ONE_HOT, Y_PRED)),
        "smoothing_logits": attempt(lambda: L.CategoricalCrossentropy(from_logits=True, label_smoothing=0.3)(
            ONE_HOT, Y_PRED * 5)),
        "rank3": attempt(lambda: cce(np.eye(3)[[[0, 1], [2, 2]]], probs3)),
        "column": attempt(lambda: cce(np.ones((4, 1)), np.full((4, 1), 0.5, np.float32))),
        "integer_labels": attempt(lambda: cce(LABELS, Y_PRED)),
        "column_labels": attempt(lambda: cce(LABELS[:, None], Y_PRED)),
        "shape_mismatch": attempt(lambda: cce(np.eye(3)[[0, 1, 2, 0]], Y_PRED)),
        "fn_scalar": attempt(lambda: L.categorical_crossentropy(np.float32(1.0), np.float32(1.0))),
        "axis0": attempt(lambda: L.CategoricalCrossentropy(axis=0, reduction="none")(ONE_HOT, Y_PRED)),
        "fn_bool_axis": attempt(lambda: L.categorical_crossentropy(ONE_HOT, Y_PRED, axis=True)),
        "fn64": attempt(lambda: L.categorical_crossentropy(ONE_HOT, Y_PRED.astype(np.float64))),
        "fn_logits_smoothing": attempt(lambda: L.categorical_crossentropy(ONE_HOT, Y_PRED, from_logits=True,
                                                                          label_smoothing=0.2)),
        "name": L.CategoricalCrossentropy().name,
    })
    return out


@case
def loss_huber(env: KerasEnv) -> Result:
    """Huber with several deltas, weights and reductions, its rank matching, function form and name."""
    L = env.keras.losses
    y_true = np.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5], [-3.0, 0.0]])
    out: Result = {}
    for delta in (1.0, 0.5, 2.5):
        for red in ("sum_over_batch_size", "none"):
            out[f"{delta}|{red}"] = attempt(lambda: L.Huber(delta=delta, reduction=red)(y_true, Y_PRED))
    out.update({
        "weighted": attempt(lambda: L.Huber()(y_true, Y_PRED, sample_weight=np.array([1.0, 0.0, 2.0, 1.0]))),
        "vector_true_column_pred": attempt(lambda: L.Huber(reduction="none")(np.array([0.0, 2.0]),
                                                                             np.array([[1.5], [0.5]], np.float32))),
        "fn": attempt(lambda: L.huber(y_true, Y_PRED.astype(np.float64), delta=0.3)),
        "name": L.Huber().name,
    })
    return out


@case
def loss_identifiers_of_crossentropies(env: KerasEnv) -> Result:
    """``losses.get`` on the cross-entropy and Huber names, aliases and class names."""
    L = env.keras.losses
    out: Result = {}
    for name in ("binary_crossentropy", "bce", "BCE", "BinaryCrossentropy", "categorical_crossentropy",
                 "CategoricalCrossentropy", "cce", "huber", "Huber", "huber_loss", "crossentropy"):
        out[name] = attempt(lambda: L.get(name)(np.array([[1.0, 0.0]]), np.array([[0.7, 0.3]], np.float32)))
    return out


def _activated_models(env: KerasEnv) -> tuple[Any, Any]:
    """A 2-input model ending in a sigmoid unit and one ending in a 3-way softmax, with large fixed weights."""
    k = env.keras
    sigmoid = k.Sequential([k.Input((2,)), k.layers.Dense(1, activation="sigmoid")])
    sigmoid.set_weights([np.array([[6.0], [6.0]], np.float32), np.array([0.5], np.float32)])
    softmax = k.Sequential([k.Input((2,)), k.layers.Dense(3, activation="softmax")])
    softmax.set_weights([np.array([[9.0, -4.0, 1.0], [3.0, 7.0, -8.0]], np.float32), np.array([0.1, 0.0, -0.1], np.float32)])
    return sigmoid, softmax


ACTIVATED_X = np.array([[3.0, 2.0], [-2.5, -3.0], [0.1, 0.2], [4.0, -4.0]], np.float32)
LABELS3 = np.array([0, 1, 2, 1])


@case
def loss_on_activation_outputs(env: KerasEnv) -> Result:
    """A sigmoid or softmax output carries its logits: cross-entropies use them (no clipping), anything computed
    from the output (a copy, a product) does not."""
    k = env.keras
    L = k.losses
    sigmoid, softmax = _activated_models(env)
    p, q = sigmoid(ACTIVATED_X), softmax(ACTIVATED_X)
    onehot = np.eye(3)[LABELS3]

    def metric(p: Any) -> Any:
        m = k.metrics.BinaryCrossentropy()
        m.update_state(BINARY_TRUE, p)
        return m.result()
    return {
        "bce": attempt(lambda: L.BinaryCrossentropy(reduction="none")(BINARY_TRUE, p)),
        "bce_copy": attempt(lambda: L.BinaryCrossentropy(reduction="none")(BINARY_TRUE, np.array(p))),
        "bce_scaled": attempt(lambda: L.BinaryCrossentropy(reduction="none")(BINARY_TRUE, p * 1.0)),
        "bce_from_logits_flag": attempt(lambda: L.BinaryCrossentropy(from_logits=True, reduction="none")(BINARY_TRUE, p)),
        "bce_fn": attempt(lambda: L.binary_crossentropy(BINARY_TRUE, p)),
        "bce_smoothing": attempt(lambda: L.BinaryCrossentropy(label_smoothing=0.2)(BINARY_TRUE, p)),
        "bce_vector_labels": attempt(lambda: L.BinaryCrossentropy()(BINARY_TRUE[:, 0], p)),
        "cce": attempt(lambda: L.CategoricalCrossentropy(reduction="none")(onehot, q)),
        "cce_copy": attempt(lambda: L.CategoricalCrossentropy(reduction="none")(onehot, np.array(q))),
        "scce": attempt(lambda: L.SparseCategoricalCrossentropy(reduction="none")(LABELS3, q)),
        "scce_fn": attempt(lambda: L.sparse_categorical_crossentropy(LABELS3, q)),
        "bce_on_softmax": attempt(lambda: L.BinaryCrossentropy(reduction="none")(onehot, q)),
        "mse": attempt(lambda: L.MeanSquaredError(reduction="none")(BINARY_TRUE, p)),
        "layer_output": attempt(lambda: L.BinaryCrossentropy(reduction="none")(BINARY_TRUE, sigmoid.layers[0](ACTIVATED_X))),
        "metric": attempt(lambda: metric(p)),
        "outputs": [p, q],
    }


@case
def loss_gradients_of_crossentropies(env: KerasEnv) -> Result:
    """Gradients of BCE, CCE and Huber w.r.t. the weights on a tape: through a saturated sigmoid and softmax
    (from their logits), from logits, and with label smoothing."""
    k, tf = env.keras, env.tf
    L = k.losses
    sigmoid, softmax = _activated_models(env)
    linear = k.Sequential([k.Input((2,)), k.layers.Dense(2)])
    linear.set_weights([np.array([[0.5, -1.0], [2.0, 0.3]], np.float32), np.array([0.2, -0.1], np.float32)])
    onehot = np.eye(3)[LABELS3]

    def grads(model: Any, loss: Callable[[Any], Any]) -> list[Any]:
        with tf.GradientTape() as tape:
            value = loss(model(ACTIVATED_X))
        return [value, tape.gradient(value, model.trainable_variables)]
    return {
        "bce_sigmoid": attempt(lambda: grads(sigmoid, lambda p: L.BinaryCrossentropy()(BINARY_TRUE, p))),
        "bce_sigmoid_smoothing": attempt(lambda: grads(sigmoid, lambda p: L.BinaryCrossentropy(label_smoothing=0.3)(
            BINARY_TRUE, p))),
        "cce_softmax": attempt(lambda: grads(softmax, lambda q: L.CategoricalCrossentropy()(onehot, q))),
        "scce_softmax": attempt(lambda: grads(softmax, lambda q: L.SparseCategoricalCrossentropy()(LABELS3, q))),
        "bce_logits": attempt(lambda: grads(linear, lambda z: L.BinaryCrossentropy(from_logits=True)(
            np.array([[1, 0], [0, 0], [1, 1], [0, 1]]), z))),
        "bce_probs": attempt(lambda: grads(linear, lambda z: L.BinaryCrossentropy(label_smoothing=0.1)(
            np.array([[1, 0], [0, 0], [1, 1], [0, 1]]), z * 0.1 + 0.5))),
        "cce_logits_smoothing": attempt(lambda: grads(linear, lambda z: L.CategoricalCrossentropy(
            from_logits=True, label_smoothing=0.2)(np.eye(2)[LABELS], z))),
        "cce_probs": attempt(lambda: grads(linear, lambda z: L.CategoricalCrossentropy()(np.eye(2)[LABELS],
                                                                                        z * 0.1 + 0.5))),
        "huber": attempt(lambda: grads(linear, lambda z: L.Huber(delta=0.7)(np.array([[1.0, 0.0]]), z))),
    }


# -- metrics ------------------------------------------------------------------------------------------


def _updated(metric: Any, *updates: tuple) -> list[Any]:
    """``metric`` after ``update_state(*args)`` for each update: its result and its state variables."""
    for args in updates:
        metric.update_state(*args[:-1], sample_weight=args[-1])
    return [metric.result(), *[np.asarray(v) for v in metric.variables]]


@case
def metric_mean(env: KerasEnv) -> Result:
    """Mean counts one per sample: values of higher rank are averaged down to the weights' rank first."""
    M = env.keras.metrics
    grid = np.array([[1.0, 2.0], [3.0, 4.0]])
    return {
        "scalars": attempt(lambda: _updated(M.Mean(), (3.0, None), (np.float32(5.0), None))),
        "vector_and_scalar": attempt(lambda: _updated(M.Mean(), (np.array([1.0, 2.0, 3.0]), None), (5.0, None))),
        "matrix": attempt(lambda: _updated(M.Mean(), (grid, None))),
        "matrix_vector_weights": attempt(lambda: _updated(M.Mean(), (grid, np.array([1.0, 0.0])))),
        "matrix_matrix_weights": attempt(lambda: _updated(M.Mean(), (grid, np.array([[1.0, 0.0], [2.0, 2.0]])))),
        "matrix_column_weights": attempt(lambda: _updated(M.Mean(), (grid, np.array([[1.0], [3.0]])))),
        "rank3_vector_weights": attempt(lambda: _updated(M.Mean(), (np.arange(8.0).reshape(2, 2, 2),
                                                                     np.array([1.0, 3.0])))),
        "zero_weights": attempt(lambda: _updated(M.Mean(), (np.array([1.0, 2.0, 3.0]), np.zeros(3)))),
        "scalar_weight": attempt(lambda: _updated(M.Mean(), (np.array([1.0, 3.0]), 2.0))),
        "empty": attempt(lambda: _updated(M.Mean(), (np.zeros((0,)), None))),
        "float64": attempt(lambda: _updated(M.Mean(dtype="float64"), (np.array([1.0, 2.0]), None))),
        "ints": attempt(lambda: _updated(M.Mean(), (np.array([1, 2]), None))),
        "names": [M.Mean().name, M.SparseCategoricalAccuracy().name],
    }


@case
def metric_sparse_categorical_accuracy(env: KerasEnv) -> Result:
    """Labels as a vector or a column, float labels, weights, rank-3 predictions, an empty batch."""
    M = env.keras.metrics
    probs3 = np.random.RandomState(0).rand(2, 2, 3)
    return {
        "vector": attempt(lambda: _updated(M.SparseCategoricalAccuracy(), (LABELS, Y_PRED, None))),
        "column": attempt(lambda: _updated(M.SparseCategoricalAccuracy(), (LABELS[:, None], Y_PRED, None))),
        "weighted": attempt(lambda: _updated(M.SparseCategoricalAccuracy(),
                                             (LABELS, Y_PRED, np.array([1.0, 2.0, 0.0, 1.0])))),
        "column_weighted": attempt(lambda: _updated(M.SparseCategoricalAccuracy(),
                                                    (LABELS[:, None], Y_PRED, np.array([[1.0], [2.0], [0.0], [1.0]])))),
        "rank3": attempt(lambda: _updated(M.SparseCategoricalAccuracy(), (np.array([[1, 0], [0, 0]]), probs3, None))),
        "float_labels": attempt(lambda: _updated(M.SparseCategoricalAccuracy(), (LABELS.astype(float), Y_PRED, None))),
        "empty": attempt(lambda: _updated(M.SparseCategoricalAccuracy(),
                                          (np.zeros((0,), np.int64), np.zeros((0, 3), np.float32), None))),
        "function": attempt(lambda: M.sparse_categorical_accuracy(LABELS[:, None], Y_PRED)),
    }


@case
def metric_in_strategy(env: KerasEnv) -> Result:
    """Metrics made in the scope: updates in every replica sum over replicas; an update in cross-replica context
    (Keras adds by assigning ``var + value``) splits the new total over the replicas."""
    M, s = env.keras.metrics, env.strategy

    def in_replicas() -> list[Any]:
        with s.scope():
            mean, accuracy = M.Mean(), M.SparseCategoricalAccuracy()

        def step() -> None:
            mean.update_state(np.array([1.0, 2.0, 3.0]))
            accuracy.update_state(LABELS, Y_PRED)
        s.run(step)
        return [mean.result(), accuracy.result(), np.asarray(mean.count), np.asarray(accuracy.total)]

    def cross_replica() -> list[Any]:
        with s.scope():
            mean = M.Mean()
        mean.update_state(np.array([1.0, 2.0, 3.0]), sample_weight=np.array([1.0, 1.0, 0.0]))
        mean.update_state(4.0)
        result = [mean.result(), np.asarray(mean.total), np.asarray(mean.count)]
        mean.reset_state()
        return [*result, mean.result(), np.asarray(mean.count)]

    return {"replicas": attempt(in_replicas), "cross_replica": attempt(cross_replica)}


SCORES = np.array([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4], [0.2, 0.2, 0.6], [0.7, 0.2, 0.1]], np.float32)
SCORE_LABELS = np.array([1, 0, 1, 2])


@case
def metric_accuracies(env: KerasEnv) -> Result:
    """Accuracy, BinaryAccuracy, CategoricalAccuracy, (Sparse)TopKCategoricalAccuracy and Sum: values, label shapes,
    thresholds, ties, weights, their functions and names."""
    M = env.keras.metrics
    weight = np.array([1.0, 2.0, 0.0, 1.0])
    binary_pred = np.array([[0.9], [0.5], [0.3], [0.7]], np.float32)
    tied = np.array([[0.2, 0.4, 0.4], [np.nan, 0.1, 0.2], [0.3, 0.3, 0.3], [0.1, 0.9, -np.inf]], np.float32)
    return {
        "accuracy": attempt(lambda: _updated(M.Accuracy(), (np.array([1, 2, 3, 4]), np.array([1.0, 2.5, 3.0, 0.0]), None))),
        "accuracy_column": attempt(lambda: _updated(M.Accuracy(), (np.array([[1], [2]]), np.array([1.0, 2.0]), weight[:2]))),
        "binary": attempt(lambda: _updated(M.BinaryAccuracy(), (BINARY_TRUE, binary_pred, None))),
        "binary_vector_labels": attempt(lambda: _updated(M.BinaryAccuracy(), (BINARY_TRUE[:, 0], binary_pred, weight))),
        "binary_threshold": attempt(lambda: _updated(M.BinaryAccuracy(threshold=0.7), (BINARY_TRUE, binary_pred, None))),
        "binary_multilabel": attempt(lambda: _updated(M.BinaryAccuracy(), (np.array([[1, 0], [0, 0], [1, 1], [0, 1]]),
                                                                          Y_PRED, weight))),
        "binary_fn": attempt(lambda: M.binary_accuracy(np.array([[1], [0]]), np.array([[0.6], [0.2]], np.float32),
                                                      threshold=0.65)),
        "categorical": attempt(lambda: _updated(M.CategoricalAccuracy(), (np.eye(3)[SCORE_LABELS], SCORES, weight))),
        "categorical_rank3": attempt(lambda: _updated(M.CategoricalAccuracy(), (np.eye(3)[[[0, 1], [2, 2]]],
                                                                               SCORES.reshape(2, 2, 3), None))),
        "categorical_fn": attempt(lambda: M.categorical_accuracy(np.eye(3)[SCORE_LABELS], SCORES)),
        "top_k1": attempt(lambda: _updated(M.SparseTopKCategoricalAccuracy(k=1), (SCORE_LABELS, SCORES, None))),
        "top_k2": attempt(lambda: _updated(M.SparseTopKCategoricalAccuracy(k=2), (SCORE_LABELS, SCORES, weight))),
        "top_k_column_labels": attempt(lambda: _updated(M.SparseTopKCategoricalAccuracy(k=2),
                                                        (SCORE_LABELS[:, None], SCORES, None))),
        "top_k_ties_and_nonfinite": attempt(lambda: M.sparse_top_k_categorical_accuracy(np.array([2, 0, 1, 2]), tied, k=1)),
        "top_k_rank3": attempt(lambda: M.sparse_top_k_categorical_accuracy(SCORE_LABELS.reshape(2, 2),
                                                                           SCORES.reshape(2, 2, 3), k=1)),
        "top_k_sorted_ids": attempt(lambda: _updated(M.SparseTopKCategoricalAccuracy(k=2, from_sorted_ids=True),
                                                     (SCORE_LABELS, np.array([[1, 2, 0], [2, 1, 0], [0, 2, 1],
                                                                              [2, 2, 0]], np.float32), None))),
        "top_k_default": attempt(lambda: _updated(M.SparseTopKCategoricalAccuracy(), (SCORE_LABELS, SCORES, None))),
        "categorical_top_k": attempt(lambda: _updated(M.TopKCategoricalAccuracy(k=1), (np.eye(3)[SCORE_LABELS], SCORES,
                                                                                       None))),
        "sum": attempt(lambda: _updated(M.Sum(), (np.array([1.0, 2.0, 3.0]), None), (4.0, None))),
        "sum_matrix_weights": attempt(lambda: _updated(M.Sum(), (np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 0.5])))),
        "sum_rank3_column_weights": attempt(lambda: _updated(M.Sum(), (np.arange(8.0).reshape(2, 2, 2),
                                                                        np.array([[1.0], [2.0]])))),
        "names": [M.Accuracy().name, M.BinaryAccuracy().name, M.CategoricalAccuracy().name, M.Sum().name,
                  M.SparseTopKCategoricalAccuracy().name, M.TopKCategoricalAccuracy().name],
    }


@case
def metric_accuracies_nonfinite(env: KerasEnv) -> Result:
    """NaN never wins an arg-max (rows of NaN pick class 0), and a row with any non-finite score is never in the
    top k."""
    M = env.keras.metrics
    scores = np.array([[np.nan, 0.3, 0.5], [0.9, np.nan, 0.1], [np.nan, np.nan, np.nan], [-np.inf, 0.2, 0.1],
                       [0.2, np.inf, 0.1]], np.float32)
    labels = np.array([2, 0, 0, 1, 1])
    return {
        "sparse": attempt(lambda: M.sparse_categorical_accuracy(labels, scores)),
        "categorical": attempt(lambda: M.categorical_accuracy(np.eye(3)[labels], scores)),
        "categorical_nan_labels": attempt(lambda: M.categorical_accuracy(scores, np.eye(3)[labels])),
        "top_k": attempt(lambda: M.sparse_top_k_categorical_accuracy(labels, scores, k=2)),
        "top_k_categorical": attempt(lambda: M.top_k_categorical_accuracy(np.eye(3)[labels], scores, k=3)),
        "binary": attempt(lambda: M.binary_accuracy(np.ones((5, 3)), scores)),
    }


@case
def metric_identifiers(env: KerasEnv) -> Result:
    """``metrics.get`` on names, snake-case names and aliases: the metric made and its name."""
    M = env.keras.metrics
    out: Result = {}
    for name in ("accuracy", "Accuracy", "acc", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
                 "sum", "Sum", "sparse_top_k_categorical_accuracy", "top_k_categorical_accuracy", "mse", "MAE", "bce",
                 "binary_crossentropy", "categorical_crossentropy", "mean", "huber"):
        out[name] = attempt(lambda: [type(M.get(name)).__name__, M.get(name).name])
    return out


@case
def metric_accuracies_in_strategy(env: KerasEnv) -> Result:
    """Accuracies and Sum made in the scope and updated in both replicas sum over the replicas."""
    M, s = env.keras.metrics, env.strategy

    def in_replicas() -> list[Any]:
        with s.scope():
            metrics = [M.BinaryAccuracy(), M.CategoricalAccuracy(), M.SparseTopKCategoricalAccuracy(k=2), M.Sum()]

        def step() -> None:
            metrics[0].update_state(BINARY_TRUE, np.array([[0.9], [0.5], [0.3], [0.7]], np.float32))
            metrics[1].update_state(np.eye(3)[SCORE_LABELS], SCORES)
            metrics[2].update_state(SCORE_LABELS, SCORES)
            metrics[3].update_state(np.array([1.0, 2.0]))
        s.run(step)
        return [m.result() for m in metrics]
    return {"replicas": attempt(in_replicas)}


@case
def compiled_accuracy_by_shapes(env: KerasEnv) -> Result:
    """compile(metrics=["accuracy"]) picks binary, sparse or categorical accuracy from the label and output shapes (as
    Keras builds it on the first batch): history of one epoch for each pairing, and evaluate before any fit."""
    k = env.keras
    x, labels = _examples(8, 3)
    binary = (labels == 1).astype(np.float32)
    pairings = {
        "one_unit_column_labels": (1, "sigmoid", "binary_crossentropy", binary[:, None], ["accuracy"]),
        "one_unit_vector_labels": (1, "sigmoid", "binary_crossentropy", binary, ["acc", "ACC"]),
        "sparse_vector_labels": (3, None, k.losses.SparseCategoricalCrossentropy(from_logits=True), labels,
                                 ["accuracy", "Accuracy"]),
        "sparse_column_labels": (3, "softmax", "sparse_categorical_crossentropy", labels[:, None], ["accuracy"]),
        "one_hot_labels": (3, "softmax", "categorical_crossentropy", np.eye(3)[labels], ["accuracy", "acc"]),
        "two_unit_binary": (2, "sigmoid", "binary_crossentropy", np.eye(2)[binary.astype(int)],
                            ["accuracy", k.metrics.BinaryAccuracy(), "binary_accuracy"]),
        "regression": (3, None, "mse", np.eye(3)[labels] * 2.0, ["accuracy", "categorical_accuracy", "sum"]),
    }
    out: Result = {}
    for name, (outputs, activation, loss, y, metrics) in pairings.items():
        def run(outputs: int = outputs, activation: Any = activation, loss: Any = loss, y: Any = y,
                metrics: Any = metrics) -> Result:
            model = _model(env, outputs, lambda: k.optimizers.SGD(learning_rate=0.1), loss, metrics, activation)
            before = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
            history = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
            return {"before": {key: np.float32(v) for key, v in before.items()}, "history": _history(history)}
        out[name] = attempt(run)
    return out


@case
def compiled_crossentropy_by_shapes(env: KerasEnv) -> Result:
    """compile(loss="crossentropy" or "ce") picks binary, sparse or categorical cross-entropy from the label and
    output shapes, as Keras does: one epoch's history and the weights after it."""
    k = env.keras
    x, labels = _examples(8, 3)
    out: Result = {}
    for name, (outputs, activation, loss, y) in {
            "binary": (1, "sigmoid", "crossentropy", (labels[:, None] == 1).astype(np.float32)),
            "sparse": (3, "softmax", "CE", labels), "categorical": (3, "softmax", "ce", np.eye(3)[labels]),
            "sparse_column": (3, None, "Crossentropy", labels[:, None])}.items():
        def run(outputs: int = outputs, activation: Any = activation, loss: str = loss, y: Any = y) -> Result:
            model = _model(env, outputs, lambda: k.optimizers.SGD(learning_rate=0.5), loss, ["accuracy"], activation)
            history = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
            return {"history": _history(history), "weights": model.get_weights()}
        out[name] = attempt(run)
    return out


# -- fit ----------------------------------------------------------------------------------------------


def _model(env: KerasEnv, outputs: int, optimizer: Callable[[], Any], loss: Any, metrics: Any,
           activation: str | None = None, weighted_metrics: Any = None, scoped: bool = True) -> Any:
    """A 3-4-outputs MLP with fixed weights, built and compiled (optimizer made) in the strategy's scope (or, not
    ``scoped``, under the default strategy)."""
    k = env.keras
    rng = np.random.RandomState(3)
    with env.strategy.scope() if scoped else contextlib.nullcontext():
        model = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation="relu"),
                              k.layers.Dense(outputs, activation=activation)])
        model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
        model.compile(optimizer=optimizer(), loss=loss, metrics=metrics, weighted_metrics=weighted_metrics)
    return model


def _examples(n: int, classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` fixed inputs with integer labels (``classes``) or 2-wide regression targets."""
    rng = np.random.RandomState(n)
    x = rng.uniform(-2, 2, (n, 3)).astype(np.float32)
    y = rng.randint(0, classes, n).astype(np.int64) if classes else rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return x, y


def _fit(env: KerasEnv, n: int, batch: int, optimizer: Callable[[], Any], loss: Any, metrics: list[Any],
         classes: int | None, epochs: int = 2, scoped: bool = True) -> Result:
    """History, final weights and evaluate() after fitting on ``range(n)`` batched by ``batch`` (in the strategy's
    scope, or not ``scoped`` under the default strategy)."""
    x, y = _examples(n, classes)
    model = _model(env, classes or 2, optimizer, loss, metrics, scoped=scoped)
    dataset = env.data.Dataset.from_tensor_slices((x, y)).batch(batch)
    history = model.fit(dataset, epochs=epochs, verbose=0)
    return {"history": {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())},
            "weights": model.get_weights(), "evaluate": np.asarray(model.evaluate(dataset, verbose=0), np.float32)}


@case
def fit_sgd_sparse_logits(env: KerasEnv) -> Result:
    """SGD on logits with accuracy; 10 examples in global batches of 4 (last batch 2: one per replica)."""
    k = env.keras
    return _fit(env, 10, 4, lambda: k.optimizers.SGD(learning_rate=0.1),
                k.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"], classes=3)


@case
def fit_adam_mse_partial(env: KerasEnv) -> Result:
    """Adam with MSE; 10 examples in global batches of 6 (replicas get 3 and 3, then 2 and 2)."""
    k = env.keras
    return _fit(env, 10, 6, lambda: k.optimizers.Adam(learning_rate=0.05), "mse", [], classes=None, epochs=3)


@case
def fit_with_ema(env: KerasEnv) -> Result:
    """Optimizers with ``use_ema``: the moving averages (made before the other slots, so checkpoint indices shift),
    updated after every step, written into the model every ``ema_overwrite_frequency`` steps and at the end of fit;
    Keras' argument checks."""
    import os
    import tempfile

    k = env.keras
    k.backend.clear_session()  # (the slot names hold the layers' automatic names)
    out: Result = {}
    for name, make in (("sgd", lambda: k.optimizers.SGD(0.1, momentum=0.5, use_ema=True, ema_momentum=0.5)),
                       ("adam", lambda: k.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.9))):
        out[name] = _fit(env, 10, 4, make, "mse", [], classes=None)
        model = _model(env, 2, make, "mse", [])
        model.fit(*_examples(8, None), batch_size=4, epochs=1, verbose=0)
        out[f"{name}_variables"] = [v.path for v in model.optimizer.variables]
        out[f"{name}_config"] = {key: model.optimizer.get_config()[key]
                                 for key in ("use_ema", "ema_momentum", "ema_overwrite_frequency")}
        with tempfile.TemporaryDirectory() as tmp:
            path = env.train.Checkpoint(optimizer=model.optimizer).save(os.path.join(tmp, "ckpt"))
            out[f"{name}_keys"] = sorted(key for key, _ in env.train.list_variables(path) if "_variables" in key)
    # Overwriting every 3 steps: under the default strategy as Keras does it; under a strategy TF's traced train
    # step cannot (its RuntimeError at the first step).
    overwrite = lambda: k.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.9, ema_overwrite_frequency=3)  # noqa: E731
    out["adam_overwrite"] = _fit(env, 10, 2, overwrite, "mse", [], classes=None, scoped=False)
    out["adam_overwrite_in_strategy"] = attempt(lambda: _fit(env, 10, 2, overwrite, "mse", [], classes=None))
    for bad in ({"ema_momentum": 1.5}, {"ema_overwrite_frequency": 1.5}, {"ema_overwrite_frequency": 0}):
        out[f"bad_{sorted(bad.items())}"] = attempt(lambda: type(k.optimizers.SGD(use_ema=True, **bad)).__name__)
    return out


@case
def fit_steps_that_find_no_data(env: KerasEnv) -> Result:
    """A traced train step that finds no batch left (every epoch's end on data of unknown cardinality; data without
    batches) still runs what does not wait for the data: the weight decay and the step count (not run eagerly);
    fit without any step leaves use_ema's averages unmade (TF's AttributeError at the end of fit)."""
    k = env.keras
    x, y = _examples(6, 2)
    out: Result = {}
    for label, make, scoped, eager in (("adam", lambda: k.optimizers.Adam(0.1), True, False),
                                       ("sgd_decay", lambda: k.optimizers.SGD(0.1, weight_decay=0.5), True, False),
                                       ("adam_default", lambda: k.optimizers.Adam(0.1), False, False),
                                       ("adam_eager", lambda: k.optimizers.Adam(0.1), False, True)):
        model = _model(env, 2, make, "sparse_categorical_crossentropy", [], scoped=scoped)
        model.run_eagerly = eager
        unknown = env.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: b >= 0).batch(4)
        history = model.fit(unknown, epochs=3, verbose=0)
        out[label] = {"iterations": int(model.optimizer.iterations.numpy()), "weights": model.get_weights(),
                      "loss": [np.float32(v) for v in history.history["loss"]]}
    empty = env.data.Dataset.from_tensor_slices((x[:0], y[:0])).batch(2)
    model = _model(env, 2, lambda: k.optimizers.SGD(0.1, weight_decay=0.5), "sparse_categorical_crossentropy", [],
                   scoped=False)
    model.fit(empty, epochs=2, verbose=0)
    out["empty_default"] = {"iterations": int(model.optimizer.iterations.numpy()), "weights": model.get_weights()}
    model = _model(env, 2, lambda: k.optimizers.Adam(0.1, use_ema=True), "sparse_categorical_crossentropy", [],
                   scoped=False)
    out["ema_without_steps"] = attempt(lambda: model.fit(x, y, epochs=1, initial_epoch=1, verbose=0) and None)
    return out


@case
def metrics_from_logits_on_activation_outputs(env: KerasEnv) -> Result:
    """Cross-entropy metrics with from_logits=True on a sigmoid or softmax output (a Dense activation or an Activation
    layer) read its logits in fit and evaluate, as Keras' traced step does; a float64 output cast to the metric's
    float32 loses them."""
    k = env.keras
    x, labels = _examples(8, 3)
    binary = (labels[:, None] == 1).astype(np.float32)
    out: Result = {}
    for label, layers, loss, y, metric in (
            ("dense_sigmoid", lambda: [k.layers.Dense(1, activation="sigmoid")], "binary_crossentropy", binary,
             lambda: k.metrics.BinaryCrossentropy(from_logits=True)),
            ("activation_softmax", lambda: [k.layers.Dense(3), k.layers.Activation("softmax")],
             "sparse_categorical_crossentropy", labels, lambda: k.metrics.SparseCategoricalCrossentropy(from_logits=True)),
            ("float64_sigmoid", lambda: [k.layers.Dense(1, activation="sigmoid", dtype="float64")],
             "binary_crossentropy", binary, lambda: k.metrics.BinaryCrossentropy(from_logits=True))):
        rng = np.random.RandomState(5)
        with env.strategy.scope():
            model = k.Sequential([k.Input((3,)), *layers()])
            model.set_weights([rng.uniform(-1, 1, w.shape).astype(w.dtype) for w in model.get_weights()])
            model.compile(k.optimizers.SGD(0.1), loss, metrics=[metric()])
        history = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        out[label] = {"history": {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())},
                      "evaluate": np.asarray(model.evaluate(x, y, verbose=0), np.float32)}
    return out


@case
def fit_adamw(env: KerasEnv) -> Result:
    """AdamW (Adam with decoupled weight decay, 0.004 by default), by class and by name; its config and checks."""
    k = env.keras
    out = _fit(env, 10, 4, lambda: k.optimizers.AdamW(0.05, weight_decay=0.2, amsgrad=True), "mse", [], classes=None)
    out["by_name"] = _fit(env, 8, 4, lambda: k.optimizers.get("adamw"), "mse", [], classes=None, epochs=1)["weights"]
    config = k.optimizers.AdamW().get_config()
    out["config"] = {key: config[key] for key in ("weight_decay", "beta_1", "beta_2", "epsilon", "amsgrad")}
    out["no_decay"] = attempt(lambda: k.optimizers.AdamW(weight_decay=None))
    return out


@case
def callable_activations(env: KerasEnv) -> Result:
    """Activations given as functions: the framework's own (tf.nn.relu, tf.math.sigmoid, keras.activations.*, the
    same as their names), any other function of tensors (differentiated as it is), in fit under the strategy."""
    k, tf = env.keras, env.tf
    x, y = _examples(8, None)
    out: Result = {}
    for label, activation in (("nn_relu", tf.nn.relu), ("keras_relu", k.activations.relu),
                              ("keras_softmax", k.activations.softmax), ("math_sigmoid", tf.math.sigmoid),
                              ("leaky_relu", lambda z: tf.nn.leaky_relu(z, 0.1)),
                              ("swish_like", lambda z: z * tf.math.sigmoid(z))):
        model, loss = _fit_activation(env, activation, x, y)
        out[label] = {"loss": loss, "weights": model.get_weights()}
    return out


def _fit_activation(env: KerasEnv, activation: Any, x: Any, y: Any) -> tuple[Any, list[Any]]:
    """A 3-4-2 MLP with ``activation`` in its hidden layer, fixed weights, fit for 2 epochs in the strategy's scope;
    the model and its epoch losses."""
    k = env.keras
    rng = np.random.RandomState(1)
    with env.strategy.scope():
        model = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation=activation), k.layers.Dense(2)])
        model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
        model.compile(k.optimizers.SGD(0.1), "mse")
    history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return model, [np.float32(v) for v in history.history["loss"]]


@case
def named_activations(env: KerasEnv) -> Result:
    """Keras 3's other activations by name (elu, selu, softplus, softsign, silu and its alias swish, relu6, leaky_relu,
    log_softmax, hard_sigmoid): the layer config's name and training under the strategy."""
    k = env.keras
    x, y = _examples(8, None)
    out: Result = {}
    for name in ("elu", "selu", "softplus", "softsign", "silu", "swish", "relu6", "leaky_relu", "log_softmax",
                 "hard_sigmoid"):
        model, loss = _fit_activation(env, name, x, y)
        out[name] = {"config": model.layers[0].get_config()["activation"], "weights": model.get_weights(),
                     "loss": loss}
    out["unknown"] = attempt(lambda: k.layers.Dense(2, activation="no_such_activation"))
    return out


@case
def more_named_activations(env: KerasEnv) -> Result:
    """Keras 3's element-wise activations composed of TF ops (gelu, celu, hard_silu and its alias hard_swish,
    hard_tanh, log_sigmoid, mish, soft_shrink, hard_shrink, sparse_plus, squareplus, tanh_shrink, sparse_sigmoid):
    values on inputs around their kinks, the layer config's name, and training under the strategy."""
    k = env.keras
    x, y = _examples(8, None)
    z = np.linspace(-3, 3, 25).astype(np.float32)
    out: Result = {}
    for name in ("gelu", "celu", "hard_silu", "hard_swish", "hard_tanh", "log_sigmoid", "mish", "soft_shrink",
                 "hard_shrink", "sparse_plus", "squareplus", "tanh_shrink", "sparse_sigmoid"):
        model, loss = _fit_activation(env, name, x * 2, y)
        out[name] = {"config": model.layers[0].get_config()["activation"], "weights": model.get_weights(),
                     "loss": loss, "values": k.layers.Activation(name)(z)}
    return out


@case
def sparsemax_and_glu(env: KerasEnv) -> Result:
    """sparsemax by name (values along the last axis, training with it under the strategy) and glu (values, and its
    error for an odd axis size)."""
    k = env.keras
    x, y = _examples(8, None)
    z = np.linspace(-3, 3, 24).astype(np.float32).reshape(4, 6)
    model, loss = _fit_activation(env, "sparsemax", x * 2, y)
    return {"config": model.layers[0].get_config()["activation"], "weights": model.get_weights(), "loss": loss,
            "sparsemax": k.layers.Activation("sparsemax")(z), "glu": k.activations.get("glu")(z),
            "glu_odd": attempt(lambda: k.activations.get("glu")(z[:, :5]))}


@case
def reduce_lr_on_plateau(env: KerasEnv) -> Result:
    """ReduceLROnPlateau: patience, factor, cooldown, min_lr, min_delta and mode; the learning rate it logs each
    epoch; its argument check."""
    k = env.keras
    x, y = _examples(16, None)
    out: Result = {}
    for index, options in enumerate(({"monitor": "loss", "patience": 1, "factor": 0.5},
                                     {"monitor": "val_loss", "patience": 0, "factor": 0.3, "cooldown": 2, "min_lr": 0.05},
                                     {"monitor": "loss", "patience": 2, "factor": 0.1, "min_delta": 0.5},
                                     {"monitor": "val_mae", "mode": "max", "patience": 1})):
        model = _model(env, 2, lambda: k.optimizers.SGD(0.2), "mse", ["mae"])
        history = model.fit(x, y, batch_size=4, epochs=8, shuffle=False, verbose=0, validation_data=(x[:8], y[:8]),
                            callbacks=[k.callbacks.ReduceLROnPlateau(**options)])
        out[str(index)] = {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())}
    out["factor_one"] = attempt(lambda: k.callbacks.ReduceLROnPlateau(factor=1.0))
    return out


@case
def log_cosh(env: KerasEnv) -> Result:
    """LogCosh: the function, the class (config, by name), the LogCoshError metric (named logcosh; "logcosh" itself
    is no metric name) and training with it under the strategy."""
    k = env.keras
    x, y = _examples(8, None)
    out: Result = {"function": k.losses.log_cosh(y, y * 0.5 + 1.0), "class": k.losses.LogCosh()(y, y * 0.3),
                   "config": k.losses.LogCosh().get_config(), "metric_name": k.metrics.LogCoshError().name,
                   "bad_metric_name": attempt(lambda: k.metrics.get("logcosh"))}
    for label, loss in (("by_name", "log_cosh"), ("by_class", k.losses.LogCosh())):
        model = _model(env, 2, lambda: k.optimizers.SGD(0.3), loss, [k.metrics.LogCoshError(), "LogCoshError"])
        history = model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)
        out[label] = {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())}
    return out


@case
def mean_squared_logarithmic_error(env: KerasEnv) -> Result:
    """MSLE: the function (negative values clipped at Keras' epsilon), the class and its names (msle, MSLE), the metric,
    the gradient of a loss of a variable on a tape (no gradient where the clip holds), and training with it."""
    k, tf = env.keras, env.tf
    x, y = _examples(8, None)
    y = np.abs(y) * 3
    variable = tf.Variable(np.array([[0.5, -1.0, 1e-8, 2.0]], np.float32))
    with tf.GradientTape() as tape:
        loss = k.losses.MeanSquaredLogarithmicError()(np.array([[1.0, 0.5, 0.0, 1e-8]], np.float32), variable)
    out: Result = {"function": k.losses.mean_squared_logarithmic_error(y, y * 0.5 - 0.2),
                   "config": k.losses.MeanSquaredLogarithmicError().get_config(),
                   "names": [k.metrics.get("msle").name, k.losses.get("MSLE").__name__],
                   "gradient": tape.gradient(loss, variable)}
    for label, loss_spec in (("by_name", "msle"), ("by_class", k.losses.MeanSquaredLogarithmicError())):
        model = _model(env, 2, lambda: k.optimizers.SGD(0.3), loss_spec, ["msle"])
        history = model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)
        out[label] = {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())}
    return out


@case
def fit_sgd_momentum_mae(env: KerasEnv) -> Result:
    """SGD with momentum, MAE by its alias, accuracy-free regression; 8 examples in global batches of 2."""
    k = env.keras
    return _fit(env, 8, 2, lambda: k.optimizers.SGD(learning_rate=0.05, momentum=0.9), "mae", [], classes=None)


@case
def fit_uneven_replica_batches(env: KerasEnv) -> Result:
    """Global batches of 3 split 2 and 1 over the replicas (TF's Keras fit fails on this; see the test)."""
    k = env.keras
    return _fit(env, 9, 3, lambda: k.optimizers.SGD(learning_rate=0.05), "mse", [], classes=None)


def _history(history: Any) -> dict[str, list[Any]]:
    """A History's values as float32 (Keras gives Python floats of float32 results), keys sorted."""
    return {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())}


@case
def fit_crossentropies_on_activations(env: KerasEnv) -> Result:
    """fit with a sigmoid output and binary cross-entropy (by name), a softmax output with smoothed categorical
    cross-entropy, and Huber by name: the losses read the logits, as Keras' do."""
    k = env.keras
    x, labels = _examples(10, 3)
    binary = (labels[:, None] == 1).astype(np.float32)
    out: Result = {}
    for name, outputs, activation, loss, y, metrics in (
            ("binary", 1, "sigmoid", "binary_crossentropy", binary, [k.metrics.BinaryCrossentropy()]),
            ("categorical", 3, "softmax", k.losses.CategoricalCrossentropy(label_smoothing=0.1), np.eye(3)[labels],
             [k.metrics.CategoricalCrossentropy(name="cce")]),
            ("huber", 3, None, "huber", np.eye(3)[labels], ["mse"])):
        def run(outputs: int = outputs, activation: Any = activation, loss: Any = loss, y: Any = y,
                metrics: Any = metrics) -> Result:
            model = _model(env, outputs, lambda: k.optimizers.Adam(learning_rate=0.2), loss, metrics, activation)
            history = model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)
            return {"history": _history(history), "weights": model.get_weights(),
                    "evaluate": [np.float32(v) for v in model.evaluate(x, y, batch_size=4, verbose=0)]}
        out[name] = attempt(run)
    return out


def _classifier(env: KerasEnv) -> Any:
    """The 3-class MLP on logits with SGD and accuracy."""
    k = env.keras
    return _model(env, 3, lambda: k.optimizers.SGD(learning_rate=0.1),
                  k.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"])


@case
def fit_validation(env: KerasEnv) -> Result:
    """validation_data as arrays or a dataset, validation_steps (one iterator across epochs, as Keras caches it),
    validation_batch_size and validation_freq as an int, a list and a tuple (refused)."""
    data = env.data
    x, y = _examples(8, 3)
    xv, yv = _examples(6, 3)
    val_dataset = data.Dataset.from_tensor_slices((xv, yv)).batch(2)

    def run(epochs: int = 3, **kwargs: Any) -> Result:
        model = _classifier(env)
        history = model.fit(x, y, batch_size=4, epochs=epochs, shuffle=False, verbose=0, **kwargs)
        return {"history": _history(history), "epoch": list(history.epoch)}
    return {
        "arrays": attempt(lambda: run(validation_data=(xv, yv))),
        "arrays_batch_size": attempt(lambda: run(epochs=1, validation_data=(xv, yv), validation_batch_size=2)),
        "dataset": attempt(lambda: run(epochs=2, validation_data=val_dataset)),
        "dataset_steps": attempt(lambda: run(epochs=4, validation_data=val_dataset, validation_steps=1)),
        "dataset_steps_two": attempt(lambda: run(epochs=3, validation_data=val_dataset, validation_steps=2)),
        "freq_int": attempt(lambda: run(epochs=4, validation_data=(xv, yv), validation_freq=2)),
        "freq_list": attempt(lambda: run(epochs=4, validation_data=(xv, yv), validation_freq=[1, 4])),
        "freq_tuple": attempt(lambda: run(epochs=2, validation_data=(xv, yv), validation_freq=(1, 2))),
        "repeated_with_steps": attempt(lambda: run(epochs=2, validation_data=val_dataset.repeat(), validation_steps=2)),
    }


@case
def fit_initial_epoch_and_evaluate(env: KerasEnv) -> Result:
    """initial_epoch skips epochs (History counts from it); evaluate with steps, on a dataset, with return_dict."""
    k, data = env.keras, env.data
    x, y = _examples(10, 3)
    dataset = data.Dataset.from_tensor_slices((x, y)).batch(4)

    def resumed(initial_epoch: int, epochs: int) -> Result:
        model = _classifier(env)
        history = model.fit(dataset, epochs=epochs, initial_epoch=initial_epoch, verbose=0)
        return {"history": _history(history), "epoch": list(history.epoch), "weights": model.get_weights()}

    def evaluated() -> Result:
        model = _classifier(env)
        return {"dict": {key: np.float32(v) for key, v in model.evaluate(dataset, verbose=0, return_dict=True).items()},
                "steps": [np.float32(v) for v in model.evaluate(dataset, steps=2, verbose=0)],
                "numpy_default_batch": [np.float32(v) for v in model.evaluate(x, y, verbose=0)],
                "no_metrics": np.float32(_model(env, 3, lambda: k.optimizers.SGD(), "mse", []).evaluate(
                    x, np.eye(3)[y], batch_size=4, verbose=0))}
    return {"initial_2_of_4": attempt(lambda: resumed(2, 4)), "initial_3_of_3": attempt(lambda: resumed(3, 3)),
            "evaluate": attempt(evaluated)}


@case
def predict_partial_batches(env: KerasEnv) -> Result:
    """predict on datasets whose last global batch is partial (split 1/1, or 1/0 over the replicas), on (x, y)
    elements, on a distributed dataset, on arrays with and without batch_size, and with steps."""
    data, s = env.data, env.strategy
    x, y = _examples(10, 3)
    model = _classifier(env)
    return {
        "batch4": attempt(lambda: model.predict(data.Dataset.from_tensor_slices(x).batch(4), verbose=0)),
        "batch3": attempt(lambda: model.predict(data.Dataset.from_tensor_slices(x).batch(3), verbose=0)),
        "pairs": attempt(lambda: model.predict(data.Dataset.from_tensor_slices((x, y)).batch(4), verbose=0)),
        "distributed": attempt(lambda: model.predict(
            s.experimental_distribute_dataset(data.Dataset.from_tensor_slices(x).batch(3)), verbose=0)),
        "arrays_batch3": attempt(lambda: model.predict(x, batch_size=3, verbose=0)),
        "arrays": attempt(lambda: model.predict(x, verbose=0)),
        "steps": attempt(lambda: model.predict(data.Dataset.from_tensor_slices(x).batch(3), steps=2, verbose=0)),
        "one_example": attempt(lambda: model.predict(x[:1], verbose=0)),
    }


def _fit_with(env: KerasEnv, callbacks: list[Any], epochs: int = 6, x: Any = None, **kwargs: Any) -> Result:
    """The classifier fitted on 8 examples (validated on 6) with ``callbacks``: history, epochs run, weights."""
    xt, y = _examples(8, 3)
    xv, yv = _examples(6, 3)
    model = _classifier(env)
    history = model.fit(xt if x is None else x, y, batch_size=4, epochs=epochs, shuffle=False, verbose=0,
                        validation_data=(xv, yv), callbacks=callbacks, **kwargs)
    return {"history": _history(history), "epoch": list(history.epoch), "weights": model.get_weights()}


@case
def early_stopping(env: KerasEnv) -> Result:
    """EarlyStopping on the loss, a validation accuracy (maximised by mode="auto") and loss, with min_delta,
    patience, baseline, mode, start_from_epoch and restore_best_weights; a metric of unknown direction is refused.
    The warnings of each run (an unknown mode, a missing monitor) are part of the result."""
    k = env.keras
    settings = {
        "loss_min_delta": dict(monitor="loss", min_delta=0.12, patience=1),
        "val_accuracy_restore": dict(monitor="val_accuracy", patience=2, restore_best_weights=True),
        "val_loss_baseline": dict(baseline=0.1, patience=2),
        "loss_mode_max": dict(monitor="loss", mode="max"),
        "start_from_epoch": dict(monitor="loss", mode="max", start_from_epoch=3),
        "restore_without_stop": dict(monitor="val_loss", patience=10, restore_best_weights=True, min_delta=0.03),
        "mode_unknown": dict(monitor="loss", mode="upward", min_delta=0.12),
        "missing_monitor": dict(monitor="val_nothing", mode="min"),
    }
    out: Result = {}
    emitted: Result = {}
    for name, options in settings.items():
        def run(options: dict = options) -> Result:
            stopper = k.callbacks.EarlyStopping(**options)
            result = _fit_with(env, [stopper])
            return {**result, "stopped_epoch": stopper.stopped_epoch, "wait": stopper.wait,
                    "best": np.float32(stopper.best), "best_epoch": stopper.best_epoch}
        out[name], emitted[name] = warned(run)
    out["unknown_direction"], emitted["unknown_direction"] = warned(
        lambda: _fit_with(env, [k.callbacks.EarlyStopping(monitor="val_nothing")]))
    out["warnings"] = emitted
    return out


@case
def terminate_on_nan_and_learning_rate_schedule(env: KerasEnv) -> Result:
    """TerminateOnNaN stops after the batch whose running loss is NaN (or raises); LearningRateScheduler sets the
    rate before each epoch (two-argument and one-argument schedules) and logs it; a non-float rate is refused."""
    k = env.keras
    x, _ = _examples(8, 3)
    poisoned = x.copy()
    poisoned[5, 1] = np.nan  # in the second batch
    return {
        "nan_stop": attempt(lambda: _fit_with(env, [k.callbacks.TerminateOnNaN()], epochs=3, x=poisoned)),
        "nan_raise": attempt(lambda: _fit_with(env, [k.callbacks.TerminateOnNaN(raise_error=True)], epochs=3,
                                               x=poisoned)),
        "schedule_two_args": attempt(lambda: _fit_with(env, [k.callbacks.LearningRateScheduler(
            lambda epoch, lr: lr * 0.5 if epoch else lr)], epochs=3)),
        "schedule_one_arg": attempt(lambda: _fit_with(env, [k.callbacks.LearningRateScheduler(
            lambda epoch: 0.3 / (epoch + 1))], epochs=3)),
        "schedule_int": attempt(lambda: _fit_with(env, [k.callbacks.LearningRateScheduler(lambda epoch, lr: 1)],
                                                  epochs=2)),
        "schedule_with_early_stopping": attempt(lambda: _fit_with(env, [
            k.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 2.0),
            k.callbacks.EarlyStopping(monitor="loss", patience=0)], epochs=6)),
    }


@case
def model_checkpoint_weights(env: KerasEnv) -> Result:
    """ModelCheckpoint(save_weights_only=True): the files written per epoch, per batch count and only on improvement,
    the weights loaded back, and Keras' checks of save_freq, file names and path placeholders (the file format is
    mirrorlab's own under the .weights.h5 name: only what loading gives back is compared)."""
    import os
    import tempfile

    k = env.keras

    def saved(pattern: str, epochs: int = 3, **options: Any) -> Result:
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = k.callbacks.ModelCheckpoint(os.path.join(tmp, pattern), save_weights_only=True, **options)
            result = _fit_with(env, [checkpoint], epochs=epochs)
            files = sorted(os.listdir(tmp))
            fresh = _classifier(env)
            fresh.load_weights(os.path.join(tmp, files[-1]))
            return {"files": files, "loaded": fresh.get_weights(), "history": result["history"],
                    "best": None if checkpoint.best is None else np.float32(checkpoint.best)}

    def saved_models(pattern: str) -> Result:
        with tempfile.TemporaryDirectory() as tmp:
            _fit_with(env, [k.callbacks.ModelCheckpoint(os.path.join(tmp, pattern))], epochs=2)
            files = sorted(os.listdir(tmp))
            loaded = k.models.load_model(os.path.join(tmp, files[-1]))
            return {"files": files, "loaded": loaded.get_weights(),
                    "iterations": int(np.asarray(loaded.optimizer.iterations))}

    def refused(filepath: str, **options: Any) -> Any:
        return attempt(lambda: k.callbacks.ModelCheckpoint(filepath, **options))

    def weights_files(path: str, load: bool) -> Any:
        """The error of saving to, or loading from, a relative ``path`` refused before any file is touched."""
        model = _classifier(env)
        return model.load_weights(path) if load else model.save_weights(path)
    return {
        "every_epoch": attempt(lambda: saved("w{epoch:02d}.weights.h5")),
        "best_val_accuracy": attempt(lambda: saved("best{epoch}.weights.h5", epochs=5, monitor="val_accuracy",
                                                   save_best_only=True)),
        "best_loss_threshold": attempt(lambda: saved("b{epoch}-{loss:.3f}.weights.h5", monitor="loss",
                                                     save_best_only=True, initial_value_threshold=1.2)),
        "every_3_batches": attempt(lambda: saved("e{epoch}b{batch}.weights.h5", save_freq=3)),
        "one_file": attempt(lambda: saved("model.weights.h5", epochs=2)),
        "whole_models": attempt(lambda: saved_models("m{epoch}.keras")),
        "missing_placeholder": attempt(lambda: _fit_with(env, [k.callbacks.ModelCheckpoint(
            "w{val_nothing}.weights.h5", save_weights_only=True)], epochs=1)),
        "bad_save_freq": refused("w.weights.h5", save_weights_only=True, save_freq="batch"),
        "weights_only_wrong_suffix": refused("w.h5", save_weights_only=True),
        "model_wrong_suffix": refused("w.ckpt"),
        "save_weights_wrong_suffix": attempt(lambda: weights_files("w.h5", load=False)),
        "load_weights_wrong_suffix": attempt(lambda: weights_files("w.ckpt", load=True)),
        "load_weights_missing": type(attempt(lambda: weights_files("no/such/dir/w.weights.h5", load=True))).__name__,
    }


@case
def fit_without_strategy(env: KerasEnv) -> Result:
    """The new pieces outside any strategy scope (the default strategy): a sigmoid model with binary cross-entropy
    and "accuracy", validation, EarlyStopping and a learning-rate schedule, then evaluate and predict."""
    k, data = env.keras, env.data
    x, labels = _examples(10, 3)
    y = (labels[:, None] == 1).astype(np.float32)  # a column: the BCE metric's function does not match ranks
    xv, labels_v = _examples(6, 3)
    rng = np.random.RandomState(7)
    model = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation="tanh"), k.layers.Dropout(0.5),
                          k.layers.Dense(1, activation="sigmoid")])
    model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
    model.compile(optimizer=k.optimizers.Adam(learning_rate=0.05), loss="binary_crossentropy",
                  metrics=["accuracy", k.metrics.BinaryCrossentropy(name="bce")])
    inference = model.predict(x, verbose=0)
    callbacks = [k.callbacks.EarlyStopping(monitor="val_accuracy", patience=1),
                 k.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5)]
    history = model.fit(x, y, batch_size=4, epochs=4, verbose=0, shuffle=False, callbacks=callbacks,
                        validation_data=(xv, (labels_v[:, None] == 1).astype(np.float32)))
    return {"history_keys": sorted(history.history), "epochs": list(history.epoch),
            "learning_rate": [np.float32(v) for v in history.history["learning_rate"]],
            "inference": inference, "evaluate_shape": list(np.shape(model.evaluate(x, y, verbose=0))),
            "predict_shape": list(np.shape(model.predict(data.Dataset.from_tensor_slices(x).batch(4), verbose=0)))}



@case
def seeded_initializers_and_dropout(env: KerasEnv) -> Result:
    """Keras' random initializers and Dropout draw with TF's stateless Philox ops: after set_random_seed a model starts
    from TF's weights and drops TF's inputs, a SeedGenerator moves on each call, every replica under the strategy
    draws the same mask, and fit with Dropout trains as TF's."""
    k = env.keras
    k.utils.set_random_seed(21)
    model = k.Sequential([k.Input((5,)), k.layers.Dense(4, activation="relu"), k.layers.Dropout(0.4),
                          k.layers.Dense(3, kernel_initializer="he_normal", bias_initializer="random_normal"),
                          k.layers.Dense(2, kernel_initializer=k.initializers.GlorotNormal(seed=3))])
    x = np.random.RandomState(2).standard_normal((4, 5)).astype(np.float32)
    names = ("glorot_uniform", "glorot_normal", "he_uniform", "lecun_normal", "lecun_uniform", "truncated_normal",
             "random_uniform", "uniform", "normal", "random_normal", "variance_scaling")
    out: Result = {"weights": [np.asarray(w) for w in model.weights], "variables": len(model.variables)}
    for name in names:
        out[f"init|{name}"] = attempt(lambda name=name: [np.asarray(k.initializers.get(name)((3, 4))),
                                                          np.asarray(k.initializers.get(name)((2, 2, 3), dtype="float64"))])
    out["init|seeded"] = [np.asarray(k.initializers.HeNormal(seed=7)((4, 4))),
                          np.asarray(k.initializers.VarianceScaling(0.5, "fan_out", "untruncated_normal", seed=7)((3, 2))),
                          np.asarray(k.initializers.RandomUniform(-1.0, 1.0, seed=k.random.SeedGenerator(8))((5,)))]
    dropout = k.layers.Dropout(0.3, seed=5)
    out["dropout|calls"] = [np.asarray(dropout(x, training=True)) for _ in range(3)]
    out["dropout|noise_shape"] = np.asarray(k.layers.Dropout(0.5, noise_shape=(None, 1), seed=9)(x, training=True))
    out["dropout|float64"] = np.asarray(k.layers.Dropout(0.25, seed=1)(x.astype(np.float64), training=True))
    out["dropout|unseeded"] = np.asarray(k.layers.Dropout(0.5)(x, training=True))
    out["model|training"] = np.asarray(model(x, training=True))
    with env.strategy.scope():
        shared = k.layers.Dropout(0.5, seed=2)
    ones = np.arange(1, 13, dtype=np.float32).reshape(2, 6)
    out["dropout|replicas"] = [env.local(env.strategy.run(lambda: shared(ones, training=True))) for _ in range(2)]
    k.utils.set_random_seed(4)
    with env.strategy.scope():
        fitted = k.Sequential([k.Input((4,)), k.layers.Dense(6, activation="relu"), k.layers.Dropout(0.5),
                               k.layers.Dense(1)])
        fitted.compile(loss="mse", optimizer=k.optimizers.SGD(learning_rate=0.05))
    xs = np.random.RandomState(1).standard_normal((16, 4)).astype(np.float32)
    history = fitted.fit(xs, xs.sum(axis=1, keepdims=True), batch_size=8, epochs=2, verbose=0, shuffle=False)
    out["fit|loss"] = np.array(history.history["loss"], np.float32)
    out["fit|weights"] = [np.asarray(w) for w in fitted.weights]
    env.tf.random.set_seed(None)  # the cases after this one run without a global seed
    return out

# -- optimizers and layers ----------------------------------------------------------------------------


def _optimizer_steps(env: KerasEnv, make: Callable[[], Any], in_replicas: bool, steps: int = 3) -> list[Any]:
    """A [2]-vector variable after ``steps`` updates: gradients applied in cross-replica context, or from every
    replica (replica ``r`` contributes ``(r + 1) * g``, summed by the optimizer); then the optimizer's state."""
    s = env.strategy
    with s.scope():
        var = env.keras.Variable(np.array([1.0, -2.0], np.float32))
        optimizer = make()
    for step in range(steps):
        grad = np.array([0.5, -1.5], np.float32) * np.float32(step + 1)
        if in_replicas:
            def replica_step(grad: Any = grad) -> None:
                scale = np.float32(np.asarray(env.get_replica_context().replica_id_in_sync_group) + 1)
                optimizer.apply_gradients([(grad * scale, var)])
            s.run(replica_step)
        else:
            optimizer.apply_gradients([(grad, var)])
    return [np.asarray(var), np.asarray(optimizer.iterations), [np.asarray(v) for v in optimizer.variables[1:]]]


OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "sgd": lambda k: k.optimizers.SGD(learning_rate=0.1),
    "sgd_momentum": lambda k: k.optimizers.SGD(learning_rate=0.1, momentum=0.9),
    "sgd_nesterov": lambda k: k.optimizers.SGD(learning_rate=0.1, momentum=0.5, nesterov=True),
    "adam": lambda k: k.optimizers.Adam(learning_rate=0.1),
    "adam_betas": lambda k: k.optimizers.Adam(learning_rate=0.01, beta_1=0.5, beta_2=0.9, epsilon=1e-3),
    "adam_amsgrad": lambda k: k.optimizers.Adam(learning_rate=0.1, amsgrad=True),
    "sgd_clipnorm": lambda k: k.optimizers.SGD(learning_rate=0.1, clipnorm=1.0),
    "sgd_clipvalue": lambda k: k.optimizers.SGD(learning_rate=0.1, clipvalue=0.75),
    "sgd_global_clipnorm": lambda k: k.optimizers.SGD(learning_rate=0.1, global_clipnorm=1.0),
    "adam_weight_decay": lambda k: k.optimizers.Adam(learning_rate=0.1, weight_decay=0.1),
    "by_name_adam": lambda k: k.optimizers.get("adam"),
    "rmsprop": lambda k: k.optimizers.RMSprop(learning_rate=0.05),
    "rmsprop_momentum_centered": lambda k: k.optimizers.RMSprop(learning_rate=0.05, rho=0.8, momentum=0.5,
                                                                centered=True),
}


@case
def optimizer_updates(env: KerasEnv) -> Result:
    """Each optimizer's variable, iterations and slots after 3 steps, applied cross-replica and in replicas."""
    return {f"{name}|{where}": attempt(lambda: _optimizer_steps(env, lambda: make(env.keras), where == "replicas"))
            for name, make in OPTIMIZERS.items() for where in ("cross_replica", "replicas")}


@case
def dense_activations(env: KerasEnv) -> Result:
    """Dense layers with each activation on fixed weights: outputs and count_params."""
    k = env.keras
    x = np.array([[0.5, -1.0, 2.0], [-0.3, 0.8, 0.1]], np.float32)
    out: Result = {}
    for activation in ("linear", "relu", "sigmoid", "tanh", "softmax", None):
        def apply(activation: Any = activation) -> list[Any]:
            model = k.Sequential([k.Input((3,)), k.layers.Dense(2, activation=activation)])
            model.set_weights([np.array([[0.2, -0.4], [0.7, 0.1], [-0.5, 0.3]], np.float32),
                               np.array([0.1, -0.2], np.float32)])
            return [model(x), model.count_params(), model.predict(x, verbose=0)]
        out[str(activation)] = attempt(apply)
    return out


@case
def activation_and_dropout_layers(env: KerasEnv) -> Result:
    """The Activation layer (a softmax output keeps its logits for the loss); Dropout: the identity at inference, and
    in training the shape, dtype, TF's scale on kept inputs, noise_shape sharing, rates 0 and 1 and Keras' argument
    errors (which inputs are dropped is random: not compared)."""
    k = env.keras
    x = np.array([[0.5, -1.0, 2.0], [-0.3, 0.8, 0.1], [1.0, 1.5, -2.0], [0.2, 3.0, -0.5]], np.float32)

    def dropped(rate: float, noise_shape: Any = None) -> list[Any]:
        y = np.asarray(k.layers.Dropout(rate, noise_shape=noise_shape, seed=3)(x, training=True))
        kept = y != 0
        scale = np.float32(1) / (np.float32(1) - np.float32(rate))
        rows_whole = bool(np.all(kept.all(axis=1) | ~kept.any(axis=1)))
        return [y.dtype.name, list(y.shape), bool(np.all(y[kept] == x[kept] * scale)), rows_whole]

    def model_outputs() -> list[Any]:
        model = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation="relu"), k.layers.Dropout(0.5),
                              k.layers.Dense(3), k.layers.Activation("softmax")])
        model.set_weights([np.full((3, 4), 0.5, np.float32), np.zeros(4, np.float32),
                           np.array([[4.0, -9.0, 1.0]] * 4, np.float32), np.zeros(3, np.float32)])
        trained = model(x, training=True)
        loss = k.losses.SparseCategoricalCrossentropy(reduction="none")(np.array([1, 1, 0, 2]), model(x))
        return [model(x), model.predict(x, verbose=0), loss, list(np.shape(trained)), len(model.layers)]
    out: Result = {f"activation|{name}": attempt(lambda: k.layers.Activation(name)(x))
                   for name in ("relu", "sigmoid", "tanh", "softmax", "linear")}
    out.update({
        "dropout_inference": attempt(lambda: k.layers.Dropout(0.3, seed=1)(x)),
        "dropout_training_false": attempt(lambda: k.layers.Dropout(0.3)(x, training=False)),
        "dropout_training": attempt(lambda: dropped(0.3)),
        "dropout_noise_shape": attempt(lambda: dropped(0.5, (None, 1))),
        "dropout_rate0": attempt(lambda: k.layers.Dropout(0.0)(x, training=True)),
        "dropout_rate1": attempt(lambda: k.layers.Dropout(1.0)(x, training=True)),
        "model": attempt(model_outputs),
    })
    for name, args in {"rate_above_1": (1.5,), "rate_negative": (-0.1,), "noise_string": (0.5, "abc"),
                       "noise_zero": (0.5, (0, 3)), "noise_float": (0.5, (None, 2.5)), "noise_int": (0.5, 3)}.items():
        out[name] = attempt(lambda: k.layers.Dropout(*args))
    return out


@case
def optimizer_scope_and_learning_rate(env: KerasEnv) -> Result:
    """An optimizer made outside the scope of the model it trains fails as TF's does; the learning rate is a
    variable that can be set; more than one clipping option is refused."""
    k, s = env.keras, env.strategy

    def made_outside() -> Any:
        optimizer = k.optimizers.Adam(learning_rate=0.1)
        x, y = _examples(4, None)
        with s.scope():
            model = k.Sequential([k.Input((3,)), k.layers.Dense(2)])
            model.compile(optimizer=optimizer, loss="mse")
        return model.fit(env.data.Dataset.from_tensor_slices((x, y)).batch(2), verbose=0).history

    def set_learning_rate() -> list[Any]:
        with s.scope():
            optimizer = k.optimizers.SGD(learning_rate=0.5)
        before = np.asarray(optimizer.learning_rate)
        optimizer.learning_rate = 0.25
        return [before, np.asarray(optimizer.learning_rate), len(optimizer.variables)]

    return {"made_outside": attempt(made_outside), "set_learning_rate": attempt(set_learning_rate),
            "two_clips": type(attempt(lambda: k.optimizers.SGD(clipnorm=1.0, clipvalue=1.0))).__name__,
            "bad_momentum": attempt(lambda: k.optimizers.SGD(momentum=1.5))}


def _batch_recorder(env: KerasEnv) -> Any:
    """A callback that records every batch hook: its step number, and after a training execution the loss it was
    given (float32) and the optimizer's step count; after a predict execution the outputs' shape."""

    class Recorder(env.keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[Any] = []

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.calls.append(["train_begin", batch])

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.calls.append(["train_end", batch, sorted(logs), np.float32(logs[sorted(logs)[-1]]),
                               int(self.model.optimizer.iterations.numpy())])

        def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.calls.append(["test_begin", batch])

        def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
            self.calls.append(["test_end", batch])

        def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
            self.calls.append(["predict_begin", batch])

        def on_predict_batch_end(self, batch: int, logs: Any = None) -> None:
            self.calls.append(["predict_end", batch, list(logs["outputs"].shape)])

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.calls.append(["epoch_end", epoch, int(self.model.optimizer.iterations.numpy())])

    return Recorder()


@case
def fit_steps_per_execution(env: KerasEnv) -> Result:
    """compile(steps_per_execution=N) without a strategy (under one TF 2.21's Keras fails: see test_keras.py): the
    batch callbacks run once per execution with its first and last step; an execution takes N batches even past
    steps_per_epoch and ends early, silently, when the data does; data of unknown length ends on an execution that
    finds nothing (no step runs then); evaluate and predict (whose outputs an execution concatenates) alike; a
    subclass's logs are its last step's; stop_training acts after an execution; the errors for N that is no count."""
    k, data = env.keras, env.data
    x, y = _examples(10, 3)

    def model(n: Any, cls: Any = None) -> Any:
        made = _model(env, 3, lambda: k.optimizers.SGD(learning_rate=0.1),
                      k.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"], scoped=False)
        if cls is not None:
            made = cls([k.Input((3,)), *made.layers])
        made.compile(optimizer=k.optimizers.SGD(learning_rate=0.1),
                     loss=k.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                     steps_per_execution=n)
        return made

    def dataset() -> Any:
        return data.Dataset.from_tensor_slices((x, y))

    out: Result = {}
    for label, n, make, kwargs in (
            ("known", 2, lambda: dataset().batch(2), {}),
            ("repeated_steps_per_epoch", 2, lambda: dataset().repeat().batch(2), {"steps_per_epoch": 5}),
            ("unknown", 2, lambda: dataset().filter(lambda a, b: b >= 0).batch(2), {}),
            ("steps_per_epoch_past_the_data", 3, lambda: dataset().batch(2), {"steps_per_epoch": 4}),
            ("more_than_an_epoch", 7, lambda: dataset().batch(3), {}),
            ("arrays", 3, None, {"batch_size": 4, "shuffle": False, "validation_data": (x[:6], y[:6]),
                                 "validation_batch_size": 2})):
        fitted, recorder = model(n), _batch_recorder(env)

        def run(fitted: Any = fitted, recorder: Any = recorder, make: Any = make, kwargs: Any = kwargs) -> Any:
            inputs = (x, y) if make is None else (make(),)
            history = fitted.fit(*inputs, epochs=2, verbose=0, callbacks=[recorder], **kwargs)
            return {"history": _history(history), "calls": recorder.calls, "weights": fitted.get_weights()}
        result, caught = warned(run)
        out[label] = {"result": result, "warnings": [m for m in caught if "shuffle" not in m]}

    tested, recorder = model(2), _batch_recorder(env)
    for label, make, kwargs in (("evaluate", lambda: dataset().batch(2), {}),
                                ("evaluate_steps", lambda: dataset().batch(2), {"steps": 3}),
                                ("evaluate_unknown", lambda: dataset().filter(lambda a, b: b >= 0).batch(3), {}),
                                ("predict", lambda: data.Dataset.from_tensor_slices(x).batch(3), {}),
                                ("predict_steps", lambda: data.Dataset.from_tensor_slices(x).batch(3), {"steps": 3}),
                                ("predict_unknown", lambda: data.Dataset.from_tensor_slices(x).filter(
                                    lambda a: a[0] > -5).batch(4), {}),
                                ("predict_arrays", None, {"batch_size": 4}),
                                ("predict_arrays_steps_past_the_data", None, {"batch_size": 4, "steps": 4})):
        recorder.calls = []
        if label.startswith("predict"):
            run = lambda make=make, kwargs=kwargs: tested.predict(  # noqa: E731
                x if make is None else make(), verbose=0, callbacks=[recorder], **kwargs)
        else:
            run = lambda make=make, kwargs=kwargs: np.asarray(tested.evaluate(  # noqa: E731
                make(), verbose=0, callbacks=[recorder], **kwargs), np.float32)
        result, caught = warned(run)
        out[label] = {"result": result, "calls": recorder.calls, "warnings": caught}

    class LastLogs(k.Sequential):
        """A train_step whose logs name the step (the optimizer's count after it)."""

        def train_step(self, batch: Any) -> Any:
            super().train_step(batch)
            return {"step": k.ops.cast(self.optimizer.iterations, "float32")}

    custom, recorder = model(3, LastLogs), _batch_recorder(env)
    history = custom.fit(dataset().batch(2), epochs=2, verbose=0, callbacks=[recorder], shuffle=False)
    out["custom_step"] = {"history": _history(history), "calls": recorder.calls}

    class StopAfterStep3(k.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.model.stop_training = batch >= 3

    stopped, recorder = model(2), _batch_recorder(env)
    history = stopped.fit(dataset().batch(2), epochs=2, verbose=0, callbacks=[recorder, StopAfterStep3()],
                          shuffle=False)
    out["stop_training"] = {"history": _history(history), "calls": recorder.calls,
                            "iterations": int(stopped.optimizer.iterations.numpy())}
    out["compile_config"] = model(4).get_compile_config()["steps_per_execution"]
    for bad in (0, 1.5, "auto", None):
        out[f"bad_{bad}"] = attempt(lambda bad=bad: model(bad).fit(x, y, epochs=1, verbose=0) and None)
    return out


@case
def fit_repeat_steps_per_epoch(env: KerasEnv) -> Result:
    """A repeated dataset with steps_per_epoch (the tutorial's shape): 8 examples, global batches of 4."""
    k = env.keras
    x, y = _examples(8, 3)
    model = _model(env, 3, lambda: k.optimizers.SGD(learning_rate=0.1),
                   k.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"])
    history = model.fit(env.data.Dataset.from_tensor_slices((x, y)).repeat().batch(4), epochs=2, steps_per_epoch=3,
                        verbose=0)
    return {"history": {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())},
            "epoch": list(history.epoch), "weights": model.get_weights()}


@case
def fit_numpy_inputs(env: KerasEnv) -> Result:
    """NumPy x and y with batch_size and shuffle=False; evaluate with and without return_dict; predict."""
    k = env.keras
    x, y = _examples(8, 3)
    model = _model(env, 3, lambda: k.optimizers.Adam(learning_rate=0.05),
                   "sparse_categorical_crossentropy", ["accuracy"])
    history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return {"history": {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())},
            "evaluate": [np.float32(v) for v in model.evaluate(x, y, batch_size=4, verbose=0)],
            "evaluate_dict": {key: np.float32(v) for key, v in
                              model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True).items()},
            "predict": model.predict(x, batch_size=4, verbose=0)}


# -- checkpoints of Keras objects ---------------------------------------------------------------------


def _keys(env: KerasEnv, directory: str, **objects: Any) -> list[str]:
    """The variable keys (with shapes) of a checkpoint of ``objects``."""
    path = env.train.Checkpoint(**objects).save(f"{directory}/ckpt")
    return [f"{name} {list(shape)}" for name, shape in env.train.list_variables(path)]


@case
def checkpoint_keys(env: KerasEnv) -> Result:
    """Keras 3's object graph gives the keys: layers under ``_functional/_operations``, the kernel as ``_kernel``,
    and once an optimizer has trained the model its ``_trainable_variables`` name the weights (shortest path)."""
    import tempfile

    k = env.keras
    out: Result = {}
    with tempfile.TemporaryDirectory() as tmp:
        unbuilt = k.Sequential([k.layers.Dense(2), k.layers.Dense(1)])
        out["unbuilt"] = attempt(lambda: _keys(env, f"{tmp}/a", model=unbuilt))
        model = k.Sequential([k.layers.Dense(2, input_shape=(3,)), k.layers.Dense(1, use_bias=False)])
        out["built"] = attempt(lambda: _keys(env, f"{tmp}/b", model=model))
        out["layers"] = len(model.layers)
        model.compile(optimizer=k.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="mse")
        out["compiled"] = attempt(lambda: _keys(env, f"{tmp}/c", model=model))
        model.fit(np.ones((4, 3), np.float32), np.ones((4, 1), np.float32), epochs=1, verbose=0)
        out["trained"] = attempt(lambda: _keys(env, f"{tmp}/d", model=model))
        out["model_and_optimizer"] = attempt(lambda: _keys(env, f"{tmp}/e", model=model, optimizer=model.optimizer))
        out["layer"] = attempt(lambda: _keys(env, f"{tmp}/f", layer=model.layers[0]))
        metric = k.metrics.Mean()
        out["metric"] = type(attempt(lambda: _keys(env, f"{tmp}/g", metric=metric))).__name__
        out["metric_variables"] = attempt(lambda: _keys(env, f"{tmp}/h", total=metric.total, count=metric.count))
    return out


@case
def compiled_metric_names(env: KerasEnv) -> Result:
    """Metrics given by name, alias, function name and instance: history keys (uniquified) and values."""
    k = env.keras
    x, y = _examples(8, 3)
    regression = _model(env, 2, lambda: k.optimizers.SGD(learning_rate=0.1), "mse",
                        ["mae", "mse", k.metrics.MeanAbsoluteError(), k.metrics.MeanSquaredError(),
                         "mean_absolute_error"])
    y2 = np.stack([y, -y], axis=1).astype(np.float32)
    first = regression.fit(x, y2, batch_size=4, epochs=1, shuffle=False, verbose=0).history
    classifier = _model(env, 3, lambda: k.optimizers.SGD(learning_rate=0.1), "sparse_categorical_crossentropy",
                        ["accuracy", "sparse_categorical_crossentropy",
                         k.metrics.SparseCategoricalCrossentropy(from_logits=True), "acc",
                         k.metrics.SparseCategoricalAccuracy(name="sca")])
    second = classifier.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0).history
    return {name: {key: np.float32(values[0]) for key, values in sorted(history.items())}
            for name, history in (("regression", first), ("classifier", second))}


# -- custom training loops ----------------------------------------------------------------------------


def _custom_loop(env: KerasEnv, n: int, global_batch: int, regularized: bool) -> Result:
    """TF's multi-worker custom-loop pattern: GradientTape around the model, a per-example loss scaled by
    compute_average_loss, regularization scaled by scale_regularization_loss, RMSprop, an accuracy metric."""
    k, tf, s = env.keras, env.tf, env.strategy
    x, y = _examples(n, 3)
    regularizer = (lambda: k.regularizers.L2(0.01)) if regularized else (lambda: None)
    rng = np.random.RandomState(5)
    with s.scope():
        model = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation="relu", kernel_regularizer=regularizer()),
                              k.layers.Dense(3, kernel_regularizer=regularizer(), bias_regularizer=regularizer())])
        model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
        optimizer = k.optimizers.RMSprop(learning_rate=0.01)
        accuracy = k.metrics.SparseCategoricalAccuracy(name="train_accuracy")
    dataset = s.experimental_distribute_dataset(env.data.Dataset.from_tensor_slices((x, y)).batch(global_batch))

    def step_fn(inputs: Any) -> Any:
        features, labels = inputs
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            per_example = k.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")(labels, predictions)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        accuracy.update_state(labels, predictions)
        return loss

    losses = [s.reduce(tf.distribute.ReduceOp.SUM, s.run(step_fn, args=(batch,)), axis=None) for batch in dataset]
    return {"losses": losses, "accuracy": accuracy.result(), "weights": model.get_weights(),
            "regularization": [np.asarray(v) for v in model.losses], "iterations": np.asarray(optimizer.iterations)}


@case
def custom_loop_even_batches(env: KerasEnv) -> Result:
    """12 examples in global batches of 4 (2 per replica), with L2 regularizers."""
    return _custom_loop(env, 12, 4, regularized=True)


@case
def custom_loop_uneven_batches(env: KerasEnv) -> Result:
    """10 examples in global batches of 3 (replicas get 2 and 1; the last batch 1 and 0), no regularizers."""
    return _custom_loop(env, 10, 3, regularized=False)


@case
def gradient_tape_rules(env: KerasEnv) -> Result:
    """Gradients through arithmetic on model outputs and losses, a second gradient() on a non-persistent tape,
    and gradients of a persistent tape used twice."""
    k, tf = env.keras, env.tf
    model = k.Sequential([k.Input((2,)), k.layers.Dense(2)])
    model.set_weights([np.array([[1.0, -1.0], [0.5, 2.0]], np.float32), np.array([0.1, -0.2], np.float32)])
    x = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)
    with tf.GradientTape() as tape:
        out = model(x)
        shifted = k.losses.MeanAbsoluteError(reduction="sum")(np.zeros((2, 2)), 1.0 - out * 2.0)
        target = shifted / 4.0 + k.losses.MeanSquaredError()(np.zeros((2, 2)), -out) * 3.0
    grads = tape.gradient(target, model.trainable_variables)
    second = type(attempt(lambda: tape.gradient(target, model.trainable_variables))).__name__
    with tf.GradientTape(persistent=True) as persistent:
        loss = k.losses.MeanAbsoluteError(reduction="sum")(np.ones((2, 2)), model(x))
    twice = [persistent.gradient(loss, model.trainable_variables), persistent.gradient(loss, model.trainable_variables)]
    return {"target": target, "grads": grads, "second": second, "persistent": twice}


@case
def checkpoint_restore_before_build(env: KerasEnv) -> Result:
    """Values restored into a model before its layers or optimizer slots exist arrive when they are created
    (TF's restore-on-create): an unbuilt model, then a compiled one whose optimizer builds later."""
    import tempfile

    k = env.keras
    x, y = _examples(8, None)
    trained = _model(env, 2, lambda: k.optimizers.Adam(learning_rate=0.1), "mse", [])
    trained.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = env.train.Checkpoint(model=trained).save(f"{tmp}/ckpt")
        fresh = k.Sequential([k.layers.Dense(4, activation="relu"), k.layers.Dense(2)])
        env.train.Checkpoint(model=fresh).restore(path)
        fresh(x[:1])
        built_later = fresh.get_weights()
        compiled = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation="relu"), k.layers.Dense(2)])
        compiled.compile(optimizer=k.optimizers.Adam(learning_rate=0.1), loss="mse")
        env.train.Checkpoint(model=compiled).restore(path)
        compiled.optimizer.build(compiled.trainable_variables)
        slots = [np.asarray(v) for v in compiled.optimizer.variables]
    return {"built_later": built_later, "trained": trained.get_weights(), "compiled_weights": compiled.get_weights(),
            "optimizer": slots}


@case
def fit_regularized_and_clipped(env: KerasEnv) -> Result:
    """fit adds the regularization losses to the compiled loss (the loss metric counts them per replica, as
    Keras' unscaling does) and the optimizer clips each replica's gradients before summing them."""
    k = env.keras
    x, y = _examples(8, 3)
    rng = np.random.RandomState(4)
    with env.strategy.scope():
        model = k.Sequential([k.Input((3,)), k.layers.Dense(4, activation="relu", kernel_regularizer=k.regularizers.L2(0.1)),
                              k.layers.Dense(3, bias_regularizer=k.regularizers.L1(0.05))])
        model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.get_weights()])
        model.compile(optimizer=k.optimizers.SGD(learning_rate=0.2, clipnorm=0.5),
                      loss=k.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return {"history": {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())},
            "weights": model.get_weights(), "evaluate": [np.float32(v) for v in model.evaluate(x, y, batch_size=4, verbose=0)]}


# -- sample weights, class weights and validation_split -----------------------------------------------


SAMPLE_WEIGHTS = np.array([1.0, 0.0, 2.0, 0.5, 1.0, 3.0, 0.0, 1.0, 0.25, 2.0], np.float32)


def _weighted_classifier(env: KerasEnv, scoped: bool, learning_rate: float = 0.2) -> Any:
    """The 3-class MLP on logits with SGD, accuracy, and weighted accuracy and cross-entropy."""
    k = env.keras
    return _model(env, 3, lambda: k.optimizers.SGD(learning_rate=learning_rate),
                  k.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"], scoped=scoped,
                  weighted_metrics=["accuracy", k.metrics.SparseCategoricalCrossentropy(from_logits=True, name="ce")])


def _fit_and_evaluate(model: Any, fit: dict[str, Any], evaluate: dict[str, Any], epochs: int = 2) -> Result:
    """History, weights and the list evaluate() returns after ``model.fit(**fit)``."""
    history = model.fit(**fit, epochs=epochs, verbose=0)
    return {"history": _history(history), "weights": model.get_weights(),
            "evaluate": [np.float32(v) for v in model.evaluate(**evaluate, verbose=0)]}


def _sample_weight_fits(env: KerasEnv, scoped: bool) -> Result:
    """fit and evaluate with sample weights on arrays (vector, column, float64, zeros) and in dataset triples; 10
    examples in batches of 4 (the last one split 1 and 1 over the replicas)."""
    data = env.data
    x, y = _examples(10, 3)
    xv, yv = _examples(6, 3)
    w = SAMPLE_WEIGHTS

    def arrays(weights: Any, **fit: Any) -> Result:
        return _fit_and_evaluate(_weighted_classifier(env, scoped),
                                 dict(x=x, y=y, sample_weight=weights, batch_size=4, shuffle=False, **fit),
                                 dict(x=x, y=y, sample_weight=weights, batch_size=4))
    triples = data.Dataset.from_tensor_slices((x, y, w)).batch(4)
    out: Result = {
        "arrays": attempt(lambda: arrays(w)),
        "dataset_triples": attempt(lambda: _fit_and_evaluate(_weighted_classifier(env, scoped),
                                                             dict(x=triples, shuffle=False), dict(x=triples))),
        "validation_triple": attempt(lambda: arrays(w, validation_data=(xv, yv, w[:6] * 2))),
    }
    if scoped:
        out.update({
            "column": attempt(lambda: arrays(w[:, None])),
            "float64": attempt(lambda: arrays(w.astype(np.float64))),
            "zeros": attempt(lambda: arrays(np.zeros(10, np.float32))),
            "dataset_column_triples": attempt(lambda: _fit_and_evaluate(
                _weighted_classifier(env, scoped), dict(x=data.Dataset.from_tensor_slices((x, y, w[:, None])).batch(4),
                                                        shuffle=False), dict(x=triples))),
            "evaluate_steps": attempt(lambda: [np.float32(v) for v in _weighted_classifier(env, scoped).evaluate(
                x, y, sample_weight=w, steps=5, verbose=0)]),
            "evaluate_unweighted": attempt(lambda: _weighted_classifier(env, scoped).evaluate(
                x, y, batch_size=4, verbose=0, return_dict=True)),
            "last_batch_one_example": attempt(lambda: _fit_and_evaluate(
                _weighted_classifier(env, scoped), dict(x=x[:5], y=y[:5], sample_weight=w[5:], batch_size=4,
                                                        shuffle=False), dict(x=x[:5], y=y[:5], batch_size=4))),
        })
    return out


@case
def fit_sample_weight(env: KerasEnv) -> Result:
    """Sample weights scale the compiled loss (whose "sum_over_batch_size" still divides by the number of examples)
    and the weighted metrics, not the plain ones nor the loss metric's batch weighting; in the strategy's scope and
    under the default strategy."""
    return {"mirrored": attempt(lambda: _sample_weight_fits(env, scoped=True)),
            "default": attempt(lambda: _sample_weight_fits(env, scoped=False))}


def _class_weight_fits(env: KerasEnv, scoped: bool) -> Result:
    """class_weight on sparse, column, one-hot and binary labels, from arrays and from datasets."""
    k, data = env.keras, env.data
    x, y = _examples(10, 3)
    binary = (y[:, None] == 1).astype(np.float32)

    def run(labels: Any, class_weight: Any, dataset: bool, outputs: int = 3, loss: Any = None,
            activation: Any = None) -> Result:
        loss = loss or k.losses.SparseCategoricalCrossentropy(from_logits=True)
        model = _model(env, outputs, lambda: k.optimizers.SGD(learning_rate=0.2), loss, ["accuracy"], activation,
                       weighted_metrics=["accuracy"], scoped=scoped)
        inputs = (dict(x=data.Dataset.from_tensor_slices((x, labels)).batch(4)) if dataset
                  else dict(x=x, y=labels, batch_size=4))
        return _fit_and_evaluate(model, dict(**inputs, class_weight=class_weight, shuffle=False), inputs)
    sparse = {0: 0.5, 1: 2.0}  # class 2 weighs 1.0
    out: Result = {"sparse_arrays": attempt(lambda: run(y, sparse, False)),
                   "sparse_dataset": attempt(lambda: run(y, {**sparse, 2: 1.0}, True))}
    if scoped:
        one_hot = dict(labels=np.eye(3)[y], outputs=3, loss="categorical_crossentropy", activation="softmax")
        sigmoid = dict(labels=binary, outputs=1, loss="binary_crossentropy", activation="sigmoid")
        out.update({
            "column_arrays": attempt(lambda: run(y[:, None], sparse, False)),
            "one_hot_arrays": attempt(lambda: run(class_weight={0: 1.0, 1: 3.0, 2: 0.5}, dataset=False, **one_hot)),
            "one_hot_dataset": attempt(lambda: run(class_weight={0: 1.0, 1: 3.0, 2: 0.5}, dataset=True, **one_hot)),
            "binary_arrays": attempt(lambda: run(class_weight={0: 0.2, 1: 1.5}, dataset=False, **sigmoid)),
            "binary_dataset": attempt(lambda: run(class_weight={0: 0.2, 1: 1.5}, dataset=True, **sigmoid)),
            "int_weights_dataset": attempt(lambda: run(y, {0: 1, 1: 2, 2: 3}, True)),
            "float_labels_arrays": attempt(lambda: run(y.astype(np.float32) + 0.4, sparse, False)),
            "outside_classes_arrays": attempt(lambda: run(y, {5: 2.0, -1: 3.0}, False)),
            "empty_arrays": attempt(lambda: run(y, {}, False)),
            "empty_dataset": attempt(lambda: run(y, {}, True)),
        })
    else:  # (under the default strategy: mirrorlab's MirroredStrategy stays aborted after an input pipeline error)
        # TF's message is a graph-execution report: the class is compared
        out["missing_class_dataset"] = type(attempt(lambda: run(y, sparse, True))).__name__
    return out


@case
def fit_class_weight(env: KerasEnv) -> Result:
    """class_weight maps each label's class (the arg-max of one-hot rows, the rounded value of sparse or binary
    labels) to its sample weight; arrays give missing classes 1.0, datasets look classes up in a table up to the
    largest key."""
    return {"mirrored": attempt(lambda: _class_weight_fits(env, scoped=True)),
            "default": attempt(lambda: _class_weight_fits(env, scoped=False))}


def _class_repr_free(value: Any) -> Any:
    """An error with the classes its message names (each framework's own) replaced by ``<class>``."""
    if isinstance(value, BaseException):
        return {**error_json(value), "message": re.sub(r"<class '[\w.]+'>", "<class>", error_json(value)["message"])}
    return value


def _validation_split_fits(env: KerasEnv, scoped: bool) -> Result:
    """validation_split takes the last part of the arrays before shuffling (a frozen model shows which part), with
    sample or class weights; validation_data takes precedence; Keras' arithmetic on odd fractions and its errors.
    Batches split evenly over the replicas, or leave one empty (TF's fit fails on other uneven splits)."""
    data = env.data
    x, y = _examples(10, 3)
    xv, yv = _examples(6, 3)

    def run(split: float, learning_rate: float = 0.2, shuffle: bool = False, epochs: int = 2, **fit: Any) -> Result:
        model = _weighted_classifier(env, scoped, learning_rate)
        history = model.fit(x, y, batch_size=4, epochs=epochs, shuffle=shuffle, verbose=0, validation_split=split,
                            **fit)
        return {"history": _history(history), "weights": model.get_weights()}
    out: Result = {
        "frozen_shuffled": attempt(lambda: run(0.2, learning_rate=0.0, shuffle=True)),
        "sample_weight": attempt(lambda: run(0.4, sample_weight=SAMPLE_WEIGHTS)),
    }
    if scoped:
        dataset = data.Dataset.from_tensor_slices((x, y)).batch(4)
        out.update({
            "trained": attempt(lambda: run(0.4)),
            "class_weight": attempt(lambda: run(0.4, class_weight={0: 0.5, 1: 2.0})),
            "validation_data_wins": attempt(lambda: run(0.5, validation_data=(xv, yv))),
            "validation_batch_size": attempt(lambda: run(0.6, validation_batch_size=2)),
            "above_one": attempt(lambda: run(1.5, epochs=1)),  # trains on the first 5 (the last batch: 1 and 0)
            "too_few_for_training": attempt(lambda: run(0.95)),
            "too_few_for_validation": attempt(lambda: run(1e-17)),
            "zero": attempt(lambda: run(0.0, epochs=1)),
            "dataset": _class_repr_free(attempt(lambda: _weighted_classifier(env, scoped).fit(
                dataset, validation_split=0.2, verbose=0))),
            "distributed_dataset": _class_repr_free(attempt(lambda: _weighted_classifier(env, scoped).fit(
                env.strategy.experimental_distribute_dataset(dataset), validation_split=0.2, verbose=0))),
            "dataset_with_validation_data": attempt(lambda: _history(_weighted_classifier(env, scoped).fit(
                dataset, validation_split=0.2, validation_data=(xv, yv), shuffle=False, verbose=0))),
        })
    return out


@case
def fit_validation_split(env: KerasEnv) -> Result:
    """validation_split in the strategy's scope and under the default strategy."""
    return {"mirrored": attempt(lambda: _validation_split_fits(env, scoped=True)),
            "default": attempt(lambda: _validation_split_fits(env, scoped=False))}


@case
def fit_weight_argument_errors(env: KerasEnv) -> Result:
    """Keras' errors for weights and targets it cannot take: both sample_weight and class_weight, weights or targets
    beside a dataset, class_weight on a dataset of triples, on a distributed dataset or with nested labels, arrays of
    different lengths, evaluate(class_weight=...), validation_data of four values, metrics given as a string."""
    k, data, s = env.keras, env.data, env.strategy
    x, y = _examples(10, 3)
    w = SAMPLE_WEIGHTS
    pairs = data.Dataset.from_tensor_slices((x, y)).batch(4)
    triples = data.Dataset.from_tensor_slices((x, y, w)).batch(4)

    def fit(*args: Any, **kwargs: Any) -> Any:
        return _weighted_classifier(env, True).fit(*args, verbose=0, **kwargs).history

    def compiled(**metrics: Any) -> Any:
        model = k.Sequential([k.Input((3,)), k.layers.Dense(3)])
        model.compile(optimizer="sgd", loss="mse", **metrics)
        return model.evaluate(x, np.eye(3)[y], verbose=0)
    return {
        "class_and_sample_weight": attempt(lambda: fit(x, y, sample_weight=w, class_weight={0: 2.0})),
        "class_weight_on_triples": attempt(lambda: fit(triples, class_weight={0: 2.0}, shuffle=False)),
        "sample_weight_beside_dataset": attempt(lambda: fit(pairs, sample_weight=w, shuffle=False)),
        "y_beside_dataset": attempt(lambda: fit(pairs, y, shuffle=False)),
        "both_beside_dataset": attempt(lambda: fit(pairs, y, sample_weight=w, class_weight={0: 2.0})),
        "class_weight_distributed": attempt(lambda: fit(s.experimental_distribute_dataset(pairs),
                                                        class_weight={0: 2.0}, shuffle=False)),
        "class_weight_nested_labels": attempt(lambda: fit(data.Dataset.from_tensor_slices((x, (y, y))).batch(4),
                                                          class_weight={0: 2.0}, shuffle=False)),
        "weights_too_short": attempt(lambda: fit(x, y, sample_weight=w[:7])),
        "labels_too_short": attempt(lambda: fit(x, y[:9])),
        "evaluate_sample_weight_beside_dataset": attempt(lambda: _weighted_classifier(env, True).evaluate(
            pairs, sample_weight=w, verbose=0)),
        "evaluate_class_weight": attempt(lambda: _weighted_classifier(env, True).evaluate(
            x, y, class_weight={0: 2.0}, verbose=0)),
        "validation_data_of_four": attempt(lambda: fit(x, y, validation_data=(x, y, w, w))),
        "metrics_string": attempt(lambda: compiled(metrics="mae")),
        "weighted_metrics_string": attempt(lambda: compiled(weighted_metrics="mae")),
    }


@case
def weighted_metric_names(env: KerasEnv) -> Result:
    """Log names when metrics and weighted metrics repeat names (``_1``, ``weighted_``), evaluate's list in Keras'
    order (a repeated name is looked up again), and EarlyStopping's direction for a weighted metric's log."""
    k = env.keras
    x, y = _examples(8, 3)

    def model() -> Any:
        return _model(env, 3, lambda: k.optimizers.SGD(learning_rate=0.1),
                      k.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy", "acc", "accuracy",
                                                                  k.metrics.SparseCategoricalAccuracy(name="accuracy")],
                      weighted_metrics=["accuracy", "accuracy", "acc", k.metrics.SparseCategoricalAccuracy(name="sca")])

    def fitted() -> Result:
        trained = model()
        history = trained.fit(x, y, sample_weight=SAMPLE_WEIGHTS[:8], batch_size=4, shuffle=False, verbose=0)
        return {"history": _history(history),
                "evaluate": [np.float32(v) for v in trained.evaluate(x, y, sample_weight=SAMPLE_WEIGHTS[:8],
                                                                     batch_size=4, verbose=0)]}
    return {
        "fitted": attempt(fitted),
        "early_stopping_weighted": attempt(lambda: _history(model().fit(
            x, y, batch_size=4, epochs=2, verbose=0, validation_data=(x, y),
            callbacks=[k.callbacks.EarlyStopping(monitor="val_weighted_accuracy")]))),
    }


def _shape_errors(env: KerasEnv, scoped: bool) -> Result:
    """Label and input shapes fit and evaluate refuse: the messages show the shapes Keras' trace saw (a replica's
    static batch size for full array batches, None for a dataset's or a partial batch). (The first fit or evaluate
    of a model made in a strategy's scope shows its first batch's shapes instead, as Keras builds the model on
    that batch: there, a dataset comes after a first fit, and partial batches are left out, as TF retraces a
    second fit on arrays with relaxed shapes.)"""
    k, data = env.keras, env.data
    x, y = _examples(8, 3)
    one_hot4 = np.eye(4)[y]

    def fit(labels: Any, loss: Any, outputs: int = 3, activation: Any = None, features: Any = x,
            after_a_fit: bool = False, **kwargs: Any) -> Any:
        model = _model(env, outputs, lambda: k.optimizers.SGD(learning_rate=0.1), loss, ["accuracy"], activation,
                       scoped=scoped)
        if after_a_fit:
            model.fit(x, np.eye(3)[y], batch_size=4, verbose=0, shuffle=False)
        return _history(model.fit(features, labels, shuffle=False, verbose=0, **kwargs))
    sparse = k.losses.SparseCategoricalCrossentropy(from_logits=True)
    out: Result = {
        "sparse_one_hot_labels": attempt(lambda: fit(np.eye(3)[y][:, :2], sparse, batch_size=4)),
        "categorical_four_classes": attempt(lambda: fit(one_hot4, "categorical_crossentropy", batch_size=4)),
        "binary_four_wide": attempt(lambda: fit(one_hot4, "binary_crossentropy", activation="sigmoid",
                                                batch_size=4)),
        "dataset": attempt(lambda: fit(None, "categorical_crossentropy", after_a_fit=scoped,
                                       features=data.Dataset.from_tensor_slices((x, one_hot4)).batch(4))),
        "inputs_two_wide": attempt(lambda: fit(y, sparse, features=x[:, :2], batch_size=4)),
        "evaluate_sparse_one_hot_labels": attempt(lambda: _model(
            env, 3, lambda: k.optimizers.SGD(), sparse, [], scoped=scoped).evaluate(
                x, np.eye(3)[y][:, :2], batch_size=4, verbose=0)),
    }
    if not scoped:
        out["partial_batch"] = attempt(lambda: fit(one_hot4, "categorical_crossentropy", batch_size=6))
    return out


@case
def fit_shape_errors(env: KerasEnv) -> Result:
    """Shape errors of fit and evaluate in the strategy's scope and under the default strategy; a Dense layer's and a
    model's input checks called directly; weights that broadcast against a replica's losses train (TF does)."""
    k, tf = env.keras, env.tf
    x, y = _examples(8, 3)
    dense = k.layers.Dense(2, name="solo")
    dense(x[:1])
    model = k.Sequential([k.Input((3,)), k.layers.Dense(2, name="first"), k.layers.Dense(2, name="second")])
    model.set_weights([np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1]], np.float32), np.array([0.2, -0.1], np.float32),
                       np.array([[1.0, -0.5], [0.25, 0.75]], np.float32), np.zeros(2, np.float32)])

    def broadcast_weights() -> list[Any]:
        with tf.GradientTape() as tape:
            value = k.losses.MeanSquaredError()(np.zeros((2, 2)), model(x[:2]), sample_weight=np.array([[1.0, 2.0],
                                                                                                      [0.5, 3.0]]))
        return [value, tape.gradient(value, model.trainable_variables)]

    def trained_with_matrix_weights() -> Result:  # [2] losses times [2, 2] weights on each replica
        classifier = _model(env, 3, lambda: k.optimizers.SGD(learning_rate=0.2),
                            k.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"])
        history = classifier.fit(x, y, sample_weight=np.tile(SAMPLE_WEIGHTS[:8, None], (1, 2)), batch_size=4,
                                 shuffle=False, verbose=0)
        return {"history": _history(history), "weights": classifier.get_weights()}
    return {
        "mirrored": attempt(lambda: _shape_errors(env, scoped=True)),
        "default": attempt(lambda: _shape_errors(env, scoped=False)),
        "dense_two_wide": attempt(lambda: dense(x[:, :2])),
        "dense_vector": attempt(lambda: dense(x[0])),
        "model_two_wide": attempt(lambda: model(x[:, :2])),
        "model_vector": attempt(lambda: model(x[0])),
        "predict_two_wide": attempt(lambda: model.predict(x[:, :2], verbose=0)),
        "broadcast_weights_gradient": attempt(broadcast_weights),
        "matrix_weights_on_replicas": attempt(trained_with_matrix_weights),
    }


# -- the epoch iterator, building on the first batch, metric shape errors -------------------------------------


def _hook_recorder(env: KerasEnv, events: list[str]) -> Any:
    """A callback writing each hook fit calls (epoch and batch numbers, the epoch logs' keys) to ``events``."""
    hooks = {"on_train_begin": lambda self, logs=None: events.append(f"begin {len(self.model.weights)} weights"),
             "on_epoch_begin": lambda self, epoch, logs=None: events.append(f"epoch {epoch}"),
             "on_train_batch_begin": lambda self, batch, logs=None: events.append(f"batch {batch}"),
             "on_train_batch_end": lambda self, batch, logs=None: events.append(f"end {batch}"),
             "on_epoch_end": lambda self, epoch, logs=None: events.append(f"epoch end {sorted(logs or {})}")}
    return type("HookRecorder", (env.keras.callbacks.Callback,), hooks)()


def _ran_out(messages: list[str]) -> int:
    """How many of the warnings ``messages`` are Keras' "ran out of data"."""
    return len([m for m in messages if "ran out of data" in m])


def _recorded_fit(env: KerasEnv, model: Any, *args: Any, **kwargs: Any) -> Result:
    """History, hook sequence, "ran out of data" warnings and weights of ``model.fit(*args, **kwargs)``."""
    events: list[str] = []
    history, warned_of = warned(lambda: model.fit(*args, verbose=0, callbacks=[_hook_recorder(env, events)],
                                                  **kwargs))
    if isinstance(history, Exception):
        return {"error": history, "events": events}
    return {"history": _history(history), "events": events, "weights": model.get_weights(),
            "ran_out_warnings": _ran_out(warned_of)}


def _steps_per_epoch_fits(env: KerasEnv, scoped: bool) -> Result:
    """steps_per_epoch on data that ends: 10 examples in 5 global batches of 2 (known number of batches), or behind a
    filter (unknown); the epoch that reaches the end stops short and the next starts a fresh pass."""
    data = env.data
    x, y = _examples(10, 3)

    def fit(source: str, steps: int | None, epochs: int = 3) -> Result:
        model = _classifier(env) if scoped else _model(env, 3, lambda: env.keras.optimizers.SGD(learning_rate=0.1),
                                                       env.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                                       ["accuracy"], scoped=False)
        dataset = data.Dataset.from_tensor_slices((x, y))
        inputs = {"arrays": dict(x=x, y=y, batch_size=2, shuffle=False), "dataset": dict(x=dataset.batch(2)),
                  "unknown": dict(x=dataset.filter(lambda a, b: True).batch(2))}[source]
        return _recorded_fit(env, model, epochs=epochs, steps_per_epoch=steps, **inputs)
    return {"arrays_2_of_5": attempt(lambda: fit("arrays", 2, epochs=4)),
            "arrays_3_of_5": attempt(lambda: fit("arrays", 3)),
            "dataset_3_of_5": attempt(lambda: fit("dataset", 3)),
            "dataset_5_of_5": attempt(lambda: fit("dataset", 5, epochs=2)),
            "dataset_7_of_5": attempt(lambda: fit("dataset", 7, epochs=2)),
            "unknown_3": attempt(lambda: fit("unknown", 3, epochs=4)),
            "unknown_2": attempt(lambda: fit("unknown", 2)),
            "unknown_no_steps": attempt(lambda: fit("unknown", None, epochs=2))}


@case
def fit_steps_per_epoch_on_finite_data(env: KerasEnv) -> Result:
    """Keras 3 keeps one iterator across epochs with steps_per_epoch; data that ends (known length: where its batches
    are used up; unknown: at the step that finds the end, which Keras counts) stops that epoch short, with a warning,
    and the next epoch starts a fresh pass (training goes on); in the strategy's scope and under the default one."""
    return {"mirrored": attempt(lambda: _steps_per_epoch_fits(env, scoped=True)),
            "default": attempt(lambda: _steps_per_epoch_fits(env, scoped=False))}


def _lazy_model(env: KerasEnv, scoped: bool) -> Any:
    """A model without an input shape (built by its first data), compiled with SGD, MSE and MAE."""
    k = env.keras
    with env.strategy.scope() if scoped else contextlib.nullcontext():
        model = k.Sequential([k.layers.Dense(2, kernel_initializer="ones", name="lazy")])
        model.compile(optimizer=k.optimizers.SGD(learning_rate=0.1), loss="mse", metrics=["mae"])
    return model


def _first_batch_builds(env: KerasEnv, scoped: bool) -> Result:
    """What fit and evaluate build before (or without) a step, and what they make of data without batches (the step
    Keras tries on them, its warning)."""
    data = env.data
    x, y = _examples(8, None)
    empty = data.Dataset.from_tensor_slices((x, y)).batch(16, drop_remainder=True)

    def no_epochs() -> Result:
        model = _lazy_model(env, scoped)
        return {**_recorded_fit(env, model, x, y, batch_size=4, epochs=2, initial_epoch=2, shuffle=False),
                "weight_shapes": [list(w.shape) for w in model.get_weights()]}

    def evaluated(dataset: Any, return_dict: bool) -> Any:
        model = _lazy_model(env, scoped)
        result, warned_of = warned(lambda: model.evaluate(dataset, verbose=0, return_dict=return_dict))
        return [result, len(model.get_weights()), _ran_out(warned_of)]
    out: Result = {"no_epochs": attempt(no_epochs),
                   "empty_dataset": attempt(lambda: _recorded_fit(env, _lazy_model(env, scoped), empty, epochs=2)),
                   "empty_arrays": attempt(lambda: _recorded_fit(env, _lazy_model(env, scoped), x[:0], y[:0])),
                   "evaluate_empty": attempt(lambda: evaluated(empty, False)),
                   "evaluate_empty_dict": attempt(lambda: evaluated(empty, True)),
                   "empty_validation": attempt(lambda: _recorded_fit(env, _lazy_model(env, scoped), x, y,
                                                                      batch_size=4, shuffle=False,
                                                                      validation_data=empty))}
    if not scoped:  # an epoch without steps after trained ones logs the metrics as reset, and validates
        unknown = data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(2)
        out["empty_epoch_after_training"] = attempt(lambda: _recorded_fit(
            env, _lazy_model(env, scoped), unknown, epochs=3, steps_per_epoch=2, validation_data=(x, y)))
    return out


@case
def fit_builds_on_the_first_batch(env: KerasEnv) -> Result:
    """A model made in a strategy's scope is built (with its metrics and optimizer) from the first batch before fit
    or evaluate starts: data without batches raises StopIteration there, and fit without epochs builds; under the
    default strategy the first step's trace builds, even on data without batches (then evaluate gives empty
    results), and fit without epochs builds nothing."""
    return {"mirrored": attempt(lambda: _first_batch_builds(env, scoped=True)),
            "default": attempt(lambda: _first_batch_builds(env, scoped=False))}


def _metric_shape_errors(env: KerasEnv, scoped: bool) -> Result:
    """A metric refusing the labels' shape (binary cross-entropy of flat labels against a column of outputs; the loss
    matches ranks and passes): no step trains; the message shows the first batch's shapes in the strategy's scope (on
    the first fit), the traced ones otherwise (None for a partial batch)."""
    k = env.keras
    x, y = _examples(7, None)
    flat = (y[:, 0] > 0).astype(np.float32)

    def fit_then_evaluate(batch_size: int, examples: int = 7) -> Result:
        trained = _model(env, 1, lambda: k.optimizers.SGD(learning_rate=0.5),
                         k.losses.BinaryCrossentropy(from_logits=True),
                         [k.metrics.BinaryCrossentropy(from_logits=True)], scoped=scoped)
        return {"fit": attempt(lambda: trained.fit(x[:examples], flat[:examples], batch_size=batch_size, shuffle=False,
                                                   verbose=0)),
                "weights": trained.get_weights(),
                "evaluate": attempt(lambda: trained.evaluate(x, flat, batch_size=2, verbose=0))}

    def metric_after_loss_error() -> Any:  # a first fit failing in the loss and the metric: which one speaks
        both = _model(env, 2, lambda: k.optimizers.SGD(), "categorical_crossentropy",
                      [k.metrics.CategoricalCrossentropy()], scoped=scoped)
        return both.fit(x[:4], np.eye(3)[[0, 1, 2, 0]], batch_size=4, shuffle=False, verbose=0)
    return {"partial_batches": attempt(lambda: fit_then_evaluate(4)),
            "one_batch": attempt(lambda: fit_then_evaluate(8, examples=6)),
            "metric_and_loss_refuse": attempt(metric_after_loss_error)}


@case
def fit_metric_shape_errors(env: KerasEnv) -> Result:
    """A compiled metric's shape error stops fit before any update, as Keras' traced step does, in the strategy's
    scope and under the default strategy."""
    return {"mirrored": attempt(lambda: _metric_shape_errors(env, scoped=True)),
            "default": attempt(lambda: _metric_shape_errors(env, scoped=False))}


@case
def layers_cast_their_inputs(env: KerasEnv) -> Result:
    """Keras' autocast: layers take floating inputs in their dtype (float32), and Dense any input, so float64 or
    integer data give float32 outputs, predictions and training."""
    k = env.keras
    x, y = _examples(6, None)
    x64, ints = x.astype(np.float64), np.round(x).astype(np.int64)

    def dense() -> Any:
        layer = k.layers.Dense(2, kernel_initializer="ones", name="cast")
        layer(x[:1])
        return layer

    def model(input_dtype: str = "float32") -> Any:
        built = k.Sequential([k.Input((3,), dtype=input_dtype), k.layers.Dense(2, name="first")])
        built.set_weights([np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1]], np.float32), np.array([0.2, -0.1],
                                                                                                     np.float32)])
        return built

    def trained() -> Result:
        fitted = _model(env, 2, lambda: k.optimizers.SGD(learning_rate=0.1), "mse", ["mae"])
        history = fitted.fit(x64, y.astype(np.float64), batch_size=2, shuffle=False, verbose=0)
        return {"history": _history(history), "weights": fitted.get_weights(),
                "predict": fitted.predict(x64, batch_size=2, verbose=0),
                "evaluate": [np.float32(v) for v in fitted.evaluate(x64, y.astype(np.float64), verbose=0)]}
    return {"dense_float64": attempt(lambda: dense()(x64)), "dense_ints": attempt(lambda: dense()(ints)),
            "activation_float64": attempt(lambda: k.layers.Activation("relu")(x64)),
            "dropout_float64": attempt(lambda: k.layers.Dropout(0.5)(x64)),
            "flatten_float64": attempt(lambda: k.layers.Flatten()(x64)),
            "flatten_ints": attempt(lambda: k.layers.Flatten()(ints)),
            "model_float64": attempt(lambda: model()(x64)), "model_ints": attempt(lambda: model()(ints)),
            "float64_input_layer": attempt(lambda: model("float64")(x64)),
            "predict_float64": attempt(lambda: model().predict(x64, verbose=0)),
            "predict_dataset_float64": attempt(lambda: model().predict(
                env.data.Dataset.from_tensor_slices(x64).batch(4), verbose=0)),
            "fit_float64": attempt(trained)}


@case
def regularizer_identifiers(env: KerasEnv) -> Result:
    """keras.regularizers.get: the classes' names and their snake case (not the l1_l2 alias)."""
    R = env.keras.regularizers
    return {name: attempt(lambda: type(R.get(name)).__name__) for name in ("l1", "l2", "l1l2", "l1_l2", "L1", "L2",
                                                                          "L1L2", "nope")}


def _unreduced_fits(env: KerasEnv, scoped: bool) -> Result:
    """A compiled loss of reduction "none" (or None): trained as the sum of its values and logged as their mean (by
    the number of replicas in the strategy's scope); with a regularized layer Keras' add_n refuses the vector in
    fit and evaluate, before any update."""
    k = env.keras
    x, y = _examples(8, None)

    def fit(reduction: Any, regularizer: Any) -> Result:
        with env.strategy.scope() if scoped else contextlib.nullcontext():
            model = k.Sequential([k.Input((3,)), k.layers.Dense(2, kernel_initializer="ones",
                                                                kernel_regularizer=regularizer, name="unreduced")])
            model.compile(optimizer=k.optimizers.SGD(learning_rate=0.1),
                          loss=k.losses.MeanSquaredError(reduction=reduction), metrics=["mae"])
        history = attempt(lambda: _history(model.fit(x, y, batch_size=4, shuffle=False, verbose=0)))
        return {"history": history, "weights": model.get_weights(),
                "evaluate": attempt(lambda: [np.float32(v) for v in model.evaluate(x, y, batch_size=4, verbose=0)])}
    return {f"{reduction}|{regularizer}": attempt(lambda: fit(reduction, regularizer))
            for reduction in ("none", None, "sum") for regularizer in (None, "l2")}


@case
def fit_unreduced_loss(env: KerasEnv) -> Result:
    """fit and evaluate with an unreduced compiled loss, with and without regularizers, in the strategy's scope and
    under the default strategy."""
    return {"mirrored": attempt(lambda: _unreduced_fits(env, scoped=True)),
            "default": attempt(lambda: _unreduced_fits(env, scoped=False))}


def _broadcast_fits(env: KerasEnv, scoped: bool) -> Result:
    """Flat labels against 3 outputs: element-wise losses and metrics broadcast them against the predictions, which
    fails in the trace when the batch size is static (ValueError, a graph report) or, unknown, when the step runs;
    a (replica's) batch of 3 or 1 broadcasts and trains."""
    k, data = env.keras, env.data
    x, y = _examples(6, None)
    flat = y[:, 0]

    def fit(loss: Any, metrics: list[Any], labels: Any = flat, **inputs: Any) -> Result:
        model = _model(env, 3, lambda: k.optimizers.SGD(learning_rate=0.1), loss, metrics, scoped=scoped)
        history = attempt(lambda: _history(model.fit(**inputs, verbose=0) if "x" in inputs else
                                           model.fit(x, labels, shuffle=False, verbose=0, **inputs)))
        return {"history": history, "weights": model.get_weights()}
    classes = np.array([0, 1, 2, 1, 0, 2])
    out: Result = {"mse_static": attempt(lambda: fit("mse", [], batch_size=2)),
                   "mae_batch_of_3": attempt(lambda: fit(k.losses.MeanAbsoluteError(), [],
                                                         batch_size=6 if scoped else 3)),
                   "metric_static": attempt(lambda: fit("sparse_categorical_crossentropy", ["mse"], labels=classes,
                                                        batch_size=2))}
    if not scoped:
        out["huber_dataset"] = attempt(lambda: fit(k.losses.Huber(), [], x=data.Dataset.from_tensor_slices(
            (x, flat)).batch(4)))
        out["eager_loss"] = attempt(lambda: k.losses.MeanSquaredError()(flat[:2], np.zeros((2, 3), np.float32)))
    return out


@case
def fit_label_broadcast_errors(env: KerasEnv) -> Result:
    """Labels the element-wise losses and metrics cannot broadcast against the outputs, in the strategy's scope (the
    first batch's shapes) and under the default strategy."""
    return {"mirrored": attempt(lambda: _broadcast_fits(env, scoped=True)),
            "default": attempt(lambda: _broadcast_fits(env, scoped=False))}


@case
def learning_rate_scheduler_logs(env: KerasEnv) -> Result:
    """LearningRateScheduler logs the learning rate into an epoch's logs only when they hold something: not after an
    epoch without steps on data without batches (under the default strategy), but beside its validation results."""
    k, data = env.keras, env.data
    x, y = _examples(4, None)
    empty = data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)

    def fit(**kwargs: Any) -> Result:
        schedule = k.callbacks.LearningRateScheduler(lambda epoch: 0.1 / (epoch + 1))
        history, warned_of = warned(lambda: _lazy_model(env, scoped=False).fit(empty, epochs=2, verbose=0,
                                                                               callbacks=[schedule], **kwargs))
        return {"history": _history(history), "ran_out_warnings": _ran_out(warned_of)}
    return {"empty": attempt(fit), "empty_validated": attempt(lambda: fit(validation_data=(x, y)))}


@case
def fit_trace_errors_come_first(env: KerasEnv) -> Result:
    """Under the default strategy Keras traces a step before it runs, so a trace error (an unreduced loss beside a
    regularizer) comes before errors of running it: labels that cannot broadcast in a batch of unknown size, a class
    missing from class_weight's table."""
    k, data = env.keras, env.data
    x, y = _examples(5, 3)

    def fit(**inputs: Any) -> Any:
        model = k.Sequential([k.Input((3,)), k.layers.Dense(3, kernel_regularizer="l2", name="regularized")])
        model.compile(optimizer=k.optimizers.SGD(), loss=k.losses.MeanSquaredError(reduction="none"))
        return model.fit(**inputs, verbose=0)
    one_hot = np.eye(3, dtype=np.float32)[y]
    return {"labels_do_not_broadcast": attempt(lambda: fit(x=x, y=one_hot[:, 0], batch_size=4, shuffle=False)),
            "class_missing": attempt(lambda: fit(x=data.Dataset.from_tensor_slices((x, one_hot)).batch(2),
                                                 class_weight={0: 2.0}))}


@case
def clipped_adam_follows_tf_rounding(env: KerasEnv) -> Result:
    """Adam with a small global_clipnorm amplifies the last bits of the gradients (its steps are near epsilon): a
    sparse cross-entropy on probabilities with sample weights and an L2 regularizer trains to TF's weights only
    when the loss gradient and the clipping round as TF's ops do (found by the differential fuzzer, seed 1124101)."""
    k, data = env.keras, env.data
    rng = np.random.RandomState(719163)
    x = rng.uniform(-2, 2, (11, 1)).astype(np.float32).astype(np.float64)
    y = rng.randint(0, 2, 11).astype(np.int32)
    w = rng.choice(np.array([0.0, 0.5, 1.0, 2.0], np.float32), 11)
    model = k.Sequential([k.layers.Dense(1, input_shape=(1,), name="d0"),
                          k.layers.Dense(2, kernel_regularizer=k.regularizers.L2(0.1), name="d1")])
    start = np.random.RandomState(719163)
    model.set_weights([start.uniform(-1, 1, v.shape).astype(np.float32) for v in model.get_weights()])
    model.compile(optimizer=k.optimizers.Adam(0.3, epsilon=0.001, amsgrad=True, global_clipnorm=0.1),
                  loss=k.losses.SparseCategoricalCrossentropy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = model.fit(data.Dataset.from_tensor_slices((x, y, w)).batch(3), epochs=1, verbose=0)
    return {"loss": history.history["loss"], "weights": model.get_weights(), "predict": model.predict(x, verbose=0)}


@case
def unreduced_weighted_loss_beside_a_regularizer(env: KerasEnv) -> Result:
    """An unreduced loss cannot be added to the regularization losses; the error names the weighted losses' rank,
    which sample weights of another rank change (a column of weights makes the per-example losses a column)."""
    k, data = env.keras, env.data
    x, y = _examples(4, None)
    out: Result = {}
    for name, weights in (("none", None), ("vector", np.ones(4, np.float32)), ("column", np.ones((4, 1), np.float32))):
        model = k.Sequential([k.Input((3,)), k.layers.Dense(2, kernel_regularizer="l2", name="regularized")])
        model.compile(optimizer=k.optimizers.SGD(), loss=k.losses.MeanSquaredError(reduction="none"))
        arrays = (x, y) if weights is None else (x, y, weights)
        out[name] = attempt(lambda arrays=arrays, model=model: _history(model.fit(
            data.Dataset.from_tensor_slices(arrays).batch(4), verbose=0)))
    return out


@case
def automatic_names(env: KerasEnv) -> Result:
    """Keras 3's automatic names after ``clear_session``: snake case of the class, numbered per name (dense,
    dense_1, ...), for layers, models and optimizers; a default-named layer's input error names it."""
    k = env.keras
    k.backend.clear_session()
    layers = k.layers
    first = k.Sequential([k.Input((4,)), layers.Dense(3, activation="relu"), layers.Dropout(0.1), layers.Dense(2),
                          layers.Activation("softmax")])
    second = k.Sequential([k.Input((2, 2, 1)), layers.Conv2D(1, 2), layers.Flatten(), layers.Reshape((1,)),
                           layers.Dense(1, name="named"), layers.Dense(1)])
    optimizers = [k.optimizers.SGD(), k.optimizers.Adam(), k.optimizers.RMSprop(), k.optimizers.SGD(name="mine"),
                  k.optimizers.SGD()]
    return {
        "models": [first.name, second.name, k.Sequential(name="custom").name, k.Sequential().name],
        "layers": [layer.name for layer in first.layers + second.layers],
        "optimizers": [optimizer.name for optimizer in optimizers],
        "input_error": attempt(lambda: first(np.zeros((1, 5), np.float32))),
    }


@case
def pooling_layers(env: KerasEnv) -> Result:
    """Max and average pooling (valid and same padding, strides, NCHW) and the global poolings after a 1x1
    convolution: outputs, shapes and the convolution kernel's gradient (ties: a max goes to the first largest
    element of its window), and Keras' argument and input errors."""
    k, tf = env.keras, env.tf
    L = k.layers
    image = np.array([[1, 3, 3, 0, 2], [2, 3, 1, 1, 2], [0, 0, 4, 4, 1], [5, 1, 4, 2, 2], [1, 1, 0, 3, 3]], np.float32)
    x = np.stack([image, -image[::-1]], axis=-1)[None].repeat(2, axis=0) * np.array([1, 2], np.float32)[:, None,
                                                                                                          None, None]

    def run(make: Callable[[], Any], channels_first: bool = False) -> Result:
        inputs = x.transpose(0, 3, 1, 2) if channels_first else x
        pool = make()
        if channels_first:  # (no convolution: only its output is compared)
            model = k.Sequential([k.Input(inputs.shape[1:]), pool, L.Flatten()])
        else:
            model = k.Sequential([k.Input(inputs.shape[1:]), L.Conv2D(2, 1, use_bias=False), pool, L.Flatten()])
            model.set_weights([np.array([[[[1.0, 0.5], [0.0, 1.0]]]], np.float32)])
        with tf.GradientTape() as tape:
            out = model(inputs)
            loss = tf.reduce_sum(out * (np.arange(int(np.prod(out.shape[1:])), dtype=np.float32) + 1))
        return {"output": out, "shape": list(pool.compute_output_shape((None, *inputs.shape[1:]))),
                "gradient": tape.gradient(loss, model.trainable_variables) if not channels_first else None}
    layers = {
        "max": lambda: L.MaxPooling2D(), "max_3_stride_1": lambda: L.MaxPooling2D(3, strides=1),
        "max_same": lambda: L.MaxPooling2D(2, padding="same"),
        "max_2x3_same": lambda: L.MaxPooling2D((2, 3), strides=(1, 2), padding="SAME"),
        "average": lambda: L.AveragePooling2D(2), "average_same": lambda: L.AveragePooling2D(2, padding="same"),
        "average_3_same": lambda: L.AveragePooling2D(3, strides=2, padding="same"),
        "global_average": lambda: L.GlobalAveragePooling2D(), "global_max": lambda: L.GlobalMaxPooling2D(),
        "global_average_kept": lambda: L.GlobalAveragePooling2D(keepdims=True),
        "too_large": lambda: L.MaxPooling2D(6),
    }
    out: Result = {name: attempt(lambda make=make: run(make)) for name, make in layers.items()}
    out["max_channels_first"] = attempt(lambda: run(lambda: L.MaxPooling2D(data_format="channels_first"), True))
    out["average_channels_first"] = attempt(lambda: run(lambda: L.AveragePooling2D(
        2, strides=1, padding="same", data_format="channels_first"), True))
    out["errors"] = {
        "pool_size_zero": attempt(lambda: L.MaxPooling2D(0)),
        "pool_size_three": attempt(lambda: L.MaxPooling2D((2, 2, 2))),
        "pool_size_float": attempt(lambda: L.MaxPooling2D(2.5)),
        "data_format": attempt(lambda: L.MaxPooling2D(data_format="nhwc")),
        "rank_3": attempt(lambda: L.MaxPooling2D()(np.zeros((2, 3, 3), np.float32))),
        "global_rank_3": attempt(lambda: L.GlobalMaxPooling2D()(np.zeros((2, 3, 3), np.float32))),
    }
    return out


@case
def weight_variable_names(env: KerasEnv) -> Result:
    """The names of the variables under Keras' weights (the model's name, the layer's, the weight's; inside a
    name scope; mirrored copies), of optimizer slots, as a tape lists them, and in a restore's shape error."""
    import os
    import tempfile

    k, tf = env.keras, env.tf
    k.backend.clear_session()

    def variable(v: Any) -> Any:  # a Keras 3 weight wraps the variable (``.value``); mirrorlab's weight is one
        return v if callable(v.value) else v.value

    def name(v: Any) -> str:
        return variable(v).name

    def model(inputs: int, **kwargs: Any) -> Any:
        return k.Sequential([k.Input((inputs,)), k.layers.Dense(2)], **kwargs)
    with tf.name_scope("outer"):
        scoped = model(3)
        loose = k.layers.Dense(2)
        loose.build((None, 3))
    named = k.Sequential([k.layers.Dense(2)], name="seq")
    named(np.ones((1, 3), np.float32))
    with env.strategy.scope():
        mirrored = model(3)
    optimizer = k.optimizers.Adam()
    optimizer.build(named.trainable_variables)
    with tf.GradientTape() as tape:
        tf.reduce_sum(named(np.ones((1, 3), np.float32)))

    def restore_error() -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            path = env.train.Checkpoint(model=model(3)).save(os.path.join(tmp, "ckpt"))
            return env.train.Checkpoint(model=model(4)).restore(path)
    return {
        "scoped": [name(v) for v in scoped.weights + loose.weights],
        "named": [name(v) for v in named.weights],
        "mirrored": [v.name for v in env.strategy.experimental_local_results(variable(mirrored.weights[0]))],
        "optimizer": [name(v) for v in optimizer.variables],
        "watched": [v.name for v in tape.watched_variables()],
        "restore_error": attempt(restore_error),
    }


@case
def batch_normalization(env: KerasEnv) -> Result:
    """BatchNormalization between two Dense layers: a direct call in training and inference mode, the tape's
    gradients, and fit on 2 replicas (each replica normalizes with its own batch's statistics and updates its own
    copy of the moving statistics: ON_WRITE variables with aggregation NONE, so the copies differ), predict and
    evaluate; Keras' argument errors."""
    k, tf = env.keras, env.tf
    rng = np.random.RandomState(7)
    x = rng.uniform(-2, 2, (8, 3)).astype(np.float32)
    y = rng.randint(0, 2, 8).astype(np.int64)

    def model(**options: Any) -> Any:
        built = k.Sequential([k.Input((3,)), k.layers.Dense(4), k.layers.BatchNormalization(**options),
                              k.layers.Dense(2)])
        built.set_weights([w if w.ndim != 2 else np.random.RandomState(w.size).uniform(-1, 1, w.shape)
                           .astype(np.float32) for w in built.get_weights()])
        return built

    def direct() -> Result:
        layer = k.layers.BatchNormalization(momentum=0.5, epsilon=0.01)
        trained = layer(x, training=True)
        return {"training": trained, "inference": layer(x), "weights": layer.get_weights()}

    def gradients() -> Result:
        net = model(center=True, scale=True)
        with tf.GradientTape() as tape:
            out = net(x, training=True)
            loss = tf.reduce_sum(out * out * np.array([1.0, -2.0], np.float32)) + tf.reduce_sum(out * 0.5)
        return {"loss": loss, "gradients": tape.gradient(loss, net.trainable_variables),
                "moving": net.layers[1].get_weights()[2:]}

    def fitted() -> Result:
        with env.strategy.scope():
            net = model(momentum=0.9)
            net.compile(optimizer=k.optimizers.SGD(learning_rate=0.1),
                        loss=k.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        history = net.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        bn = net.layers[1]
        moving = bn.moving_mean if callable(bn.moving_mean.value) else bn.moving_mean.value
        return {"history": _history(history), "weights": net.get_weights(),
                "moving_mean_copies": env.local(moving), "predict": net.predict(x, verbose=0),
                "evaluate": net.evaluate(x, y, verbose=0)}
    return {
        "direct": attempt(direct), "gradients": attempt(gradients), "fit": attempt(fitted),
        "no_center_scale": attempt(lambda: model(center=False, scale=False)(x, training=True)),
        "axis_1_of_4d": attempt(lambda: k.layers.BatchNormalization(axis=1)(
            np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2), training=True)),
        "weight_names": attempt(lambda: [w.name.split("/")[-1].split(":")[0] for w in model().layers[1].weights]),
        "trainable_count": attempt(lambda: len(model().trainable_variables)),
        "bad_axis": attempt(lambda: k.layers.BatchNormalization(axis=3)(x)),
    }


@case
def restore_into_later_models_of_another_shape(env: KerasEnv) -> Result:
    """A checkpoint read before a model of another shape is attached (or built) restores into it then: under the
    strategy Keras' own assign refuses the shape; without one, the restore's error names the variable."""
    import os
    import tempfile

    k = env.keras
    k.backend.clear_session()  # the layer names in the messages count from dense

    def model(units: int, built: bool = True) -> Any:
        layers = [k.Input((3,)), k.layers.Dense(units, kernel_initializer="ones")] if built else \
            [k.layers.Dense(units, kernel_initializer="ones")]
        return k.Sequential(layers, name=f"m{units}")

    def attach(scoped: bool, built: bool) -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            with env.strategy.scope() if scoped else contextlib.nullcontext():
                path = env.train.Checkpoint(a=model(1)).save(os.path.join(tmp, "ckpt"))
                late = env.train.Checkpoint()
                late.read(path)
                late.a = model(2, built)
                if not built:
                    late.a.build((None, 3))
            return late.a.get_weights()
    return {"mirrored_attached": attempt(lambda: attach(True, True)),
            "mirrored_built_later": attempt(lambda: attach(True, False)),
            "default_attached": attempt(lambda: attach(False, True))}


def _user_layers(k: Any, tf: Any, seen: list[Any]) -> tuple[type, type]:
    """A layer with its own weights (one named, one not kept, one frozen) and a layer composed of a Dense, a Dropout
    and a weight of its own, whose ``call`` records the ``training`` mode it was given in ``seen``."""

    class Affine(k.layers.Layer):
        def __init__(self, units: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.units = units

        def build(self, input_shape: Any) -> None:
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="ones", name="w")
            self.add_weight(shape=(self.units,), initializer="zeros", name="loose")
            self.b = self.add_weight(shape=(self.units,), initializer="ones", trainable=False)

        def call(self, x: Any) -> Any:
            return tf.matmul(x, self.w) * 0.5 + self.b

    class Block(k.layers.Layer):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.inner = k.layers.Dense(2, kernel_initializer="ones")
            self.drop = k.layers.Dropout(0.5)

        def build(self, input_shape: Any) -> None:
            self.s = self.add_weight(shape=(), initializer="ones", name="s")

        def call(self, x: Any, training: Any = None) -> Any:
            seen.append(training)
            return self.drop(self.inner(x)) * self.s
    return Affine, Block


@case
def user_layers(env: KerasEnv) -> Result:
    """Layers written by subclassing ``Layer``: ``add_weight`` (shape, initializer, name, trainable; unnamed weights
    are ``variable``), build on the first call under the layer's name scope, own weights before sublayers', the
    ``training`` mode a call receives (given, or the enclosing call's), checkpoint keys by attribute name (a weight
    not kept as an attribute is not saved), tape gradients through the composed layers, and a layer without ``call``."""
    import os
    import tempfile

    k, tf = env.keras, env.tf
    k.backend.clear_session()
    seen: list[Any] = []
    affine_cls, block_cls = _user_layers(k, tf, seen)
    x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], np.float32)
    affine, block = affine_cls(2), block_cls()

    def names(layer: Any) -> list[str]:
        return [(v if callable(v.value) else v.value).name for v in layer.weights]

    def keys(**objects: Any) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            path = env.train.Checkpoint(**objects).write(os.path.join(tmp, "ckpt"))
            return sorted(name for name, _ in env.train.list_variables(path) if "OBJECT_GRAPH" not in name)
    with tf.GradientTape() as tape:
        out = block(affine(x))
        loss = tf.reduce_sum(out * out)
    grads = tape.gradient(loss, affine.trainable_variables + block.trainable_variables)
    block(x[:, :2], training=True)

    class Bare(k.layers.Layer):
        pass
    return {"output": out, "affine": names(affine), "affine_trainable": len(affine.trainable_weights),
            "block": names(block), "built": [affine.built, block.built], "seen": seen, "gradients": grads,
            "keys": keys(affine=affine, block=block), "no_call": attempt(lambda: Bare()(x))}


@case
def subclassed_models(env: KerasEnv) -> Result:
    """A subclass of ``Model`` holding layers as attributes, in a list and in a dict: its name and layers, ``build``
    (which creates no weights: a subclass builds on its first call), weights built by a first call in the strategy's
    scope, its checkpoint keys (Keras 3 keeps lists and dicts of layers out of TF's object graph, so only the attribute
    layers are saved until an optimizer holds the rest), a ``call`` without ``training`` (fit passes none, so the
    layers inside get their default), and fit/evaluate/predict on 2 replicas."""
    import os
    import tempfile

    k, tf = env.keras, env.tf
    k.backend.clear_session()
    seen: list[Any] = []
    _, block_cls = _user_layers(k, tf, seen)

    class Net(k.Model):
        def __init__(self) -> None:
            super().__init__()
            self.first = k.layers.Dense(4, activation="relu")
            self.stack = [k.layers.Dense(3, activation="tanh")]
            self.heads = {"out": k.layers.Dense(2)}
            self.block = block_cls()

        def call(self, x: Any) -> Any:
            return self.heads["out"](self.block(self.stack[0](self.first(x))))

    def keys(net: Any) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            path = env.train.Checkpoint(model=net).write(os.path.join(tmp, "ckpt"))
            return sorted(name for name, _ in env.train.list_variables(path) if "OBJECT_GRAPH" not in name)
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    y = rng.randint(0, 2, 8).astype(np.int64)
    with env.strategy.scope():
        net = Net()
        before = {"built": net.built, "layers": [layer.name for layer in net.layers]}
        net.build((None, 3))
        after_build = {"built": net.built, "weights": len(net.weights)}
        net(x)
        net.set_weights([np.random.RandomState(w.size).uniform(-1, 1, w.shape).astype(np.float32)
                         for w in net.get_weights()])
        net.compile(optimizer=k.optimizers.SGD(0.1),
                    loss=k.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    mirrored = [len(env.strategy.experimental_local_results(v if callable(v.value) else v.value)) for v in net.weights]
    unfitted_keys = keys(net)
    seen.clear()
    history = net.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    return {"name": net.name, "before": before, "after_build": after_build,
            "layers": [layer.name for layer in net.layers], "shapes": [list(w.shape) for w in net.weights],
            "mirrored": mirrored, "keys": unfitted_keys, "fitted_keys": keys(net),
            "fit_training_modes": sorted(set(map(str, seen))), "history": _history(history),
            "fitted": net.get_weights(), "evaluate": net.evaluate(x, y, batch_size=4, verbose=0),
            "predict": net.predict(x[:3], verbose=0)}


@case
def user_layers_in_sequential_and_custom_loops(env: KerasEnv) -> Result:
    """A user layer inside a Sequential model (its keys under ``_functional/_operations``, fit on 2 replicas), and a
    subclassed model whose ``call`` takes ``training`` (BatchNormalization inside) trained by a custom loop: a tape in
    ``strategy.run``, gradients all-reduced by ``apply_gradients``, the replicas' moving statistics."""
    import os
    import tempfile

    k, tf = env.keras, env.tf
    k.backend.clear_session()
    affine_cls, _ = _user_layers(k, tf, [])
    rng = np.random.RandomState(11)
    x = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    y = rng.randint(0, 2, 8).astype(np.int64)
    with env.strategy.scope():
        seq = k.Sequential([k.Input((3,)), affine_cls(4), k.layers.Dense(2, kernel_initializer="ones")])
        seq.compile(optimizer=k.optimizers.SGD(0.05), loss=k.losses.SparseCategoricalCrossentropy(from_logits=True))
    with tempfile.TemporaryDirectory() as tmp:
        path = env.train.Checkpoint(model=seq).write(os.path.join(tmp, "ckpt"))
        seq_keys = sorted(name for name, _ in env.train.list_variables(path) if "OBJECT_GRAPH" not in name)
    history = seq.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)

    class Normed(k.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = k.layers.Dense(3, kernel_initializer="ones")
            self.norm = k.layers.BatchNormalization(momentum=0.5)
            self.out = k.layers.Dense(2, kernel_initializer="ones")

        def call(self, inputs: Any, training: Any = None) -> Any:
            return self.out(self.norm(self.dense(inputs), training=training))
    with env.strategy.scope():
        net = Normed()
        net(x[:1])
        optimizer = k.optimizers.SGD(0.1)
        loss_fn = k.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    dataset = env.strategy.experimental_distribute_dataset(env.data.Dataset.from_tensor_slices((x, y)).batch(4))

    def step(features: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(labels, net(features, training=True)), global_batch_size=4)
        optimizer.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))
        return loss
    losses = [env.strategy.reduce("sum", env.strategy.run(step, args=batch), axis=None) for batch in dataset]
    moving = [env.local(v if callable(v.value) else v.value) for v in net.norm.non_trainable_weights]
    return {"sequential_keys": seq_keys, "sequential_history": _history(history), "sequential": seq.get_weights(),
            "custom_losses": losses, "custom_weights": [w.numpy() for w in net.trainable_variables],
            "moving_statistics": moving, "inference": net(x[:2])}


def _checkpoint_keys(env: KerasEnv, **objects: Any) -> list[str]:
    """The variable keys a ``tf.train.Checkpoint`` of ``objects`` writes."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = env.train.Checkpoint(**objects).write(os.path.join(tmp, "ckpt"))
        return sorted(name for name, _ in env.train.list_variables(path) if "OBJECT_GRAPH" not in name)


def _seeded_weights(model: Any) -> None:
    """Set every weight to values drawn from a generator seeded by its size (the same on both frameworks)."""
    model.set_weights([np.random.RandomState(w.size).uniform(-1, 1, w.shape).astype(np.float32)
                       for w in model.get_weights()])


@case
def functional_models(env: KerasEnv) -> Result:
    """``keras.Model(inputs, outputs)`` over a graph with a branch, an Add layer, operators on symbolic tensors and a
    nested Sequential: its layers (input layer included, in Keras' depth order), shapes, tensor names, mirrored
    weights, checkpoint keys (``_operations/<index>``, operators counted), outputs, and fit/evaluate/predict on 2
    replicas."""
    k = env.keras
    k.backend.clear_session()
    rng = np.random.RandomState(5)
    x = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    y = rng.randint(0, 2, 8).astype(np.int64)
    with env.strategy.scope():
        inputs = k.Input(shape=(4,))
        hidden = k.layers.Dense(3, activation="relu")(inputs)
        main = k.Sequential([k.layers.Dense(2)], name="head")(hidden)
        side = k.layers.Dense(2, name="side")(inputs * 2.0)
        outputs = k.layers.Add()([main, side]) + 1.0
        model = k.Model(inputs, outputs)
        _seeded_weights(model)
        model.compile(optimizer=k.optimizers.SGD(0.1), loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    symbolic = {"inputs": [(t.name, list(t.shape), t.dtype) for t in model.inputs],
                "outputs": [(t.name, list(t.shape)) for t in model.outputs], "hidden": list(hidden.shape),
                "input_shape": list(model.input_shape), "output_shape": list(model.output_shape)}
    structure = {"type": type(model).__name__, "name": model.name, "layers": [layer.name for layer in model.layers],
                 "layer_types": [type(layer).__name__ for layer in model.layers],
                 "shapes": [list(w.shape) for w in model.weights],
                 "mirrored": [len(env.strategy.experimental_local_results(v if callable(v.value) else v.value))
                              for v in model.weights]}
    unfitted_keys = _checkpoint_keys(env, model=model)
    output = model(x[:3])
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    return {"symbolic": symbolic, "structure": structure, "keys": unfitted_keys, "output": output,
            "history": _history(history), "fitted": model.get_weights(), "fitted_keys": _checkpoint_keys(env, model=model),
            "evaluate": np.float32(model.evaluate(x, y, batch_size=4, verbose=0)),  # (float32 sums: rtol 1e-6)
            "predict": model.predict(x[:5], verbose=0)}


@case
def functional_multiple_inputs(env: KerasEnv) -> Result:
    """A functional model of two named inputs joined by Concatenate: called on a list and on a dict, fit on a list of
    arrays and on a dataset of ``((a, b), y)``, predict; the input checks (count, missing key, shape)."""
    k = env.keras
    k.backend.clear_session()
    rng = np.random.RandomState(7)
    xa = rng.uniform(-1, 1, (8, 2)).astype(np.float32)
    xb = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, 1)).astype(np.float32)
    with env.strategy.scope():
        a, b = k.Input((2,), name="a"), k.Input((3,), name="b")
        merged = k.layers.Concatenate()([a, k.layers.Dense(2, activation="tanh")(b)])
        model = k.Model([a, b], k.layers.Dense(1)(merged))
        _seeded_weights(model)
        model.compile(optimizer=k.optimizers.SGD(0.05), loss="mse")
    called = {"list": model([xa[:2], xb[:2]]), "dict": model({"b": xb[:2], "a": xa[:2]}),
              "one": attempt(lambda: model(xa[:2])), "missing": attempt(lambda: model({"a": xa[:2]})),
              "shape": attempt(lambda: model([xa[:2], np.ones((2, 5), np.float32)]))}
    first = model.fit([xa, xb], y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    dataset = env.data.Dataset.from_tensor_slices(((xa, xb), y)).batch(4)
    second = model.fit(dataset, epochs=1, verbose=0)
    return {"layers": [layer.name for layer in model.layers], "input_shape": [list(s) for s in model.input_shape],
            "keys": _checkpoint_keys(env, model=model), "called": called, "list_fit": _history(first),
            "dataset_fit": _history(second), "fitted": model.get_weights(),
            "predict": model.predict([xa[:3], xb[:3]], verbose=0)}


@case
def functional_construction_errors(env: KerasEnv) -> Result:
    """What ``keras.Input`` and ``keras.Model(inputs, outputs)`` refuse: no shape, a value that is not a symbolic
    tensor, an output the inputs do not lead to, two layers of one name; ``get_layer`` by name and index."""
    k = env.keras
    k.backend.clear_session()
    first, second = k.Input((2,)), k.Input((2,))
    joined = k.layers.Add()([k.layers.Dense(2)(first), k.layers.Dense(2)(second)])
    named = k.layers.Dense(2, name="same")
    model = k.Model([first, second], joined)
    found = {"by_name": model.get_layer("input_layer_1").name, "by_index": model.get_layer(index=2).name,
             "unknown": attempt(lambda: model.get_layer("nope")), "past_end": attempt(lambda: model.get_layer(index=9)),
             "both": attempt(lambda: model.get_layer("dense", 1)), "neither": attempt(lambda: model.get_layer())}
    return {"get_layer": found, "no_shape": attempt(lambda: k.Input()),
            "not_symbolic": attempt(lambda: k.Model(first, "out")),
            "disconnected": attempt(lambda: k.Model(first, joined)),
            "disconnected_in_list": attempt(lambda: k.Model(first, [joined])),
            "same_names": attempt(lambda: k.Model(first, k.layers.Dense(2, name="same")(named(first)))),
            "names": [first.name, second.name, joined.name]}


@case
def merge_layers(env: KerasEnv) -> Result:
    """The merge layers on arrays (broadcasting, ranks aligned after the batch dimension, Average of three, the
    lowercase functions) and their errors."""
    k = env.keras
    k.backend.clear_session()
    p = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    q = np.array([[0.5, 4.0], [-1.0, 2.0]], np.float32)
    layers = k.layers
    return {"add": layers.Add()([p, q, q]), "subtract": layers.Subtract()([p, q]),
            "multiply": layers.Multiply()([p, q]), "average": layers.Average()([p, q, np.zeros_like(p)]),
            "maximum": layers.Maximum()([p, q]), "minimum": layers.Minimum()([p, q]),
            "broadcast": layers.Add()([p, np.ones((2, 1), np.float32)]),
            "ranks": layers.Add()([np.ones((2, 3, 2), np.float32), p]),
            "concatenate": layers.Concatenate()([p, q[:, :1]]), "axis0": layers.Concatenate(axis=0)([p, q]),
            "functions": [layers.add([p, q]), layers.concatenate([p, q], axis=1), layers.average([p, q])],
            "subtract_three": attempt(lambda: layers.Subtract()([p, p, p])),
            "not_a_list": attempt(lambda: layers.Add()(p)),
            "incompatible": attempt(lambda: layers.Add()([p, np.ones((2, 3), np.float32)])),
            "concatenate_mismatch": attempt(lambda: layers.Concatenate()([p, np.ones((3, 2), np.float32)]))}


@case
def freezing_layers(env: KerasEnv) -> Result:
    """``trainable = False`` on a model sets it on every layer and on the weights they made trainable (moving
    statistics stay non-trainable), unfreezing a layer inside a frozen model lists nothing, a tape still follows a
    frozen weight it is asked about, and fit leaves frozen weights as they were. (The TF variable inside a Keras
    variable keeps its own flag; mirrorlab's layer weights are that variable and carry Keras' flag.)"""
    k, tf = env.keras, env.tf
    k.backend.clear_session()
    model = k.Sequential([k.Input((3,)), k.layers.Dense(2, kernel_initializer="ones"), k.layers.BatchNormalization(),
                          k.layers.Dense(1, kernel_initializer="ones")])
    dense, norm, head = model.layers

    def flags() -> dict[str, Any]:
        return {"layers": [layer.trainable for layer in model.layers],
                "keras_flags": [w.trainable for w in model.weights], "trainable": len(model.trainable_weights),
                "non_trainable": len(model.non_trainable_weights)}
    model.trainable = False
    frozen = flags()
    dense.trainable = True
    inner_unfrozen = flags()
    model.trainable = True
    head.trainable = False
    x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    gradients = tape.gradient(loss, [dense.kernel, head.kernel])
    model.compile(optimizer=k.optimizers.SGD(0.1), loss="mse")
    model.fit(x, np.ones((2, 1), np.float32), batch_size=2, epochs=1, verbose=0)
    return {"frozen": frozen, "inner_unfrozen": inner_unfrozen, "head_frozen": flags(),
            "gradients": gradients, "fitted": model.get_weights()}


@case
def lambda_layers(env: KerasEnv) -> Result:
    """``Lambda`` layers in a Sequential and a functional model: outputs, keyword ``arguments``, the shapes they give
    symbolic tensors, training through them (they hold no weights), and the checkpoint indices they take."""
    k, tf = env.keras, env.tf
    k.backend.clear_session()
    rng = np.random.RandomState(9)
    x = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, 1)).astype(np.float32)
    with env.strategy.scope():
        seq = k.Sequential([k.Input((3,)), k.layers.Lambda(lambda t, scale: t * scale, arguments={"scale": 2.0}),
                            k.layers.Dense(1, kernel_initializer="ones")])
        inputs = k.Input((3,))
        doubled = k.layers.Lambda(lambda t: tf.concat([t, t], axis=1), name="twice")(inputs)
        fun = k.Model(inputs, k.layers.Dense(1, kernel_initializer="ones")(k.layers.Lambda(tf.tanh)(doubled)))
        for model in (seq, fun):
            model.compile(optimizer=k.optimizers.SGD(0.1), loss="mse")
    out = {"sequential": seq(x[:2]), "functional": fun(x[:2]), "shape": list(doubled.shape),
           "names": [layer.name for layer in fun.layers], "keys": _checkpoint_keys(env, seq=seq, fun=fun)}
    out["sequential_fit"] = _history(seq.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False))
    out["functional_fit"] = _history(fun.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False))
    return {**out, "weights": seq.get_weights() + fun.get_weights()}


@case
def sequential_graphs(env: KerasEnv) -> Result:
    """A Sequential model's graph as Keras 3 builds it: input and output shapes and tensors, ``add`` and ``pop``
    rebuilding it (the automatic names they use up: a later functional model's name shows them), a model built by
    its first call, and what ``add`` refuses."""
    k = env.keras
    k.backend.clear_session()
    x = np.ones((2, 3), np.float32)
    model = k.Sequential([k.layers.Dense(2, input_shape=(3,)), k.layers.Dense(1)])
    first = {"input_shape": list(model.input_shape), "output_shape": list(model.output_shape),
             "inputs": [t.name for t in model.inputs], "outputs": [t.name for t in model.outputs]}
    model.add(k.layers.Dense(4))
    added = list(model.output_shape)
    popped = model.pop().name
    lazy = k.Sequential([k.layers.Dense(2, name="lazy_dense")])
    unbuilt = attempt(lambda: lazy.input_shape)
    lazy(x)
    inputs = k.Input((3,))
    later = k.Model(inputs, k.layers.Dense(1)(inputs))
    refused = {"same_name": attempt(lambda: k.Sequential([k.layers.Dense(1, name="d"), k.layers.Dense(1, name="d")])),
               "not_a_layer": attempt(lambda: k.Sequential([k.Input((3,)), "dense"])),
               "second_input": attempt(lambda: k.Sequential([k.Input((3,)), k.Input((3,))]))}
    return {"first": first, "added": added, "popped": popped, "after_pop": list(model.output_shape),
            "weights": len(model.weights), "unbuilt": unbuilt, "lazy_input_shape": list(lazy.input_shape),
            "lazy_layers": [layer.name for layer in lazy.layers], "later": [later.name, later.output.name],
            "refused": refused}


@case
def evaluate_and_predict_callbacks(env: KerasEnv) -> Result:
    """The test and predict hooks: evaluate's (batch numbers, the batch logs' and the end logs' keys), fit's
    validation calling fit's callbacks' test hooks between the epoch's batches and its end, predict's (each batch's
    output shape), and a callback stopping evaluation and prediction after the first batch."""
    k = env.keras
    k.backend.clear_session()
    rng = np.random.RandomState(4)
    x = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, 1)).astype(np.float32)
    events: list[str] = []
    hooks = {"on_test_begin": lambda self, logs=None: events.append("test begin"),
             "on_test_batch_begin": lambda self, batch, logs=None: events.append(f"test batch {batch}"),
             "on_test_batch_end": lambda self, batch, logs=None: events.append(f"test end {batch} {sorted(logs)}"),
             "on_test_end": lambda self, logs=None: events.append(f"test end {sorted(logs or {})}"),
             "on_predict_begin": lambda self, logs=None: events.append("predict begin"),
             "on_predict_batch_begin": lambda self, batch, logs=None: events.append(f"predict batch {batch}"),
             "on_predict_batch_end": lambda self, batch, logs=None: events.append(
                 f"predict end {batch} {list(np.shape(logs['outputs']))}"),
             "on_predict_end": lambda self, logs=None: events.append("predict end"),
             "on_epoch_end": lambda self, epoch, logs=None: events.append(f"epoch end {sorted(logs or {})}")}
    recorder = type("Recorder", (k.callbacks.Callback,), hooks)()

    def stop(self: Any, batch: int, logs: Any = None) -> None:
        self.model.stop_evaluating = self.model.stop_predicting = True
    stopper = type("Stopper", (k.callbacks.Callback,), {"on_test_batch_end": stop, "on_predict_batch_end": stop})()
    with env.strategy.scope():
        model = k.Sequential([k.Input((3,)), k.layers.Dense(1, kernel_initializer="ones")])
        model.compile(optimizer=k.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    evaluated = model.evaluate(x, y, batch_size=4, verbose=0, callbacks=[recorder])
    predicted = model.predict(x, batch_size=4, verbose=0, callbacks=[recorder])
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, validation_data=(x, y), callbacks=[recorder], shuffle=False)
    stopped = {"evaluate": model.evaluate(x, y, batch_size=2, verbose=0, callbacks=[stopper], return_dict=True),
               "predict": model.predict(x, batch_size=2, verbose=0, callbacks=[stopper])}
    return {"events": events, "evaluated": np.float32(evaluated), "predicted": predicted,
            "stopped": {"evaluate": {key: np.float32(v) for key, v in stopped["evaluate"].items()},
                        "predict": stopped["predict"]}}


@case
def tensorboard_scalars(env: KerasEnv) -> Result:
    """The TensorBoard callback's scalars (read back from the event files): per-epoch logs with the learning rate in
    ``train``, validation logs in ``validation``, batch logs every ``update_freq`` batches, and evaluate's results
    against the optimizer's iterations; each (run, step, tag) with its float32 value."""
    import glob
    import os
    import tempfile

    from mirrorlab.tf.io.event_file import read_events  # (reads TF's files too)

    k = env.keras
    k.backend.clear_session()
    rng = np.random.RandomState(6)
    x = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, 1)).astype(np.float32)
    with env.strategy.scope():
        model = k.Sequential([k.Input((3,)), k.layers.Dense(1, kernel_initializer="ones")])
        model.compile(optimizer=k.optimizers.SGD(0.1), loss="mse", metrics=["mae"])

    def scalars(log_dir: str) -> dict[str, list[Any]]:
        runs: dict[str, list[Any]] = {}
        for path in sorted(glob.glob(os.path.join(log_dir, "*", "events.out.tfevents.*"))):
            run = os.path.basename(os.path.dirname(path))
            runs.setdefault(run, []).extend(
                [event.step, tag, np.float32(value)] for event in read_events(path)
                for tag, value in sorted(event.scalars.items()))
        return {run: sorted(values, key=lambda v: (v[0], v[1])) for run, values in sorted(runs.items())}
    with tempfile.TemporaryDirectory() as epochs_dir, tempfile.TemporaryDirectory() as batches_dir:
        model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False, validation_data=(x, y),
                  callbacks=[k.callbacks.TensorBoard(epochs_dir)])
        model.evaluate(x, y, batch_size=4, verbose=0, callbacks=[k.callbacks.TensorBoard(epochs_dir)])
        model.fit(x, y, batch_size=2, epochs=1, verbose=0, shuffle=False,
                  callbacks=[k.callbacks.TensorBoard(batches_dir, update_freq=3)])
        return {"epochs": scalars(epochs_dir), "batches": scalars(batches_dir)}


@case
def keras_ops(env: KerasEnv) -> Result:
    """``keras.ops`` on arrays (Keras 3's dtype promotion: weak Python numbers, ints meeting floats, signed meeting
    unsigned; float-only functions on ints; reductions' dtypes) and on symbolic tensors in a functional model (the
    operations it records, its outputs and tape gradients)."""
    k, tf = env.keras, env.tf
    ops = k.ops
    k.backend.clear_session()
    i32 = np.array([[1, 2], [3, 4]], np.int32)
    f32 = np.array([[0.5, -1.0], [2.0, 3.0]], np.float32)
    eager = {
        "add_int_float": ops.add(i32, f32), "add_weak_float": ops.add(i32, 1.5), "add_i64_f32": ops.add(i32.astype(np.int64), f32),
        "add_f64_f32": ops.add(f32.astype(np.float64), f32), "add_i32_i64": ops.add(i32, i32.astype(np.int64)),
        "add_i8_u8": ops.add(np.array([1], np.int8), np.array([2], np.uint8)),
        "add_u32_i32": ops.add(np.array([1], np.uint32), np.array([2], np.int32)),
        "add_f16_weak": ops.add(np.array([1], np.float16), 2.5), "add_bool_i32": ops.add(np.array([True]), np.array([2], np.int32)),
        "multiply_weak_int": ops.multiply(f32, 2), "divide_ints": ops.divide(i32, i32), "subtract": ops.subtract(2.0, f32),
        "mean_int": ops.mean(i32), "mean_axis": ops.mean(f32.astype(np.float64), axis=0), "sum_keepdims": ops.sum(i32, axis=1, keepdims=True),
        "sum_bool": ops.sum(np.array([True, True])), "max": ops.max(f32, axis=-1), "min": ops.min(i32),
        "sqrt_int": ops.sqrt(i32), "exp_i64": ops.exp(i32.astype(np.int64)), "square_int": ops.square(i32), "abs": ops.abs(-i32),
        "relu_int": ops.relu(i32), "softmax": ops.softmax(f32), "softmax_axis0": ops.softmax(f32.astype(np.float64), axis=0),
        "matmul": ops.matmul(i32, f32), "concatenate": ops.concatenate([i32, f32], axis=1), "stack": ops.stack([f32, f32], axis=0),
        "where": ops.where(f32 > 0, f32, 0), "argmax": ops.argmax(f32, axis=1), "cast": ops.cast(f32, "int32"),
        "reshape": ops.reshape(f32, (-1,)), "transpose": ops.transpose(f32), "expand_dims": ops.expand_dims(f32, 1),
        "squeeze": ops.squeeze(ops.expand_dims(f32, 1), 1), "maximum": ops.maximum(i32, f32), "log": ops.log(f32),
        "ones_like": ops.ones_like(i32), "zeros_like": ops.zeros_like(f32, dtype="float64"),
        "clip_int_float": attempt(lambda: ops.clip(i32, 1.5, 3)), "clip": ops.clip(f32, -0.5, 2.5)}
    inputs = k.Input((3,))
    hidden = k.layers.Dense(4, kernel_initializer="ones")(inputs)
    pooled = ops.mean(ops.concatenate([hidden, ops.square(inputs)], axis=-1), axis=-1, keepdims=True)
    model = k.Model(inputs, ops.relu(hidden - pooled) / 2 + ops.expand_dims(ops.sum(inputs, axis=1), -1))
    x = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    return {"eager": eager, "layers": [layer.name for layer in model.layers],
            "symbolic": [list(pooled.shape), pooled.dtype, list(model.output_shape)], "output": model(x),
            "gradients": tape.gradient(loss, model.trainable_variables)}


@case
def embedding_layernorm_rescaling(env: KerasEnv) -> Result:
    """Embedding (indices of any integer dtype or floats holding integers, negative ones from the end, TF's error
    for one out of range, IndexedSlices tape gradients, dense beside a regularizer's), LayerNormalization (axis -1
    and tuples, epsilon, no center or scale, float64 and integer inputs, tape gradients) and Rescaling (any input to
    float32, per-channel scales, its gradient): symbolic shapes and dtypes, checkpoint keys, and fit on 2 replicas
    with SGD (row-by-row sparse updates) and Adam."""
    k, tf = env.keras, env.tf
    k.backend.clear_session()
    rng = np.random.RandomState(12)
    table = rng.uniform(-1, 1, (6, 4)).astype(np.float32)
    indices = np.array([[1, 5, 1], [0, -1, 2]])
    embed = k.layers.Embedding(6, 4, weights=[table])
    lookups = {dtype: attempt(lambda dtype=dtype: embed(indices.astype(dtype) % 6)) for dtype in
               ("int32", "int64", "uint8", "int16", "float32", "float64")}

    def sparse_gradient(**options: Any) -> Any:
        layer = k.layers.Embedding(6, 4, weights=[table], **options)
        with tf.GradientTape() as tape:
            out = layer(indices)
            loss = tf.reduce_sum(out * out) + (tf.add_n(layer.losses) if layer.losses else 0.0)
        grad = tape.gradient(loss, layer.trainable_variables)[0]
        sparse = isinstance(grad, tf.IndexedSlices)
        return {"sparse": sparse, "dense": tf.convert_to_tensor(grad),
                **({"indices": grad.indices, "values": grad.values, "dense_shape": grad.dense_shape} if sparse else {})}
    x = rng.uniform(-2, 2, (2, 3, 4)).astype(np.float32)

    def normalized(dtype: str = "float32", **options: Any) -> Result:
        layer = k.layers.LayerNormalization(**options)
        out = layer(x.astype(dtype))
        return {"out": out, "weights": [w.name.split("/")[-1].split(":")[0] for w in layer.weights],
                "shapes": [list(w.shape) for w in layer.weights]}

    def norm_gradients(**options: Any) -> Any:
        layer = k.layers.LayerNormalization(**options)
        layer.build(x.shape)
        for weight in layer.weights:
            weight.assign(rng.uniform(0.5, 1.5, weight.shape).astype(np.float32))
        source = tf.Variable(x)
        with tf.GradientTape() as tape:
            out = layer(source * 1.0)
            loss = tf.reduce_sum(out * np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10.0)
        return tape.gradient(loss, [source, *layer.trainable_variables])

    def rescaled_gradient() -> Any:
        source = tf.Variable(x)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(k.layers.Rescaling(np.array([1.0, 2.0, -1.0, 0.5]), offset=0.25)(source * 1.0) ** 2)
        return tape.gradient(loss, source)
    images = np.array([[0, 255, 7, 128], [1, 2, 3, 254]])
    out: Result = {
        "lookups": lookups, "negative": embed(np.array([-1, -6])), "out_of_range": attempt(lambda: embed(indices + 3)),
        "sparse_gradient": attempt(sparse_gradient),
        "regularized_gradient": attempt(lambda: sparse_gradient(embeddings_regularizer="l2")),
        "embedding_errors": [attempt(lambda: k.layers.Embedding(0, 2)), attempt(lambda: k.layers.Embedding(3, 2.0)),
                             attempt(lambda: k.layers.Embedding(3, 2).embeddings)],
        "embedding_shape": list(k.layers.Embedding(3, 2).compute_output_shape((None, 5))),
        "layer_norm": {"last": attempt(normalized), "tuple": attempt(lambda: normalized(axis=(1, 2))),
                       "mixed_axes": attempt(lambda: normalized(axis=[-1, 1])),
                       "epsilon": attempt(lambda: normalized(epsilon=0.5, center=False)),
                       "plain": attempt(lambda: normalized(center=False, scale=False)),
                       "float64": attempt(lambda: normalized("float64")),
                       "int32": attempt(lambda: normalized("int32")),
                       "bad_axis": attempt(lambda: normalized(axis=3)),
                       "axis_type": attempt(lambda: k.layers.LayerNormalization(axis="last"))},
        "norm_gradients": {"last": attempt(norm_gradients), "tuple": attempt(lambda: norm_gradients(axis=(1, 2))),
                           "no_center": attempt(lambda: norm_gradients(center=False)),
                           "no_scale": attempt(lambda: norm_gradients(scale=False, axis=1))},
        "rescaling": {dtype: attempt(lambda dtype=dtype: k.layers.Rescaling(1 / 255.0, offset=-0.5)(
            images.astype(dtype))) for dtype in ("uint8", "int32", "float64", "bool")},
        "rescaling_channels": k.layers.Rescaling(np.array([1.0, 2.0, 3.0, 4.0]), offset=1.0)(images.astype("uint8")),
        "rescaling_weights": len(k.layers.Rescaling(2.0).weights), "rescaling_gradient": attempt(rescaled_gradient),
    }
    tokens = rng.randint(0, 8, (8, 3)).astype(np.int32)
    pixels = rng.randint(0, 256, (8, 4)).astype(np.uint8)
    targets = rng.uniform(-1, 1, (8, 1)).astype(np.float32)
    with env.strategy.scope():
        seq = k.Sequential([k.Input((3,), dtype="int32"), k.layers.Embedding(8, 2), k.layers.LayerNormalization(),
                            k.layers.Flatten(), k.layers.Dense(1)])
        inputs = k.Input((4,), dtype="uint8")
        scaled = k.layers.Rescaling(1 / 255.0)(inputs)
        hidden = k.layers.LayerNormalization(axis=(1,), center=False)(k.layers.Dense(3)(scaled))
        fun = k.Model(inputs, k.layers.Dense(1)(hidden))
        for model, optimizer in ((seq, k.optimizers.SGD(0.1)), (fun, k.optimizers.Adam(0.01))):
            _seeded_weights(model)
            model.compile(optimizer=optimizer, loss="mse")
    looked_up = [k.layers.Embedding(8, 2)(k.Input(shape, dtype=dtype)) for shape, dtype in (((5,), "int64"),
                                                                                         ((2, 3), "float32"))]
    out["symbolic"] = [[list(t.shape), np.dtype(t.dtype).name] for t in (scaled, hidden, fun.output, *looked_up)] + [
        list(seq.output_shape)]
    out["keys"] = _checkpoint_keys(env, seq=seq, fun=fun)
    out["sequential_fit"] = _history(seq.fit(tokens, targets, batch_size=4, epochs=2, verbose=0, shuffle=False))
    out["functional_fit"] = _history(fun.fit(pixels, targets, batch_size=4, epochs=2, verbose=0, shuffle=False))
    out["predict"] = [seq.predict(tokens[:4], verbose=0), fun.predict(pixels[:4], verbose=0)]
    return {**out, "weights": seq.get_weights() + fun.get_weights()}


@case
def learning_rate_schedules(env: KerasEnv) -> Result:
    """``keras.optimizers.schedules`` at several steps (float32, as Keras computes them), an optimizer following one
    through ``apply_gradients``, and the constructor errors for a bad learning rate, units and activation."""
    k = env.keras
    k.backend.clear_session()
    s = k.optimizers.schedules
    made = {"exponential": s.ExponentialDecay(0.1, 10, 0.5), "staircase": s.ExponentialDecay(0.1, 10, 0.5, staircase=True),
            "inverse_time": s.InverseTimeDecay(0.1, 5, 0.5), "inverse_staircase": s.InverseTimeDecay(0.1, 5, 0.5, True),
            "piecewise": s.PiecewiseConstantDecay([3, 6], [1.0, 0.5, 0.1]), "polynomial": s.PolynomialDecay(0.1, 8),
            "polynomial_cycle": s.PolynomialDecay(0.1, 4, 0.01, power=2.0, cycle=True),
            "cosine": s.CosineDecay(0.1, 8, alpha=0.1), "cosine_warmup": s.CosineDecay(0.0, 8, warmup_target=0.2,
                                                                                      warmup_steps=4)}
    values = {name: [np.float32(schedule(step)) for step in (0, 1, 3, 4, 7, 9, 15)] for name, schedule in made.items()}
    variable = k.Variable(np.array([1.0, -2.0], np.float32))
    optimizer = k.optimizers.SGD(learning_rate=s.ExponentialDecay(0.5, 1, 0.5))
    trace = []
    for _ in range(3):
        optimizer.apply_gradients([(np.array([1.0, 1.0], np.float32), variable)])
        trace.append(np.asarray(variable.numpy()))
    return {"values": values, "trace": trace, "learning_rate_now": np.float32(optimizer.learning_rate),
            "bad_learning_rate": attempt(lambda: k.optimizers.SGD(learning_rate="x")),
            "float_units": attempt(lambda: k.layers.Dense(2.0)),
            "unknown_activation": attempt(lambda: k.layers.Dense(2, activation="nope")),
            "piecewise_lengths": attempt(lambda: s.PiecewiseConstantDecay([1, 2], [1.0]))}


@case
def layer_argument_errors(env: KerasEnv) -> Result:
    """What Conv2D, pooling and Reshape refuse, with Keras' texts: padding, filters, window sizes and strides,
    inputs of too low a rank, a kernel larger than a valid-padded input, integer inputs, two unknown target
    dimensions and a target of another size."""
    k = env.keras
    k.backend.clear_session()
    layers = k.layers
    x4 = np.ones((2, 5, 5, 3), np.float32)
    return {"padding": attempt(lambda: layers.Conv2D(2, 3, padding="full")),
            "filters": attempt(lambda: layers.Conv2D(0, 3)), "kernel_three": attempt(lambda: layers.Conv2D(2, (3, 3, 3))),
            "kernel_zero": attempt(lambda: layers.Conv2D(2, 0)), "strides_zero": attempt(lambda: layers.Conv2D(2, 3, strides=0)),
            "rank3": attempt(lambda: layers.Conv2D(2, 3)(np.ones((2, 5, 3), np.float32))),
            "kernel_too_big": attempt(lambda: layers.Conv2D(2, 7)(x4)),
            "integer_input": attempt(lambda: layers.Conv2D(1, 1)(np.ones((1, 2, 2, 1), np.int32))),
            "pool_zero": attempt(lambda: layers.MaxPooling2D(0)), "pool_three": attempt(lambda: layers.MaxPooling2D((2, 2, 2))),
            "reshape_two_unknown": attempt(lambda: layers.Reshape((-1, -1))),
            "reshape_size": attempt(lambda: layers.Reshape((4,))(np.ones((2, 3), np.float32))),
            "reshape_fits": layers.Reshape((3, -1))(np.ones((2, 6), np.float32))}


@case
def sparse_crossentropy_ignore_class(env: KerasEnv) -> Result:
    """``SparseCategoricalCrossentropy(ignore_class=...)``: ignored labels lose nothing and a mean is over the
    others (Keras' mask weighting, with sample weights too), from probabilities and from logits, with tape
    gradients."""
    k, tf = env.keras, env.tf
    y_pred = np.array([[0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], np.float32)
    labels = np.array([0, 1, 1])
    out: Result = {}
    for reduction in ("sum_over_batch_size", "sum", "none"):
        loss = k.losses.SparseCategoricalCrossentropy(ignore_class=0, reduction=reduction)
        out[reduction] = loss(labels, y_pred)
        out[f"{reduction}_weighted"] = loss(labels, y_pred, sample_weight=np.array([1.0, 2.0, 0.5], np.float32))
    logits = tf.Variable(np.array([[1.0, 2.0], [0.5, -1.0], [0.0, 3.0]], np.float32))
    with tf.GradientTape() as tape:
        value = k.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)(np.array([-1, 1, 0]),
                                                                                          logits * 1.0)
    out["logits"] = value
    out["gradient"] = tape.gradient(value, logits)
    out["all_ignored"] = k.losses.SparseCategoricalCrossentropy(ignore_class=1)(np.array([1, 1]), y_pred[:2])
    return out


@case
def fit_reshuffles_as_keras(env: KerasEnv) -> Result:
    """A seeded shuffle in ``fit``: Keras creates the next pass's iterator as an epoch ends (and without
    ``steps_per_epoch`` another as the next begins), each creation drawing shuffle seeds; with and without the
    strategy, with validation data, ``steps_per_epoch`` and a repeated dataset. Each batch's loss shows its order."""
    k, data = env.keras, env.data
    x = np.arange(12, dtype=np.float32).reshape(12, 1)
    out: Result = {}

    def run(label: str, steps: int | None = None, validate: bool = False, repeat: int = 1,
            distributed: bool = False) -> None:
        ds = data.Dataset.from_tensor_slices((x, 0 * x)).shuffle(12, seed=3).batch(4)
        if repeat > 1:
            ds = ds.repeat(repeat)
        val = data.Dataset.from_tensor_slices((x, 0 * x)).shuffle(12, seed=5).batch(4)
        with env.strategy.scope() if distributed else contextlib.nullcontext():
            model = k.Sequential([k.Input((1,)), k.layers.Dense(1, kernel_initializer="ones", use_bias=False)])
            model.compile(loss="mse", optimizer=k.optimizers.SGD(0.0))
        seen: list[Any] = []

        class Record(k.callbacks.Callback):
            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                seen.append(float(logs["loss"]))

            def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
                seen.append(["val", float(logs["loss"])])

        model.fit(ds, epochs=3, verbose=0, callbacks=[Record()], steps_per_epoch=steps,
                  validation_data=val if validate else None)
        seen.append(["evaluate", float(model.evaluate(ds, verbose=0))])
        out[label] = seen

    run("epochs")
    run("steps_per_epoch_2", steps=2)
    run("steps_per_epoch_3", steps=3)
    run("validation", validate=True)
    run("repeated_steps_2", steps=2, repeat=2)
    run("strategy", distributed=True)
    run("strategy_steps_validation", steps=2, validate=True, distributed=True)
    return out


@case
def batch_logs_average_replicas(env: KerasEnv) -> Result:
    """Batch callbacks under a 2-replica strategy get each metric's replica results averaged (a batch split 2+1 is
    not its 3-example mean), epoch logs are the global results, ``evaluate(return_dict=True)`` sorts its names, and a
    first batch split unevenly fails Keras' build (the replica mean of that batch) with TF's AddN error."""
    k, data = env.keras, env.data
    out: Result = {}

    def run(examples: int, batch: int) -> Any:
        x = np.arange(examples, dtype=np.float32).reshape(examples, 1)
        y = (np.arange(examples) % 2).astype(np.int64)
        with env.strategy.scope():
            model = k.Sequential([k.Input((1,)), k.layers.Dense(2, kernel_initializer="ones", use_bias=False)])
            model.compile(loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),
                          optimizer=k.optimizers.SGD(0.0), metrics=["accuracy"])
        seen: list[Any] = []

        class Record(k.callbacks.Callback):
            def on_train_batch_end(self, step: int, logs: Any = None) -> None:
                seen.append(["train", dict(logs)])

            def on_test_batch_end(self, step: int, logs: Any = None) -> None:
                seen.append(["test", dict(logs)])

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                seen.append(["epoch", dict(logs)])

        ds = data.Dataset.from_tensor_slices((x, y)).batch(batch)
        model.fit(ds, epochs=2, verbose=0, callbacks=[Record()])
        result = model.evaluate(ds, verbose=0, callbacks=[Record()], return_dict=True)
        return {"seen": seen, "evaluate": result, "evaluate_order": list(result)}

    out["uneven_last_batch"] = attempt(lambda: run(7, 4))
    out["uneven_first_batch"] = attempt(lambda: run(5, 3))
    return out


def _custom_step_models(env: KerasEnv) -> dict[str, Any]:
    """Model subclasses that override Keras' steps, as in Keras' "customizing fit" guide."""
    k, tf = env.keras, env.tf

    class GuideModel(k.Model):
        """The guide's train_step: compute_loss, apply, and the metrics loop (the loss tracker gets the loss as
        compute_loss scales it for the replicas)."""

        def train_step(self, data: Any) -> Any:
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            self.optimizer.apply(tape.gradient(loss, self.trainable_variables), self.trainable_variables)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    class OwnMetrics(k.Model):
        """Its own loss and metric trackers, listed by an overridden ``metrics`` (reset at each epoch by fit)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.loss_tracker = k.metrics.Mean(name="loss")
            self.mae_metric = k.metrics.MeanAbsoluteError(name="mae")

        def train_step(self, data: Any) -> Any:
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = k.losses.mean_squared_error(y, y_pred)
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.loss_tracker.update_state(loss)
            self.mae_metric.update_state(y, y_pred)
            return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

        @property
        def metrics(self) -> list[Any]:
            return [self.loss_tracker, self.mae_metric]

    class OddLogs(k.Model):
        """A train_step whose logs are not the model's metrics: fit's epoch logs are then the last batch's."""

        def train_step(self, data: Any) -> Any:
            logs = super().train_step(data)
            return {"twice_loss": logs["loss"] * 2.0, "batch": tf.reduce_sum(data[0]) if hasattr(tf, "reduce_sum")
                    else np.sum(np.asarray(data[0]))}

    class OwnTest(k.Model):
        """A test_step that reports the mean absolute error of its own Mean tracker and the compiled metrics."""

        def test_step(self, data: Any) -> Any:
            x, y = data
            y_pred = self(x, training=False)
            self.compute_loss(y=y, y_pred=y_pred)
            for metric in self.metrics:
                if metric.name != "loss":
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    class OwnPredict(k.Model):
        """A predict_step returning its outputs doubled."""

        def predict_step(self, data: Any) -> Any:
            return self(data, training=False) * 2.0

    return {"guide": GuideModel, "own_metrics": OwnMetrics, "odd_logs": OddLogs, "own_test": OwnTest,
            "own_predict": OwnPredict}


def _custom_fit(env: KerasEnv, cls: Any, distributed: bool, compile_kwargs: dict[str, Any],
                evaluate: bool = True) -> Result:
    """Fit a functional ``cls`` model (Dense 2 -> 1, fixed weights) for 2 epochs of 3 batches (the last partial),
    recording batch and epoch logs, the history, evaluate's results, metrics_names and the weights."""
    k, data = env.keras, env.data
    x = (np.arange(20, dtype=np.float32).reshape(10, 2) / 10.0)
    y = (x.sum(axis=1, keepdims=True) * 0.5 + 1.0).astype(np.float32)
    seen: list[Any] = []

    class Record(k.callbacks.Callback):
        def on_train_batch_end(self, step: int, logs: Any = None) -> None:
            seen.append(["train", {key: float(v) for key, v in dict(logs).items()}])

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            seen.append(["epoch", {key: float(v) for key, v in dict(logs).items()}])

        def on_test_batch_end(self, step: int, logs: Any = None) -> None:
            seen.append(["test", {key: float(v) for key, v in dict(logs).items()}])

    with env.strategy.scope() if distributed else contextlib.nullcontext():
        inputs = k.Input((2,))
        outputs = k.layers.Dense(1, kernel_initializer=k.initializers.Constant(0.3), bias_initializer="zeros")(inputs)
        model = cls(inputs, outputs)
        model.compile(optimizer=k.optimizers.SGD(0.1), **compile_kwargs)
    out: Result = {"names_before": list(model.metrics_names)}
    ds = data.Dataset.from_tensor_slices((x, y)).batch(4)
    history = model.fit(ds, epochs=2, verbose=0, callbacks=[Record()])
    out["history"] = {key: [float(v) for v in values] for key, values in sorted(history.history.items())}
    out["seen"] = seen
    out["names_after"] = list(model.metrics_names)
    if evaluate:
        seen_before = len(seen)
        out["evaluate_dict"] = {key: float(v) for key, v in model.evaluate(ds, verbose=0, return_dict=True,
                                                                            callbacks=[Record()]).items()}
        out["evaluate_list"] = [float(v) for v in np.atleast_1d(model.evaluate(ds, verbose=0))]
        out["evaluate_seen"] = seen[seen_before:]
    out["weights"] = [np.asarray(w) for w in model.get_weights()]
    return out


@case
def custom_train_steps(env: KerasEnv) -> Result:
    """Overridden ``train_step``s in fit, without and with a 2-replica strategy: the guide's loop over
    ``self.metrics`` (compute_loss scaled for the replicas), a model's own metric trackers, logs other than the
    metrics (epoch logs are the last batch's), and ``super().train_step``; batch logs are the replicas' mean."""
    models = _custom_step_models(env)
    out: Result = {}
    for distributed in (False, True):
        tag = "strategy" if distributed else "plain"
        out[f"guide_{tag}"] = attempt(lambda: _custom_fit(env, models["guide"], distributed,
                                                          {"loss": "mse", "metrics": ["mae"]}))
        out[f"guide_no_metrics_{tag}"] = attempt(lambda: _custom_fit(env, models["guide"], distributed,
                                                                     {"loss": "mse"}))
        out[f"own_metrics_{tag}"] = attempt(lambda: _custom_fit(env, models["own_metrics"], distributed, {},
                                                                evaluate=False))
        out[f"odd_logs_{tag}"] = attempt(lambda: _custom_fit(env, models["odd_logs"], distributed,
                                                             {"loss": "mse", "metrics": ["mae"]}))
    return out


@case
def custom_test_and_predict_steps(env: KerasEnv) -> Result:
    """Overridden ``test_step`` (evaluate's logs, dict and list) and ``predict_step`` (predict's outputs), without
    and with a 2-replica strategy; ``compute_metrics`` and ``get_metrics_result`` called directly."""
    k = env.keras
    models = _custom_step_models(env)
    out: Result = {}
    x = (np.arange(10, dtype=np.float32).reshape(5, 2) / 10.0)
    y = (x.sum(axis=1, keepdims=True) + 1.0).astype(np.float32)
    for distributed in (False, True):
        tag = "strategy" if distributed else "plain"
        with env.strategy.scope() if distributed else contextlib.nullcontext():
            inputs = k.Input((2,))
            outputs = k.layers.Dense(1, kernel_initializer="ones")(inputs)
            tester = models["own_test"](inputs, outputs)
            tester.compile(optimizer="sgd", loss="mse", metrics=["mae", "mse"])
            inputs = k.Input((2,))
            outputs = k.layers.Dense(1, kernel_initializer="ones")(inputs)
            predictor = models["own_predict"](inputs, outputs)
            predictor.compile(optimizer="sgd", loss="mse")
        out[f"evaluate_dict_{tag}"] = attempt(lambda: {key: float(v) for key, v in tester.evaluate(
            x, y, batch_size=2, verbose=0, return_dict=True).items()})
        out[f"evaluate_list_{tag}"] = attempt(lambda: [float(v) for v in tester.evaluate(x, y, batch_size=2,
                                                                                         verbose=0)])
        out[f"metrics_names_{tag}"] = list(tester.metrics_names)
        out[f"predict_{tag}"] = attempt(lambda: predictor.predict(x, batch_size=2, verbose=0))
        out[f"compute_metrics_{tag}"] = attempt(lambda: {key: float(v) for key, v in tester.compute_metrics(
            x, y, tester(x), sample_weight=None).items()})
        out[f"get_metrics_result_{tag}"] = attempt(lambda: {key: float(v) for key, v in
                                                            tester.get_metrics_result().items()})
    return out


@case
def fit_realistic_sizes(env: KerasEnv) -> Result:
    """Training at everyday sizes, where the order of float additions shows: batches of 32 (16 per replica),
    20 features, 16 hidden units, 10 classes; cross-entropy with Adam and accuracy, mean squared error on 12
    outputs with SGD, batch normalization and an L2 regularizer; with and without a 2-replica strategy. The
    losses and weights after two epochs (sums add in TF's order; matrix products may differ in the last bit)."""
    k, data = env.keras, env.data
    rng = np.random.default_rng(20)
    x = rng.standard_normal((96, 20)).astype(np.float32)
    labels = rng.integers(0, 10, 96)
    targets = rng.standard_normal((96, 12)).astype(np.float32)
    out: Result = {}

    def run(kind: str, distributed: bool) -> Any:
        with env.strategy.scope() if distributed else contextlib.nullcontext():
            if kind == "classifier":
                model = k.Sequential([k.Input((20,)), k.layers.Dense(16, activation="relu"), k.layers.Dense(10)])
                model.compile(optimizer=k.optimizers.Adam(0.01), metrics=["accuracy"],
                              loss=k.losses.SparseCategoricalCrossentropy(from_logits=True))
            else:
                model = k.Sequential([k.Input((20,)),  # (no bias before the normalization: its gradient is noise)
                                      k.layers.Dense(16, use_bias=False, kernel_regularizer=k.regularizers.L2(0.01)),
                                      k.layers.BatchNormalization(), k.layers.Activation("relu"),
                                      k.layers.Dense(12)])
                model.compile(optimizer=k.optimizers.SGD(0.05, momentum=0.9), loss="mse", metrics=["mae"])
        init = np.random.default_rng(21)
        model.set_weights([(init.standard_normal(w.shape) * 0.3).astype(np.float32) if len(w.shape) == 2 else
                           np.asarray(w) for w in model.get_weights()])
        y = labels if kind == "classifier" else targets
        history = model.fit(data.Dataset.from_tensor_slices((x, y)).batch(32), epochs=2, verbose=0)
        # float32 arrays (compared within 1e-6): TF's matmul kernels add in an order of their own (CPU-dependent)
        return {"history": {key: np.asarray(values, np.float32) for key, values in sorted(history.history.items())},
                "weights": [np.asarray(w) for w in model.get_weights()]}

    for kind in ("classifier", "regressor"):
        for distributed in (False, True):
            out[f"{kind}_{'strategy' if distributed else 'plain'}"] = attempt(lambda: run(kind, distributed))
    return out


from . import keras_saving_cases  # noqa: E402,F401 (registers the config and saving cases)


@case
def precision_and_recall(env: KerasEnv) -> Result:
    """Precision and Recall: one or several thresholds (three or more evenly spaced take Keras' bucketed path), top_k,
    class_id, sample weights, names and config, per-replica updates summed on read, and training with them."""
    k = env.keras
    k.backend.clear_session()  # the automatic names count from here
    y_true = np.array([[0, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 1]])
    y_pred = np.array([[0.2, 0.7, 0.4], [0.3, 0.9, 0.1], [0.5, 0.5, 0.8], [0.25, 0.0, 1.0]], np.float32)
    weight = np.array([2.0, 0.5, 1.0, 0.0])
    out: Result = {"names": [k.metrics.Precision().name, k.metrics.Precision().name, k.metrics.Recall().name,
                             k.metrics.get("recall").name],
                   "config": k.metrics.Recall(thresholds=[0.2, 0.6], name="r").get_config(),
                   "bad_threshold": attempt(lambda: k.metrics.Precision(thresholds=[0.5, 1.5]))}
    for kind in ("Precision", "Recall"):
        for label, options in (("default", {}), ("thresholds", {"thresholds": [0.0, 0.3, 0.5, 0.75]}),
                               ("evenly", {"thresholds": [0.0, 0.25, 0.5, 0.75, 1.0]}), ("top_k", {"top_k": 2}),
                               ("class_id", {"class_id": 1}), ("top_k_class", {"top_k": 1, "class_id": 2})):
            for weighted in (False, True):
                def updated(options: dict[str, Any] = options, weighted: bool = weighted) -> Any:
                    metric = getattr(k.metrics, kind)(**options)
                    metric.update_state(y_true, y_pred, sample_weight=weight if weighted else None)
                    metric.update_state(y_true[:2], y_pred[:2] * 0.5)
                    return [metric.result(), [v.numpy() for v in metric.variables]]
                out[f"{kind}|{label}|{'weighted' if weighted else 'plain'}"] = attempt(updated)
    with env.strategy.scope():
        metric = k.metrics.Recall(thresholds=[0.3, 0.6])
    values = env.strategy.experimental_distribute_values_from_function(
        lambda ctx: (y_true[2 * ctx.replica_id_in_sync_group:][:2], y_pred[2 * ctx.replica_id_in_sync_group:][:2]))
    env.strategy.run(lambda pair: metric.update_state(*pair), args=(values,))
    out["in_strategy"] = metric.result()
    x, labels = _examples(10, 2)
    model = _model(env, 1, lambda: k.optimizers.SGD(0.2), "binary_crossentropy",
                   ["precision", k.metrics.Recall(thresholds=0.4)], activation="sigmoid")
    history = model.fit(x, labels.astype(np.float32), batch_size=4, epochs=3, shuffle=False, verbose=0)
    out["fit"] = {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())}
    return out


@case
def area_under_curve(env: KerasEnv) -> Result:
    """AUC: ROC, PR (Keras' exact interpolation) and PR-gain curves with each summation method, default (evenly
    spaced, bucketed) and given thresholds, sample and label weights, logits, names, config, errors, a per-replica
    update summed on read, and training with it."""
    k = env.keras
    k.backend.clear_session()
    rng = np.random.RandomState(7)
    y_true = rng.randint(0, 2, (12, 2))
    y_pred = np.round(rng.uniform(0, 1, (12, 2)), 2).astype(np.float32)
    weight = rng.uniform(0, 2, 12).astype(np.float32)
    out: Result = {"names": [k.metrics.AUC().name, k.metrics.get("auc").name, k.metrics.get("AUC").name],
                   "config": k.metrics.AUC(thresholds=[0.6, 0.2], curve="PR").get_config(),
                   "bad_curve": attempt(lambda: k.metrics.AUC(curve="XY")),
                   "bad_method": attempt(lambda: k.metrics.AUC(summation_method="avg")),
                   "bad_num": attempt(lambda: k.metrics.AUC(num_thresholds=1))}
    for curve in ("ROC", "PR", "PRGAIN"):
        for method in ("interpolation", "minoring", "majoring"):
            for label, options in (("default", {}), ("few", {"num_thresholds": 7}),
                                   ("given", {"thresholds": [0.1, 0.45, 0.5, 0.8]})):
                def updated(options: dict[str, Any] = options, curve: str = curve, method: str = method) -> Any:
                    metric = k.metrics.AUC(curve=curve, summation_method=method, **options)
                    metric.update_state(y_true, y_pred)
                    metric.update_state(y_true[:5], y_pred[:5] * 0.5, sample_weight=weight[:5])
                    return metric.result()
                out[f"{curve}|{method}|{label}"] = attempt(updated)
    out["label_weights"] = attempt(lambda: k.metrics.AUC(label_weights=[0.3, 1.0])(y_true, y_pred))
    for label, options in (("default", {}), ("pr", {"curve": "PR"}), ("given", {"thresholds": [0.2, 0.5]}),
                           ("label_weights", {"label_weights": [0.3, 1.0]}), ("gain", {"curve": "PRGAIN"}),
                           ("num_labels", {"num_labels": 2, "summation_method": "minoring"})):
        def multi(options: dict[str, Any] = options) -> Any:
            metric = k.metrics.AUC(multi_label=True, **options)
            metric.update_state(y_true, y_pred, sample_weight=weight)
            return [metric.result(), [v.numpy() for v in metric.variables][:1]]
        out[f"multi_label|{label}"] = attempt(multi)
    out["multi_label|rank1"] = attempt(lambda: k.metrics.AUC(multi_label=True)(y_true[:, 0], y_pred[:, 0]))
    out["num_labels_alone"] = attempt(lambda: k.metrics.AUC(num_labels=2))
    out["logits"] = attempt(lambda: k.metrics.AUC(from_logits=True)(y_true, y_pred * 6 - 3))
    out["variables"] = [v.numpy() for v in _updated_auc(k, y_true, y_pred)]
    with env.strategy.scope():
        metric = k.metrics.AUC(num_thresholds=11)
    values = env.strategy.experimental_distribute_values_from_function(
        lambda ctx: (y_true[6 * ctx.replica_id_in_sync_group:][:6], y_pred[6 * ctx.replica_id_in_sync_group:][:6]))
    env.strategy.run(lambda pair: metric.update_state(*pair), args=(values,))
    out["in_strategy"] = metric.result()
    x, labels = _examples(10, 2)
    model = _model(env, 1, lambda: k.optimizers.SGD(0.2), "binary_crossentropy", ["auc"], activation="sigmoid")
    history = model.fit(x, labels.astype(np.float32), batch_size=4, epochs=3, shuffle=False, verbose=0)
    out["fit"] = {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())}
    two = np.stack([labels, 1 - labels], axis=1).astype(np.float32)
    model = _model(env, 2, lambda: k.optimizers.SGD(0.2), "binary_crossentropy",
                   [k.metrics.AUC(multi_label=True, name="multi")], activation="sigmoid")
    history = model.fit(x, two, batch_size=4, epochs=2, shuffle=False, verbose=0)
    out["fit_multi_label"] = {key: [np.float32(v) for v in values] for key, values in sorted(history.history.items())}
    return out


def _updated_auc(k: Any, y_true: np.ndarray, y_pred: np.ndarray) -> list[Any]:
    """The four count variables of an AUC over 5 thresholds after one weighted update."""
    metric = k.metrics.AUC(num_thresholds=5)
    metric.update_state(y_true, y_pred, sample_weight=np.linspace(0, 1, len(y_true)))
    return metric.variables
