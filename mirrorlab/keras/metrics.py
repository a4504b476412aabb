"""Metrics whose state is ON_READ SUM variables: each replica accumulates locally and a cross-replica
read (``result()``, or a checkpoint save) aggregates over every replica of the cluster, as in TF."""

from __future__ import annotations

from abc import ABC, abstractmethod

from typing import Any

import numpy as np

from ..aggregation import VariableAggregation, VariableSynchronization
from ..distribute.variables import Variable
from ..tensor import asarray, like

from .registry import lookup

__all__ = ["Metric", "Mean", "SparseCategoricalAccuracy", "get"]


class Metric(ABC):
    """Base: ``update_state`` in replica context, ``result``/``reset_state`` in cross-replica context."""

    def __init__(self, name: str | None = None, dtype: Any = "float32") -> None:
        self.name = name or type(self).__name__.lower()
        self.dtype = np.dtype(dtype)
        self._variables: dict[str, Variable] = {}

    def add_variable(self, name: str) -> Variable:
        var = Variable(np.zeros((), self.dtype), name=f"{self.name}/{name}", trainable=False,
                       synchronization=VariableSynchronization.ON_READ, aggregation=VariableAggregation.SUM)
        self._variables[name] = var
        return var

    @property
    def variables(self) -> list[Variable]:
        return list(self._variables.values())

    def _checkpoint_children(self) -> dict[str, Any]:
        return dict(self._variables)

    def reset_state(self) -> None:
        for var in self._variables.values():
            var.assign(np.zeros((), self.dtype))

    @abstractmethod
    def update_state(self, *args: Any, **kwargs: Any) -> None:
        """Implemented by subclasses."""

    @abstractmethod
    def result(self) -> Any:
        """Implemented by subclasses."""


class Mean(Metric):
    """Weighted mean of the values seen (``total / count``)."""

    def __init__(self, name: str = "mean", dtype: Any = "float32") -> None:
        super().__init__(name, dtype)
        self.total = self.add_variable("total")
        self.count = self.add_variable("count")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        values = asarray(values, self.dtype)
        weight = np.ones_like(values) if sample_weight is None else np.broadcast_to(
            like(asarray(sample_weight, self.dtype), values), values.shape)
        self.total.assign_add(asarray((values * weight).sum(), self.dtype))
        self.count.assign_add(asarray(weight.sum(), self.dtype))

    def result(self) -> Any:
        total, count = self.total.value(), self.count.value()
        return asarray(total / count, self.dtype) if count else np.zeros((), self.dtype)


class SparseCategoricalAccuracy(Mean):
    """Fraction of examples whose arg-max prediction equals the integer label."""

    def __init__(self, name: str = "sparse_categorical_accuracy", dtype: Any = "float32") -> None:
        super().__init__(name, dtype)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_pred = asarray(y_pred)
        labels = like(asarray(y_true), y_pred)
        if labels.ndim == y_pred.ndim:
            labels = labels.reshape(labels.shape[:-1])
        super().update_state((np.argmax(y_pred, axis=-1) == labels).astype(self.dtype), sample_weight)


_BY_NAME = {"accuracy": SparseCategoricalAccuracy, "acc": SparseCategoricalAccuracy,
            "sparse_categorical_accuracy": SparseCategoricalAccuracy}


def get(identifier: str | Metric) -> Metric:
    """A metric instance; ``"accuracy"`` means sparse categorical accuracy (the only labels supported)."""
    metric = lookup(identifier, Metric, _BY_NAME, "metric")
    if identifier in ("accuracy", "acc"):
        metric.name = identifier  # the history key is the name given, as in Keras
    return metric
