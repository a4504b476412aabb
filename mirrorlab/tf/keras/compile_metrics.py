"""``compile(metrics=..., weighted_metrics=...)`` as Keras 3 tracks them: ``metrics`` ignore sample weights,
``weighted_metrics`` take them; both are built for the first data's label and output shapes, and their logs get
Keras' names (a repeated name gets ``_1``, ``_2``...; a weighted metric whose name is taken becomes
``weighted_<name>``), while each metric keeps its own ``name``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...distribute import context
from .metrics import Metric, compiled

__all__ = ["CompileMetrics"]


def _identifiers(value: Any, argument: str) -> list[Any]:
    """The metric identifiers of ``metrics``/``weighted_metrics`` (a list, tuple or dict; Keras' error otherwise)."""
    if not value:
        return []
    if isinstance(value, dict):
        return [value[key] for key in sorted(value)]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ValueError(f"Expected `{argument}` argument to be a list, tuple, or dict. Received instead: "
                     f"{argument}={value} of type {type(value)}")


def _unique(name: str, counters: dict[str, int]) -> str:
    """``name``, or ``name_<n>`` for its n-th repeat, counted in ``counters``."""
    if name not in counters:
        counters[name] = 1
        return name
    counters[name] += 1
    return f"{name}_{counters[name] - 1}"


class CompileMetrics:
    """The compiled metrics of one single-output model: unweighted ones first, then the weighted ones. One entry of
    ``model.metrics``, named as Keras names it; its result is a dict of each metric's result."""

    name = "compile_metrics"

    def __init__(self, metrics: Any, weighted_metrics: Any) -> None:
        self.requested = metrics is not None or weighted_metrics is not None  # (else not among model.metrics)
        self._identifiers = _identifiers(metrics, "metrics")
        self._weighted_identifiers = _identifiers(weighted_metrics, "weighted_metrics")
        self.built = False
        self.unweighted: list[Metric] = []
        self.weighted: list[Metric] = []

    @property
    def metrics(self) -> list[Metric]:
        return [*self.unweighted, *self.weighted]

    @property
    def variables(self) -> list[Any]:
        return [v for metric in self.metrics for v in metric.variables]

    def build(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        """Make the metrics for these shapes ("accuracy" and the like depend on them); call in the model's scope."""
        self.unweighted = compiled(self._identifiers, y_true_shape, y_pred_shape)
        self.weighted = compiled(self._weighted_identifiers, y_true_shape, y_pred_shape)
        self.built = True

    def check_shapes(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        """Each metric's shape errors for these static shapes (see ``Metric.check_shapes``)."""
        for metric in self.metrics:
            metric.check_shapes(y_true_shape, y_pred_shape)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Update each metric; a first update before any ``fit`` (a custom step called directly) builds them for
        these values' shapes, once for all replicas."""
        if not self.built:
            shapes = (np.shape(y_true), np.shape(y_pred))
            if context.in_cross_replica_context():
                self.build(*shapes)
            else:
                context.get_replica_context().merge_call(lambda _: None if self.built else self.build(*shapes))
        for metric in self.unweighted:
            metric.update_state(y_true, y_pred, sample_weight=None)  # as Keras calls them
        for metric in self.weighted:
            metric.update_state(y_true, y_pred, sample_weight=sample_weight)

    def reset_state(self) -> None:
        for metric in self.metrics:
            metric.reset_state()

    def result(self) -> dict[str, Any]:
        """Each metric's result under its log name."""
        counters: dict[str, int] = {}
        logs = {_unique(m.name, counters): m.result() for m in self.unweighted}
        for metric in self.weighted:
            name = metric.name if metric.name not in counters else f"weighted_{metric.name}"
            logs[_unique(name, counters)] = metric.result()
        return logs
