"""Metrics whose state is ON_READ SUM variables: each replica accumulates locally and a cross-replica
read (``result()``, or a checkpoint save) aggregates over every replica of the cluster, as in TF."""

from __future__ import annotations

from abc import ABC, abstractmethod

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...aggregation import VariableAggregation, VariableSynchronization
from ..autodiff import untracked
from ...distribute.variables import Variable
from .._kernels.summation import tf_mean, tf_sum
from ...tensor import asarray, like, returns_tensors


from . import losses
from .naming import to_snake_case
from .registry import resolve, take_fixed_arguments
from .saving.serialization import deserialize_keras_object, serialize_keras_object

__all__ = ["Metric", "Mean", "Sum", "MeanMetricWrapper", "Accuracy", "BinaryAccuracy", "CategoricalAccuracy",
           "SparseCategoricalAccuracy", "SparseTopKCategoricalAccuracy", "TopKCategoricalAccuracy", "MeanSquaredError",
           "MeanAbsoluteError", "MeanSquaredLogarithmicError", "LogCoshError", "SparseCategoricalCrossentropy",
           "BinaryCrossentropy", "CategoricalCrossentropy", "Precision", "Recall", "AUC", "serialize", "deserialize",
           "accuracy", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
           "sparse_top_k_categorical_accuracy", "top_k_categorical_accuracy", "get"]


