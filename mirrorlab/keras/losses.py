"""Losses with the gradient of their per-example sum (for explicit backward passes)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from typing import Any

import numpy as np

from ..nn import compute_average_loss
from ..tensor import array_module, asarray, like

from .registry import lookup

__all__ = ["Loss", "MeanSquaredError", "SparseCategoricalCrossentropy", "mean_squared_error",
           "sparse_categorical_crossentropy", "get", "compute_average_loss"]

EPSILON = 1e-7


class Loss(ABC):
    """``call(y_true, y_pred)`` gives per-example losses; ``__call__`` reduces them (mean by default)."""

    def __init__(self, reduction: str | None = "sum_over_batch_size", name: str | None = None) -> None:
        if reduction not in ("sum_over_batch_size", "sum", "none", None, "mean"):
            raise ValueError(f"Invalid value for argument `reduction`: {reduction!r}. Expected one of "
                             "'sum_over_batch_size', 'sum', 'mean', 'none' or None.")
        self.reduction = reduction
        self.name = name or type(self).__name__

    @abstractmethod
    def call(self, y_true: Any, y_pred: Any) -> Any:
        """Implemented by subclasses."""

    @abstractmethod
    def grad(self, y_true: Any, y_pred: Any) -> Any:
        """Gradient of ``sum(call(y_true, y_pred))`` with respect to ``y_pred``."""

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        losses = self.call(y_true, y_pred)
        if sample_weight is not None:
            losses = losses * like(asarray(sample_weight, losses.dtype), losses)
        if self.reduction in ("none", None):
            return losses
        total = losses.sum(dtype=losses.dtype)
        if self.reduction == "sum":
            return total
        return asarray(total / max(losses.size, 1), losses.dtype)


def _match(y_true: Any, y_pred: Any) -> Any:
    y_true = like(asarray(y_true, y_pred.dtype), y_pred)
    return y_true[..., None] if y_true.ndim == y_pred.ndim - 1 else y_true


class MeanSquaredError(Loss):
    """Mean over the last axis of the squared error."""

    def call(self, y_true: Any, y_pred: Any) -> Any:
        y_pred = asarray(y_pred)
        diff = y_pred - _match(y_true, y_pred)
        return np.mean(diff * diff, axis=-1) if y_pred.ndim else diff * diff

    def grad(self, y_true: Any, y_pred: Any) -> Any:
        y_pred = asarray(y_pred)
        width = y_pred.shape[-1] if y_pred.ndim else 1
        return (2.0 / width) * (y_pred - _match(y_true, y_pred))


class SparseCategoricalCrossentropy(Loss):
    """Cross-entropy against integer labels, from logits or from probabilities."""

    def __init__(self, from_logits: bool = False, reduction: str | None = "sum_over_batch_size",
                 name: str | None = None) -> None:
        super().__init__(reduction, name)
        self.from_logits = from_logits

    @staticmethod
    def _labels(y_true: Any, y_pred: Any) -> Any:
        labels = like(asarray(y_true), y_pred)
        if labels.ndim == y_pred.ndim:
            labels = labels.reshape(labels.shape[:-1])
        return labels.astype(np.int64)

    def call(self, y_true: Any, y_pred: Any) -> Any:
        y_pred = asarray(y_pred)
        labels = self._labels(y_true, y_pred)
        if self.from_logits:
            shift = y_pred - y_pred.max(axis=-1, keepdims=True)
            log_norm = np.log(np.exp(shift).sum(axis=-1))
            return log_norm - np.take_along_axis(shift, labels[..., None], axis=-1)[..., 0]
        # Keras clips the probabilities first, then the cross-entropy renormalises them.
        probs = np.clip(y_pred, EPSILON, 1 - EPSILON)
        picked = np.take_along_axis(probs, labels[..., None], axis=-1)[..., 0]
        return np.log(probs.sum(axis=-1)) - np.log(picked)

    def grad(self, y_true: Any, y_pred: Any) -> Any:
        y_pred = asarray(y_pred)
        labels = self._labels(y_true, y_pred)
        xp = array_module(y_pred)
        onehot = (xp.arange(y_pred.shape[-1]) == labels[..., None]).astype(y_pred.dtype)
        if self.from_logits:
            shift = np.exp(y_pred - y_pred.max(axis=-1, keepdims=True))
            return shift / shift.sum(axis=-1, keepdims=True) - onehot
        probs = np.clip(y_pred, EPSILON, 1 - EPSILON)
        total = probs.sum(axis=-1, keepdims=True)
        picked = np.take_along_axis(probs, labels[..., None], axis=-1)
        inside = (y_pred > EPSILON) & (y_pred < 1 - EPSILON)
        return np.where(inside, 1.0 / total - onehot / picked, 0.0).astype(y_pred.dtype)


def mean_squared_error(y_true: Any, y_pred: Any) -> Any:
    return MeanSquaredError(reduction=None).call(y_true, y_pred)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False) -> Any:
    return SparseCategoricalCrossentropy(from_logits=from_logits).call(y_true, y_pred)


_BY_NAME = {"mse": MeanSquaredError, "mean_squared_error": MeanSquaredError,
            "sparse_categorical_crossentropy": SparseCategoricalCrossentropy}


def get(identifier: str | Loss) -> Loss:
    return lookup(identifier, Loss, _BY_NAME, "loss")