class Metric(ABC):
    """Base: ``update_state`` in replica context, ``result``/``reset_state`` in cross-replica context."""

    _checkpoint_untrackable = True  # a Keras 3 metric is no TF Trackable: Checkpoint(metric=...) is refused
    _direction: str | None = None  # "up" or "down": which way is better, for callbacks' mode="auto"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}>"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's ``result`` hands out Tensors (``metric.result().numpy()`` works as in TF)."""
        super().__init_subclass__(**kwargs)
        if "result" in cls.__dict__:
            cls.result = returns_tensors(cls.__dict__["result"])

    _config_keys: tuple[str, ...] = ()  # a subclass's own arguments in Keras' config

    def get_config(self) -> dict[str, Any]:
        """Keras' config: the name and dtype, then the subclass's arguments (attributes, or the wrapped function's
        keyword arguments, of those names)."""
        extra = getattr(self, "_fn_kwargs", {})
        return {"name": self.name, "dtype": self.dtype.name,
                **{key: getattr(self, key, extra.get(key)) for key in self._config_keys}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Metric":
        return cls(**config)

    def __init__(self, name: str | None = None, dtype: Any = "float32") -> None:
        self.name = name or type(self).__name__.lower()
        self.dtype = np.dtype(dtype)
        self._variables: dict[str, Variable] = {}

    def add_variable(self, name: str, shape: tuple[int, ...] = ()) -> Variable:
        var = Variable(np.zeros(shape, self.dtype), name=f"{self.name}/{name}", trainable=False,
                       synchronization=VariableSynchronization.ON_READ, aggregation=VariableAggregation.SUM)
        self._variables[name] = var
        return var

    @property
    def variables(self) -> list[Variable]:
        return list(self._variables.values())

    def _accumulate(self, var: Variable, amount: Any) -> None:
        """``var.assign(var + amount)``, as Keras 3 adds: a local update in a replica, and in cross-replica
        context a read of the cluster-wide sum and a re-split of the new total over the replicas."""
        current = var._read()
        var.assign(current + like(asarray(amount, self.dtype), current))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``update_state(...)`` then ``result()``, as a Keras metric called like a function."""
        self.update_state(*args, **kwargs)
        return self.result()

    def reset_states(self) -> None:
        """tf.keras 2's name for ``reset_state`` (kept so older training loops run unchanged)."""
        self.reset_state()

    def reset_state(self) -> None:
        for var in self._variables.values():
            var.assign(np.zeros(var.shape, self.dtype))

    @abstractmethod
    def update_state(self, *args: Any, **kwargs: Any) -> None:
        """Implemented by subclasses."""

    def build_for(self, y_pred_shape: tuple) -> None:
        """Make the state that depends on the predictions' shape (``compile`` calls it in the model's scope before
        any replica updates the metric); none here."""

    def check_shapes(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        """The shape errors Keras raises when it traces a step updating this metric on labels and predictions of
        these static shapes (None: unknown); none here."""

    @abstractmethod
    def result(self) -> Any:
        """Implemented by subclasses."""


def _reduce_to_samplewise(values: Any, sample_weight: Any, dtype: np.dtype,
                          reduce: Callable[..., Any] = tf_mean) -> tuple[Any, Any]:
    """Keras' ``reduce_to_samplewise_values``: match the weights' rank, ``reduce`` (mean, or sum for ``Sum``) the
    values down to it, weight them, and reduce both to one value (and one weight) per sample."""
    values = asarray(untracked(values), dtype)
    if sample_weight is not None:
        sample_weight = like(asarray(untracked(sample_weight), dtype), values)
        values, sample_weight = losses.squeeze_or_expand_to_same_rank(values, sample_weight)
        weight_ndim = sample_weight.ndim
        if values.ndim > weight_ndim:
            values = reduce(values, axis=tuple(range(weight_ndim, values.ndim)))
        sample_weight = np.broadcast_to(sample_weight, values.shape)
        values = values * sample_weight
        if weight_ndim > 1:
            sample_weight = reduce(sample_weight, axis=tuple(range(1, weight_ndim)))
    if values.ndim > 1:
        values = reduce(values, axis=tuple(range(1, values.ndim)))
    return values, sample_weight


class Sum(Metric):
    """The (weighted) sum of the values seen."""

    def __init__(self, name: str = "sum", dtype: Any = "float32") -> None:
        super().__init__(name, dtype)
        self.total = self.add_variable("total")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        values, _ = _reduce_to_samplewise(values, sample_weight, self.dtype, tf_sum)
        self._accumulate(self.total, tf_sum(values))

    def result(self) -> Any:
        return asarray(self.total._read(), self.dtype)


class Mean(Metric):
    """Weighted mean of the values seen (``total / count``), one count per sample as in Keras 3."""

    def __init__(self, name: str = "mean", dtype: Any = "float32") -> None:
        super().__init__(name, dtype)
        self.total = self.add_variable("total")
        self.count = self.add_variable("count")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        values, sample_weight = _reduce_to_samplewise(values, sample_weight, self.dtype)
        if sample_weight is not None:
            count = tf_sum(sample_weight)
        else:
            count = values.shape[0] if values.ndim else 1
        self._accumulate(self.total, tf_sum(values))
        self._accumulate(self.count, count)

    def update_each(self, values: Sequence[Any], sample_weights: Sequence[Any]) -> None:
        """``update_state(values[k], sample_weight=sample_weights[k])`` on each local replica's own copy k at once,
        for one value and one weight per replica (a stacked step's losses, on NumPy): the same float32 product and
        sums as each replica's (the sum of one value is that value), without entering each replica's context."""
        weights = np.array(sample_weights, self.dtype)
        for var, amounts in ((self.total, np.array(values, self.dtype) * weights), (self.count, weights)):
            new = np.array(var._components, self.dtype) + amounts
            var._set_each("assign", [new[k] for k in range(len(new))])

    def result(self) -> Any:
        total, count = self.total._read(), self.count._read()
        return asarray(total / count, self.dtype) if count else np.zeros((), self.dtype)


def _argmax(values: Any) -> Any:
    """TF's ``argmax`` over the last axis: NaN never wins (NumPy's picks the first NaN)."""
    return np.argmax(np.where(np.isnan(values), -np.inf, values), axis=-1)


def accuracy(y_true: Any, y_pred: Any) -> Any:
    """1.0 where the prediction equals the label (after Keras' rank matching), else 0.0 (float32)."""
    y_pred = asarray(y_pred)
    y_true, y_pred = losses.squeeze_or_expand_to_same_rank(like(asarray(y_true, y_pred.dtype), y_pred), y_pred)
    return (y_true == y_pred).astype(np.float32)


def binary_accuracy(y_true: Any, y_pred: Any, threshold: float = 0.5) -> Any:
    """1.0 where ``y_pred > threshold`` equals the label, else 0.0 (float32), per element."""
    y_pred = asarray(y_pred)
    y_true, y_pred = losses.squeeze_or_expand_to_same_rank(like(asarray(y_true), y_pred), y_pred)
    return (y_true == (y_pred > np.float32(threshold)).astype(y_true.dtype)).astype(np.float32)


def categorical_accuracy(y_true: Any, y_pred: Any) -> Any:
    """1.0 where the arg-max of ``y_pred`` equals the arg-max of the one-hot ``y_true``, else 0.0 (float32)."""
    return sparse_categorical_accuracy(_argmax(asarray(y_true)), y_pred)


def _in_top_k(targets: Any, predictions: Any, k: int) -> Any:
    """TF's ``in_top_k``: every score of the row is finite and fewer than ``k`` beat the target's (ties count as in)."""
    predictions = predictions.reshape(-1, predictions.shape[-1])
    targets = targets.reshape(-1).astype(np.int64)
    valid = (targets >= 0) & (targets < predictions.shape[-1]) & np.isfinite(predictions).all(axis=-1)
    scores = np.take_along_axis(predictions, np.where(valid, targets, 0)[:, None], axis=-1)
    beaten = (predictions > scores).sum(axis=-1)
    return valid & (beaten < k)


def sparse_top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5, from_sorted_ids: bool = False) -> Any:
    """1.0 where the integer label is among the ``k`` top-scored classes (or, ``from_sorted_ids``, among the first
    ``k`` ids of ``y_pred``), else 0.0 (float32), in the labels' shape."""
    y_pred = asarray(y_pred)
    y_true = like(asarray(y_true, y_pred.dtype if from_sorted_ids else np.int32), y_pred)
    if from_sorted_ids:
        ids = y_pred.reshape(-1, y_pred.shape[-1])[:, :k]
        matches = (y_true.reshape(-1)[:, None] == ids).any(axis=1)
    else:
        matches = _in_top_k(y_true, y_pred, k)
    return matches.astype(np.float32).reshape(y_true.shape)


def top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> Any:
    """1.0 where the one-hot label's class is among the ``k`` top-scored classes, else 0.0 (float32)."""
    return sparse_top_k_categorical_accuracy(_argmax(asarray(y_true)), y_pred, k)


def sparse_categorical_accuracy(y_true: Any, y_pred: Any) -> Any:
    """1.0 where the arg-max of ``y_pred`` equals the integer label, else 0.0 (float32), per example."""
    y_pred = asarray(y_pred)
    y_true = like(asarray(y_true, y_pred.dtype), y_pred)
    squeezed = y_true.ndim == y_pred.ndim and y_true.ndim > 0 and y_true.shape[-1] == 1
    labels = y_true[..., 0] if squeezed else y_true
    matches = (labels == _argmax(y_pred).astype(y_true.dtype)).astype(np.float32)
    if matches.ndim > 1 and matches.shape[-1] == 1:
        matches = matches[..., 0]
    return matches


class MeanMetricWrapper(Mean):
    """The mean of ``fn(y_true, y_pred, **kwargs)`` per sample: as Keras, the function computes in the predictions'
    dtype (and reads a sigmoid or softmax output's logits), the mean casts its values to the metric dtype."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None, dtype: Any = "float32",
                 **kwargs: Any) -> None:
        super().__init__(name or fn.__name__, dtype)
        self._fn, self._fn_kwargs = fn, kwargs
        if fn in losses.FUNCTIONS.values():
            self._direction = "down"  # a loss: lower is better

    def build_for(self, y_pred_shape: tuple) -> None:
        """Make the state that depends on the predictions' shape (``compile`` calls it in the model's scope before
        any replica updates the metric); none here."""

    def check_shapes(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        losses.check_function_shapes(self._fn, y_true_shape, y_pred_shape)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_pred = untracked(y_pred)
        values = self._fn(like(asarray(untracked(y_true)), y_pred), y_pred, **self._fn_kwargs)
        super().update_state(values, sample_weight)


class Accuracy(MeanMetricWrapper):
    """Fraction of predictions equal to their labels."""

    _direction = "up"

    def __init__(self, name: str = "accuracy", dtype: Any = "float32") -> None:
        super().__init__(accuracy, name, dtype)


class BinaryAccuracy(MeanMetricWrapper):
    """Fraction of predictions on the label's side of ``threshold``."""

    _config_keys = ("threshold",)

    _direction = "up"

    def __init__(self, name: str = "binary_accuracy", dtype: Any = "float32", threshold: float = 0.5) -> None:
        super().__init__(binary_accuracy, name, dtype, threshold=threshold)
        self.threshold = threshold


class CategoricalAccuracy(MeanMetricWrapper):
    """Fraction of examples whose arg-max prediction is the one-hot label's class."""

    _direction = "up"

    def __init__(self, name: str = "categorical_accuracy", dtype: Any = "float32") -> None:
        super().__init__(categorical_accuracy, name, dtype)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """Fraction of examples whose arg-max prediction equals the integer label."""

    _direction = "up"

    def __init__(self, name: str = "sparse_categorical_accuracy", dtype: Any = "float32") -> None:
        super().__init__(sparse_categorical_accuracy, name, dtype)


class SparseTopKCategoricalAccuracy(MeanMetricWrapper):
    """Fraction of examples whose integer label is among the ``k`` top-scored classes."""

    _config_keys = ("k",)

    _direction = "up"

    def __init__(self, k: int = 5, name: str = "sparse_top_k_categorical_accuracy", dtype: Any = "float32",
                 from_sorted_ids: bool = False) -> None:
        super().__init__(sparse_top_k_categorical_accuracy, name, dtype, k=k, from_sorted_ids=from_sorted_ids)
        self.k, self.from_sorted_ids = k, from_sorted_ids


class TopKCategoricalAccuracy(MeanMetricWrapper):
    """Fraction of examples whose one-hot label's class is among the ``k`` top-scored classes."""

    _config_keys = ("k",)

    _direction = "up"

    def __init__(self, k: int = 5, name: str = "top_k_categorical_accuracy", dtype: Any = "float32") -> None:
        super().__init__(top_k_categorical_accuracy, name, dtype, k=k)
        self.k = k


class MeanSquaredError(MeanMetricWrapper):
    """Mean of the per-example mean squared error."""

    def __init__(self, name: str = "mean_squared_error", dtype: Any = "float32") -> None:
        super().__init__(losses.mean_squared_error, name, dtype)


class MeanSquaredLogarithmicError(MeanMetricWrapper):
    """Mean of the per-example mean squared logarithmic error."""

    def __init__(self, name: str = "mean_squared_logarithmic_error", dtype: Any = "float32") -> None:
        super().__init__(losses.mean_squared_logarithmic_error, name, dtype)


class LogCoshError(MeanMetricWrapper):
    """Mean of the per-example log-cosh error (named ``logcosh``, as Keras')."""

    def __init__(self, name: str = "logcosh", dtype: Any = "float32") -> None:
        super().__init__(losses.log_cosh, name, dtype)


class MeanAbsoluteError(MeanMetricWrapper):
    """Mean of the per-example mean absolute error."""

    def __init__(self, name: str = "mean_absolute_error", dtype: Any = "float32") -> None:
        super().__init__(losses.mean_absolute_error, name, dtype)


class SparseCategoricalCrossentropy(MeanMetricWrapper):
    """Mean of the per-example sparse categorical cross-entropy (Keras' ``ignore_class`` and ``axis`` only at
    their defaults)."""

    _config_keys = ("from_logits", "ignore_class", "axis")

    def __init__(self, name: str = "sparse_categorical_crossentropy", dtype: Any = "float32",
                 from_logits: bool = False, **kwargs: Any) -> None:
        take_fixed_arguments(type(self).__name__, kwargs, {"ignore_class": (None,), "axis": (-1,)})
        if kwargs:
            raise TypeError(f"Unrecognized keyword arguments passed to {type(self).__name__}: {kwargs}")
        super().__init__(losses.sparse_categorical_crossentropy, name, dtype, from_logits=from_logits)
        self.ignore_class, self.axis = None, -1


class BinaryCrossentropy(MeanMetricWrapper):
    """Mean of the per-example binary cross-entropy."""

    _config_keys = ("from_logits", "label_smoothing")

    def __init__(self, name: str = "binary_crossentropy", dtype: Any = "float32", from_logits: bool = False,
                 label_smoothing: float = 0) -> None:
        super().__init__(losses.binary_crossentropy, name, dtype, from_logits=from_logits,
                         label_smoothing=label_smoothing)


class CategoricalCrossentropy(MeanMetricWrapper):
    """Mean of the per-example categorical cross-entropy."""

    _config_keys = ("from_logits", "label_smoothing", "axis")

    def __init__(self, name: str = "categorical_crossentropy", dtype: Any = "float32", from_logits: bool = False,
                 label_smoothing: float = 0, axis: int = -1) -> None:
        super().__init__(losses.categorical_crossentropy, name, dtype, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis)


from .confusion_metrics import AUC, Precision, Recall  # noqa: E402 (they build on Metric, defined above)

_CLASSES: dict[str, type[Metric]] = {cls.__name__: cls for cls in (
    Mean, Sum, Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy, SparseTopKCategoricalAccuracy,
    TopKCategoricalAccuracy, MeanSquaredError, MeanAbsoluteError, MeanSquaredLogarithmicError, LogCoshError,
    SparseCategoricalCrossentropy, BinaryCrossentropy, CategoricalCrossentropy, Precision, Recall, AUC)}
_NAMES: dict[str, type[Metric]] = {  # Keras 3's snake-case names and aliases, each naming a class
    **{to_snake_case(name): cls for name, cls in _CLASSES.items()},
    "mse": MeanSquaredError, "MSE": MeanSquaredError, "mae": MeanAbsoluteError, "MAE": MeanAbsoluteError,
    "bce": BinaryCrossentropy, "BCE": BinaryCrossentropy,
    "msle": MeanSquaredLogarithmicError, "MSLE": MeanSquaredLogarithmicError,
}


def get(identifier: Any) -> Any:
    """As ``keras.metrics.get``: a class, class name, snake-case name or alias gives a new instance, a config its
    object; a metric or a function passes through."""
    return resolve(identifier, Metric, {}, {**_CLASSES, **_NAMES}, "metric")


def serialize(metric: Any) -> Any:
    return serialize_keras_object(metric)


def deserialize(config: Any, custom_objects: dict[str, Any] | None = None) -> Any:
    return deserialize_keras_object({"module": "keras.metrics", **config} if isinstance(config, dict) else config,
                                    custom_objects)


def _accuracy_for(name: str, y_true_shape: tuple, y_pred_shape: tuple) -> Metric:
    """Keras' reading of ``"accuracy"``/``"acc"`` (any case) in ``compile``: the binary, sparse or categorical
    accuracy the label and output shapes call for."""
    return {"binary": BinaryAccuracy, "sparse": SparseCategoricalAccuracy,
            "categorical": CategoricalAccuracy}[losses.label_kind(y_true_shape, y_pred_shape)](name=name)


def compiled(identifiers: list[Any], y_true_shape: tuple, y_pred_shape: tuple) -> list[Metric]:
    """The metrics ``compile`` tracks, built (as Keras builds them) for the shapes of the first labels and predictions:
    strings name the metric after themselves and functions are wrapped in a ``MeanMetricWrapper`` (log names are
    made unique by ``compile_metrics``, as Keras does, without renaming the metrics)."""
    metrics: list[Metric] = []
    for identifier in identifiers:
        if str(identifier).lower() in ("accuracy", "acc"):
            metric = _accuracy_for(str(identifier), y_true_shape, y_pred_shape)
        else:
            metric = get(identifier)
        if not isinstance(metric, Metric):
            metric = MeanMetricWrapper(metric)
        if isinstance(identifier, str):
            metric.name = identifier
        metric.build_for(y_pred_shape)
        metrics.append(metric)
    return metrics
