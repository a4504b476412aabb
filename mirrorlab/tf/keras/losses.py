"""Losses as in Keras 3 on TF 2.21, each with the gradient of its per-example sum (for explicit backward passes).

``Loss.__call__`` follows Keras: inputs are cast to the loss dtype (float32), ``sample_weight`` is squeezed or
expanded to the losses' rank, and ``"sum_over_batch_size"`` divides by the number of loss values *and* by the
number of replicas in sync of the current strategy (Keras' ``scale_loss_for_distribution``), so summing the
replicas' losses gives the global mean on even batches.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import errors
from .._kernels import nn_kernels, portable_math
from ...distribute import context
from ...distribute.batch_safe import stacked_replicas
from ..autodiff import track, unbroadcast, untracked, watched
from ..nn import broadcasting, compute_average_loss, softplus
from ..nn_ops import check_labels
from .._kernels.summation import rows_summed_apart, tf_mean, tf_sum, tf_sum_rows
from ...tensor import array_module, asarray, like, tensors_out
from . import activations
from .registry import resolve
from .saving.serialization import deserialize_keras_object, serialize_keras_object

__all__ = ["Loss", "Reduction", "MeanSquaredError", "MeanAbsoluteError", "Huber", "LogCosh",
           "MeanSquaredLogarithmicError", "SparseCategoricalCrossentropy", "BinaryCrossentropy",
           "CategoricalCrossentropy",
           "mean_squared_error", "mean_absolute_error", "huber", "log_cosh", "mean_squared_logarithmic_error",
           "sparse_categorical_crossentropy", "binary_crossentropy", "categorical_crossentropy", "get", "serialize",
           "deserialize",
           "check_function_shapes", "compute_average_loss", "matched_shapes"]

EPSILON = 1e-7
REDUCTIONS = ("sum_over_batch_size", "sum", None, "none", "mean", "mean_with_sample_weight")


class Reduction:
    """tf.keras 2's reduction names (Keras 3 takes the strings), so older training loops run unchanged."""

    NONE = "none"
    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
    AUTO = "sum_over_batch_size"


def squeeze_or_expand_to_same_rank(x1: Any, x2: Any, expand_rank_1: bool = True) -> tuple[Any, Any]:
    """Keras' rule: where the ranks differ by one and the longer has a last dimension of 1, squeeze that
    dimension (or, when the shorter is a vector, expand the shorter instead)."""
    if x1.ndim == x2.ndim + 1 and x1.shape[-1] == 1:
        if x2.ndim == 1 and expand_rank_1:
            return x1, x2[..., None]
        return x1[..., 0], x2
    if x2.ndim == x1.ndim + 1 and x2.shape[-1] == 1:
        if x1.ndim == 1 and expand_rank_1:
            return x1[..., None], x2
        return x1, x2[..., 0]
    return x1, x2


def matched_shapes(a: tuple, b: tuple) -> tuple[tuple, tuple]:
    """``squeeze_or_expand_to_same_rank`` on shapes (a None dimension is no 1, as when Keras traces a step)."""
    if len(a) == len(b) + 1 and a[-1] == 1:
        return (a, (*b, 1)) if len(b) == 1 else (a[:-1], b)
    if len(b) == len(a) + 1 and b[-1] == 1:
        return ((*a, 1), b) if len(a) == 1 else (a, b[:-1])
    return a, b


def _differ(a: tuple, b: tuple) -> bool:
    """Whether two shapes of one rank disagree on a dimension both know."""
    return any(x is not None and y is not None and x != y for x, y in zip(a, b))


def _check_sparse_shapes(target: tuple, output: tuple) -> None:
    """Keras' errors for sparse labels of shape ``target`` (a trailing 1 squeezed) against predictions ``output``."""
    if len(target) == len(output) and target and target[-1] == 1:
        target = target[:-1]
    if len(target) != len(output) - 1:
        raise ValueError("Argument `output` must have rank (ndim) `target.ndim - 1`. Received: "
                         f"target.shape={target}, output.shape={output}")
    if _differ(target, output[:-1]):
        raise ValueError("Arguments `target` and `output` must have the same shape up until the last dimension: "
                         f"target.shape={target}, output.shape={output}")


def _check_dense_shapes(target: tuple, output: tuple) -> None:
    """Keras' errors for targets of shape ``target`` that are not of the predictions' shape ``output``."""
    if len(target) != len(output):
        raise ValueError("Arguments `target` and `output` must have the same rank (ndim). Received: "
                         f"target.shape={target}, output.shape={output}")
    if _differ(target, output):
        raise ValueError("Arguments `target` and `output` must have the same shape. Received: "
                         f"target.shape={target}, output.shape={output}")


def _check_broadcast(y_true: tuple, y_pred: tuple, op: str) -> None:
    """TF's shape inference on a traced ``y_true - y_pred`` (after Keras' rank matching): dimensions both shapes
    know must be equal or 1, else the ValueError a trace raises (a graph report naming the op's node)."""
    y_true, y_pred = matched_shapes(tuple(y_true), tuple(y_pred))
    for a, b in zip(reversed(y_true), reversed(y_pred)):
        if a is not None and b is not None and a != b and 1 not in (a, b):
            shapes = ", ".join("[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
                               for shape in (y_true, y_pred))
            raise ValueError(f"Dimensions must be equal, but are {a} and {b} for '{{{{node compile_loss/{op}/sub}}}} = "
                             f"Sub[T=DT_FLOAT](y_true, y_pred)' with input shapes: {shapes}.\nFix: give y_true "
                             "the shape of the predictions.")


def _reduction_scale(values: Any, sample_weight: Any, reduction: str | None,
                     traced: bool = False) -> tuple[Any, Any] | None:
    """Keras' ``reduce_values`` as ``(divisor, factor)``: the sum of ``values`` is divided by ``divisor``
    (div_no_nan) and multiplied by ``factor`` (``1 / num_replicas_in_sync`` for means under a strategy). None:
    no reduction (also for scalars and empty vectors, which Keras passes through eagerly; ``traced``, as in a
    compiled step, their batch dimension is unknown, so they are reduced: an empty batch gives 0)."""
    if reduction in (None, "none") or (not traced and values.shape in ((), (0,))):
        return None
    one = values.dtype.type(1)
    if reduction == "sum":
        return one, one
    if reduction == "mean_with_sample_weight" and sample_weight is not None:
        divisor = tf_sum(asarray(sample_weight, values.dtype))
    else:
        divisor = values.dtype.type(values.size)
    replicas = context.get_strategy().num_replicas_in_sync
    return divisor, values.dtype.type(1.0 / replicas) if replicas > 1 else one


def _scaled(value: Any, scale: tuple[Any, Any]) -> Any:
    """``value / divisor * factor``, 0 where the divisor is 0 (Keras' order of operations)."""
    divisor, factor = scale
    mean = value / divisor if divisor else value * divisor
    return mean * factor if factor != 1 else mean


def _reduce(values: Any, scale: tuple[Any, Any] | None) -> Any:
    """``values`` reduced as ``_reduction_scale`` says."""
    if scale is None:
        return values
    return asarray(_scaled(tf_sum(values), scale), values.dtype)


class Loss(ABC):
    """``call(y_true, y_pred)`` gives per-example losses; ``__call__`` weights and reduces them."""

    def __init__(self, name: str | None = None, reduction: str | None = "sum_over_batch_size",
                 dtype: Any = None) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"Invalid value for argument `reduction`. Expected one of {set(REDUCTIONS)}. "
                             f"Received: reduction={reduction}")
        self.reduction = reduction
        self.name = name or type(self).__name__
        self.dtype = np.dtype(dtype or "float32")

    @abstractmethod
    def call(self, y_true: Any, y_pred: Any) -> Any:
        """Per-example losses (implemented by subclasses)."""

    @abstractmethod
    def grad(self, y_true: Any, y_pred: Any, upstream: Any = None) -> Any:
        """Gradient of ``sum(call(y_true, y_pred) * upstream)`` (``upstream`` defaults to ones) w.r.t. ``y_pred``."""

    def _on_logits(self, y_pred: Any) -> tuple["Loss", Any]:
        """The loss and the predictions to compute from: cross-entropies take a sigmoid or softmax output's logits."""
        return self, y_pred

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        loss, y_pred = self._on_logits(watched(y_pred))  # (a variable as predictions: its read, on a tape)
        return tensors_out(loss._weighted(y_true, y_pred, sample_weight))

    _stacks = False  # a class that declares (in its own body) that it computes each row apart: see stack_refusal

    def stack_refusal(self, label_shape: tuple, prediction_shape: tuple) -> str | None:
        """Why ``stacked_in_step`` cannot stand for ``in_step`` on each replica (one replica's labels and predictions
        of these shapes); None when it can: the loss's own class declares ``_stacks`` (its ``call`` and ``grad`` treat
        rows apart), the labels match the predictions without broadcasting (Keras' rank matching counts ranks, which
        a replica axis would shift), it reduces to the mean over the batch, and its sums along a row stay each
        row's own."""
        if self.reduction != "sum_over_batch_size":
            return f"loss {self.name!r} reduces with {self.reduction!r}"
        return self._rows_refusal(label_shape, prediction_shape)

    def _rows_refusal(self, label_shape: tuple, prediction_shape: tuple) -> str | None:
        """``stack_refusal`` but for the reduction: why the per-example losses and their gradients cannot be computed
        for all replicas at once, each row as its replica's own; None when they can."""
        width = prediction_shape[-1]
        if not vars(type(self)).get("_stacks"):
            return f"loss {self.name!r} ({type(self).__name__}) has no stacked execution"
        if tuple(label_shape) not in self._stacked_label_shapes(tuple(prediction_shape)):
            return f"loss {self.name!r} broadcasts labels of shape {tuple(label_shape)} to {tuple(prediction_shape)}"
        if getattr(self, "axis", -1) != -1:
            return f"loss {self.name!r} reduces over axis {self.axis}"
        if getattr(self, "ignore_class", None) is not None:
            return f"loss {self.name!r} masks ignore_class={self.ignore_class}"
        if not rows_summed_apart(width, self.dtype):
            return f"loss {self.name!r} sums rows of {width} values across replicas"
        return None

    def _stacked_label_shapes(self, prediction_shape: tuple) -> tuple[tuple, ...]:
        """The label shapes a stacked step takes for predictions of ``prediction_shape`` (one replica's): the same."""
        return (prediction_shape,)

    def stacked_in_step(self, y_true: Any, y_pred: Any) -> tuple[Any, Any, Any]:
        """``in_step`` (no sample weights) of every replica at once, ``y_true`` and ``y_pred`` stacked on a leading
        replica axis: ``(losses, grads, predictions)``, each replica's loss, its gradient w.r.t. the predictions the
        loss computed from (``predictions``: ``y_pred`` or its logits), as ``in_step`` and its backward pass give
        them, bit for bit (only when ``stack_refusal`` allows)."""
        loss, y_pred = self._on_logits(y_pred)
        predictions = asarray(untracked(y_pred), loss.dtype)
        y_true = like(asarray(untracked(y_true), loss.dtype), predictions)
        def upstream_of(per_example: Any) -> Any:
            return np.broadcast_to(_scaled(np.ones((), loss.dtype), scale_of(per_example)), np.shape(per_example))

        def scale_of(per_example: Any) -> Any:
            return _reduction_scale(asarray(per_example, loss.dtype)[0], None, loss.reduction, traced=True)

        per_example, grads = loss.call_and_grad(y_true, predictions, upstream_of)
        per_example = asarray(per_example, loss.dtype)
        losses = asarray(_scaled(tf_sum_rows(per_example.reshape(len(per_example), -1)), scale_of(per_example)),
                         loss.dtype)  # (each replica's own scale)
        return losses, grads, y_pred

    def in_step(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        """The loss as ``fit``/``evaluate``'s traced step computes it: the batch size is unknown when Keras traces the
        step, so even an empty batch (a replica without data) is reduced, to 0."""
        loss, y_pred = self._on_logits(y_pred)
        return loss._weighted(y_true, y_pred, sample_weight, traced=True)

    def _mask(self, y_true: Any, y_pred: Any) -> Any:
        """The per-example losses that count (None: all), as Keras' loss mask."""
        return None

    def _mask_weight(self, mask: Any, sample_weight: Any) -> Any:
        """Keras' ``apply_mask``: the masked-out losses weigh 0 and, for a mean, the others ``total / valid``; times
        the sample weights."""
        weight = mask.astype(self.dtype)
        if self.reduction in ("mean", "sum_over_batch_size"):
            weight = weight * self.dtype.type(weight.size / (float(weight.sum()) + 1e-7))
        if sample_weight is None:
            return weight
        weight, given = squeeze_or_expand_to_same_rank(weight, asarray(untracked(sample_weight), self.dtype))
        return given * weight

    def _weighted(self, y_true: Any, y_pred: Any, sample_weight: Any, traced: bool = False) -> Any:
        """``__call__`` once the predictions are chosen: per-example losses, weighted and reduced."""
        tracked = y_pred
        y_pred = asarray(untracked(y_pred), self.dtype)
        y_true = like(asarray(untracked(y_true), self.dtype), y_pred)
        if stacked_replicas() is not None:
            return self._stacked_weighted(tracked, y_true, y_pred, sample_weight, traced)
        mask = self._mask(y_true, y_pred)
        if mask is not None:
            sample_weight = self._mask_weight(mask, sample_weight)
        per_example = asarray(self.call(y_true, y_pred), self.dtype)
        losses, weight = per_example, None
        matched_shape = per_example.shape  # the per-example losses' shape after rank matching with the weights
        if sample_weight is not None:
            weight = like(asarray(untracked(sample_weight), self.dtype), losses)
            losses, weight = squeeze_or_expand_to_same_rank(losses, weight)
            matched_shape = losses.shape
            losses = broadcasting(np.multiply, "Mul", losses, weight,
                                   "give sample_weight one weight per example (or per loss value), or a scalar.")
        scale = _reduction_scale(losses, weight, self.reduction, traced)

        def backward(g: Any) -> list[tuple[Any, Any]]:
            upstream = np.broadcast_to(g if scale is None else _scaled(g, scale), losses.shape)
            if weight is not None:
                upstream = upstream * weight
            upstream = unbroadcast(upstream, matched_shape).reshape(per_example.shape)
            return [(tracked, self.grad(y_true, y_pred, upstream))]
        return track(_reduce(losses, scale), backward, (tracked,))

    def _stacked_weighted(self, tracked: Any, y_true: Any, y_pred: Any, sample_weight: Any, traced: bool) -> Any:
        """``_weighted`` in a ``@batch_safe`` function run stacked (labels and predictions carry the local replicas
        first): each replica's losses reduced on their own, as ``_weighted`` reduces one replica's, bit for bit."""
        refusal = "sample weights" if sample_weight is not None else self._rows_refusal(y_true.shape[1:],
                                                                                        y_pred.shape[1:])
        if refusal is not None:
            raise NotImplementedError(f"{refusal}: loss {self.name!r} cannot run in a @batch_safe function run "
                                      "stacked.\nFix: a loss that runs stacked (see docs/keras.md, Stacked "
                                      "replicas) without sample weights, or remove @batch_safe.")
        losses = asarray(self.call(y_true, y_pred), self.dtype)
        scale = _reduction_scale(losses[0], None, self.reduction, traced)  # (each replica's own)

        def backward(g: Any) -> list[tuple[Any, Any]]:
            upstream = g if scale is None else _scaled(g, scale)
            upstream = np.reshape(upstream, np.shape(upstream) + (1,) * (losses.ndim - np.ndim(upstream)))
            return [(tracked, self.grad(y_true, y_pred, np.broadcast_to(upstream, losses.shape)))]
        reduced = losses if scale is None else asarray(_scaled(tf_sum_rows(losses.reshape(len(losses), -1)), scale),
                                                       self.dtype)
        return track(reduced, backward, (tracked,))

    def call_and_grad(self, y_true: Any, y_pred: Any, upstream_of: Any) -> tuple[Any, Any]:
        """``call`` and ``grad`` of it with the upstream gradient ``upstream_of(per_example)`` (a loss may share
        their common terms)."""
        per_example = self.call(y_true, y_pred)
        return per_example, self.grad(y_true, y_pred, upstream_of(per_example))

    def per_example(self, y_true: Any, y_pred: Any) -> Any:
        """Keras' function form of the loss (``keras.losses.mean_squared_error`` ...): per-example values."""
        return self.call(y_true, y_pred)

    def check_shapes(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        """The shape errors Keras raises when it traces a step on labels and predictions of these static shapes
        (None: unknown), with those shapes in the message; this loss has none."""

    _config_keys: tuple[str, ...] = ()  # a subclass's own arguments in Keras' config (attributes of that name)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "reduction": self.reduction, **{key: getattr(self, key) for key in self._config_keys}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Loss":
        return cls(**config)


class _ElementwiseMean(Loss):
    """A loss ``mean(f(y_true, y_pred), axis=-1)`` after Keras' rank matching."""

    default_name: str

    def __init__(self, reduction: str | None = "sum_over_batch_size", name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(name or self.default_name, reduction, dtype)

    @abstractmethod
    def _f_pair(self, y_true: Any, y_pred: Any, diff: Any) -> Any:
        """The element-wise penalty of the (rank-matched) labels and predictions, whose difference is ``diff``."""

    @abstractmethod
    def _df_pair(self, y_true: Any, y_pred: Any, diff: Any) -> Any:
        """Its derivative with respect to ``y_pred``."""

    @staticmethod
    def _diff(y_true: Any, y_pred: Any) -> tuple[Any, Any, Any]:
        """``y_pred - y_true`` after rank matching, with the matched labels and predictions."""
        y_true, matched = squeeze_or_expand_to_same_rank(like(asarray(y_true, y_pred.dtype), y_pred), y_pred)
        diff = -broadcasting(np.subtract, "Sub", y_true, matched, "give y_true the shape of y_pred.")
        if diff.ndim == 0:
            raise errors.InvalidArgumentError(
                "Invalid reduction dimension (-1 for input with 0 dimension(s) [Op:Mean]\nFix: give the "
                "predictions at least one dimension (a batch of values).")
        return diff, y_true, matched

    def check_shapes(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        _check_broadcast(y_true_shape, y_pred_shape, self.default_name)

    def call(self, y_true: Any, y_pred: Any) -> Any:
        diff, y_true, matched = self._diff(y_true, asarray(y_pred))
        return tf_mean(self._f_pair(y_true, matched, diff), axis=-1)

    def grad(self, y_true: Any, y_pred: Any, upstream: Any = None) -> Any:
        y_pred = asarray(y_pred)
        diff, y_true, matched = self._diff(y_true, y_pred)
        grad = np.broadcast_to(self._df_pair(y_true, matched, diff), diff.shape) / y_pred.dtype.type(diff.shape[-1])
        if upstream is not None:
            grad = grad * asarray(upstream).reshape(diff.shape[:-1])[..., None]
        return unbroadcast(grad, matched.shape).reshape(y_pred.shape).astype(y_pred.dtype, copy=False)


class _DifferenceMean(_ElementwiseMean):
    """A loss ``mean(f(y_pred - y_true), axis=-1)`` after Keras' rank matching."""

    @abstractmethod
    def _f(self, diff: Any) -> Any:
        """The element-wise penalty of the difference."""

    @abstractmethod
    def _df(self, diff: Any) -> Any:
        """Its derivative."""

    def _f_pair(self, y_true: Any, y_pred: Any, diff: Any) -> Any:
        return self._f(diff)

    def _df_pair(self, y_true: Any, y_pred: Any, diff: Any) -> Any:
        return self._df(diff)


class MeanSquaredError(_DifferenceMean):
    """Mean over the last axis of the squared error."""

    default_name = "mean_squared_error"
    _stacks = True

    def _f(self, diff: Any) -> Any:
        return diff * diff

    def _df(self, diff: Any) -> Any:
        return 2 * diff


class MeanAbsoluteError(_DifferenceMean):
    """Mean over the last axis of the absolute error."""

    default_name = "mean_absolute_error"
    _stacks = True

    def _f(self, diff: Any) -> Any:
        return abs(diff)

    def _df(self, diff: Any) -> Any:
        return array_module(diff).sign(diff)


class Huber(_DifferenceMean):
    """Mean over the last axis of ``0.5 * d**2`` where ``|d| <= delta``, else ``delta * |d| - 0.5 * delta**2``."""

    default_name = "huber_loss"

    def __init__(self, delta: float = 1.0, reduction: str | None = "sum_over_batch_size", name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(reduction, name, dtype)
        self.delta = delta

    def _f(self, diff: Any) -> Any:
        delta, half = diff.dtype.type(self.delta), diff.dtype.type(0.5)
        return np.where(abs(diff) <= delta, half * (diff * diff), delta * abs(diff) - half * (delta * delta))

    def _df(self, diff: Any) -> Any:
        delta = diff.dtype.type(self.delta)
        return np.where(abs(diff) <= delta, diff, delta * array_module(diff).sign(diff))


class LogCosh(_DifferenceMean):
    """Mean over the last axis of ``log(cosh(d))``, computed as Keras' ``d + softplus(-2 d) - log(2)``."""

    default_name = "log_cosh"

    def _f(self, diff: Any) -> Any:
        log2 = diff.dtype.type(portable_math.log(np.float32(2.0)))
        return diff + untracked(softplus(diff * diff.dtype.type(-2.0))) - log2

    def _df(self, diff: Any) -> Any:
        one = diff.dtype.type(1)
        return one - diff.dtype.type(2) / (portable_math.exp(diff * diff.dtype.type(2)) + one)


class MeanSquaredLogarithmicError(_ElementwiseMean):
    """Mean over the last axis of ``(log(max(y_pred, eps) + 1) - log(max(y_true, eps) + 1)) ** 2`` (Keras' epsilon)."""

    default_name = "mean_squared_logarithmic_error"

    @staticmethod
    def _logs(y_true: Any, y_pred: Any) -> tuple[Any, Any, Any]:
        eps = y_pred.dtype.type(EPSILON)
        shifted = np.maximum(y_pred, eps) + y_pred.dtype.type(1)
        return shifted, nn_kernels.log(shifted), nn_kernels.log(np.maximum(y_true, eps) + y_pred.dtype.type(1))

    def _f_pair(self, y_true: Any, y_pred: Any, diff: Any) -> Any:
        _, first, second = self._logs(y_true, y_pred)
        return np.square(first - second)

    def _df_pair(self, y_true: Any, y_pred: Any, diff: Any) -> Any:
        shifted, first, second = self._logs(y_true, y_pred)  # (tf.maximum passes the gradient on ties)
        grad = y_pred.dtype.type(2) * (first - second) / shifted
        return np.where(y_pred >= y_pred.dtype.type(EPSILON), grad, y_pred.dtype.type(0))


class _Crossentropy(Loss):
    """A cross-entropy from logits or from probabilities; a sigmoid or softmax output is read as its logits."""

    def __init__(self, from_logits: bool, reduction: str | None, name: str, dtype: Any) -> None:
        super().__init__(name, reduction, dtype)
        self.from_logits = from_logits

    def _on_logits(self, y_pred: Any) -> tuple[Loss, Any]:
        logits = activations.logits_of(y_pred)
        if logits is None:
            return self, y_pred
        on_logits = copy.copy(self)
        on_logits.from_logits = True  # Keras uses the logits whatever from_logits says (it warns if True)
        return on_logits, logits


class SparseCategoricalCrossentropy(_Crossentropy):
    """Cross-entropy against integer labels, from logits or from probabilities; labels equal to ``ignore_class``
    count for nothing (their losses are 0 and a mean is over the others, as Keras masks them)."""

    _config_keys = ("from_logits", "ignore_class")
    _stacks = True

    def __init__(self, from_logits: bool = False, ignore_class: int | None = None,
                 reduction: str | None = "sum_over_batch_size", name: str = "sparse_categorical_crossentropy",
                 dtype: Any = None) -> None:
        super().__init__(from_logits, reduction, name, dtype)
        self.ignore_class = ignore_class

    def _valid(self, y_true: Any, y_pred: Any) -> Any:
        """Which labels are not ``ignore_class`` (in the per-example losses' shape), or None without one."""
        if self.ignore_class is None:
            return None
        labels = like(asarray(y_true), y_pred)
        return (labels != self.ignore_class).reshape(y_pred.shape[:-1])

    def _mask(self, y_true: Any, y_pred: Any) -> Any:
        return self._valid(y_true, asarray(y_pred))

    def _kept(self, y_true: Any, y_pred: Any) -> tuple[Any, Any, Any]:
        """``(labels, predictions, valid)``: ignored labels as class 0 and their predictions zeroed, as Keras does."""
        valid = self._valid(y_true, y_pred)
        if valid is None:
            return y_true, y_pred, None
        labels = like(asarray(y_true), y_pred)
        labels = labels * valid.reshape(labels.shape).astype(labels.dtype)
        return labels, y_pred * valid[..., None].astype(y_pred.dtype), valid

    def check_shapes(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        _check_sparse_shapes(tuple(y_true_shape), tuple(y_pred_shape))

    def _stacked_label_shapes(self, prediction_shape: tuple) -> tuple[tuple, ...]:
        """Class indices, one per example, or a column of them."""
        return (prediction_shape[:-1], (*prediction_shape[:-1], 1))

    @staticmethod
    def _labels(y_true: Any, y_pred: Any) -> Any:
        labels = like(asarray(y_true), y_pred)
        _check_sparse_shapes(labels.shape, y_pred.shape)
        if labels.ndim == y_pred.ndim and labels.ndim and labels.shape[-1] == 1:
            labels = labels[..., 0]
        labels = labels.astype(np.int64)
        check_labels(labels, y_pred.shape[-1], "labels must be class indices below the number of predicted classes.")
        return labels

    def _prepared(self, y_true: Any, y_pred: Any) -> tuple[Any, Any, Any, Any]:
        """``(labels, predictions, valid, logits)``: the checked class indices, the predictions (ignored labels'
        zeroed), which labels count, and the logits the cross-entropy computes from (Keras: for probabilities, the
        log of the clipped ones)."""
        y_true, y_pred, valid = self._kept(y_true, asarray(y_pred))
        logits = y_pred if self.from_logits else portable_math.log(_clipped(y_pred))
        return self._labels(y_true, y_pred), y_pred, valid, logits

    def call(self, y_true: Any, y_pred: Any) -> Any:
        labels, _, valid, logits = self._prepared(y_true, y_pred)
        shifted, log_norm = _log_sum_exp(logits, -1)
        return self._losses(labels, valid, shifted, log_norm)

    def call_and_grad(self, y_true: Any, y_pred: Any, upstream_of: Any) -> tuple[Any, Any]:
        """``call`` and ``grad`` at once, sharing the softmax's terms (the same values: ``softmax`` divides the same
        exponentials by the same sums ``_log_sum_exp`` takes the log of)."""
        labels, y_pred, valid, logits = self._prepared(y_true, y_pred)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        exponentials = portable_math.exp(shifted)
        total = tf_sum(exponentials, axis=-1, keepdims=True)
        losses = self._losses(labels, valid, shifted, portable_math.log(total))
        return losses, self._grad(labels, y_pred, valid, exponentials / total, upstream_of(losses))

    @staticmethod
    def _losses(labels: Any, valid: Any, shifted: Any, log_norm: Any) -> Any:
        """The per-example cross-entropies from the shifted logits and the log of their exponentials' sums."""
        losses = (log_norm - np.take_along_axis(shifted, labels[..., None], axis=-1))[..., 0]
        return losses if valid is None else np.where(valid, losses, 0).astype(losses.dtype)

    def grad(self, y_true: Any, y_pred: Any, upstream: Any = None) -> Any:
        labels, y_pred, valid, logits = self._prepared(y_true, y_pred)
        return self._grad(labels, y_pred, valid, activations.softmax(logits, -1), upstream)

    def _grad(self, labels: Any, y_pred: Any, valid: Any, probabilities: Any, upstream: Any) -> Any:
        """``grad`` from the softmax of the logits."""
        xp = array_module(y_pred)
        onehot = (xp.arange(y_pred.shape[-1]) == labels[..., None]).astype(y_pred.dtype)
        grad = probabilities - onehot  # TF's sparse softmax cross-entropy gradient, then the chain as TF's
        if upstream is not None:
            grad = grad * asarray(upstream).reshape(labels.shape)[..., None]
        if not self.from_logits:
            grad = _through_clipped_log(grad, y_pred)
        if valid is not None:  # ignored labels: no loss, and their zeroed predictions pass nothing back
            grad = grad * valid[..., None].astype(grad.dtype)
        return grad.astype(y_pred.dtype, copy=False)


class _DenseCrossentropy(_Crossentropy):
    """A cross-entropy against targets of the predictions' shape, with label smoothing, reduced over ``axis``.
    The class matches ranks first (Keras' loss wrapper); the function form (``per_example``) does not."""

    _config_keys = ("from_logits", "label_smoothing", "axis")

    default_name: str

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1,
                 reduction: str | None = "sum_over_batch_size", name: str | None = None, dtype: Any = None) -> None:
        super().__init__(from_logits, reduction, name or self.default_name, dtype)
        self.label_smoothing, self.axis = label_smoothing, axis

    @abstractmethod
    def _smoothed(self, y_true: Any) -> Any:
        """The targets after label smoothing."""

    def _targets(self, y_true: Any, y_pred: Any) -> tuple[Any, Any]:
        """Targets in ``y_pred``'s dtype, checked against its shape (Keras' errors), smoothed; and ``y_pred``."""
        y_pred = asarray(y_pred)
        y_true = like(asarray(y_true, y_pred.dtype), y_pred)
        _check_dense_shapes(y_true.shape, y_pred.shape)
        return (self._smoothed(y_true) if self.label_smoothing else y_true), y_pred

    @abstractmethod
    def _elementwise(self, y_true: Any, y_pred: Any) -> Any:
        """The cross-entropy before the reduction over ``axis`` (binary: per element; categorical: its terms)."""

    @abstractmethod
    def _elementwise_grad(self, y_true: Any, y_pred: Any, upstream: Any) -> Any:
        """The gradient of the per-example value w.r.t. each prediction, ``upstream`` (the per-example gradients,
        expanded along ``axis``) applied where TF's chain rule applies it, for TF's rounding."""

    def per_example(self, y_true: Any, y_pred: Any) -> Any:
        return self._elementwise(*self._targets(y_true, y_pred))

    def check_shapes(self, y_true_shape: tuple, y_pred_shape: tuple) -> None:
        _check_dense_shapes(*matched_shapes(tuple(y_true_shape), tuple(y_pred_shape)))

    def call(self, y_true: Any, y_pred: Any) -> Any:
        return self.per_example(*squeeze_or_expand_to_same_rank(like(asarray(y_true), asarray(y_pred)),
                                                                asarray(y_pred)))

    def grad(self, y_true: Any, y_pred: Any, upstream: Any = None) -> Any:
        y_pred = asarray(y_pred)
        y_true, matched = self._targets(*squeeze_or_expand_to_same_rank(like(asarray(y_true), y_pred), y_pred))
        reduced = tuple(d for i, d in enumerate(matched.shape) if i != self.axis % matched.ndim)
        up = np.ones(reduced, matched.dtype) if upstream is None else asarray(upstream).reshape(reduced)
        grad = self._elementwise_grad(y_true, matched, np.expand_dims(up, self.axis).astype(matched.dtype, copy=False))
        return grad.reshape(y_pred.shape).astype(y_pred.dtype, copy=False)


def _clipped(p: Any) -> Any:
    """Probabilities clipped to ``[EPSILON, 1 - EPSILON]``, as Keras' cross-entropies clip them."""
    return np.clip(p, EPSILON, 1 - EPSILON)


def _clip_passes(p: Any) -> Any:
    """Where the gradient passes Keras' clip of ``p`` (its bounds included, as TF's minimum/maximum pass ties)."""
    return (p >= p.dtype.type(EPSILON)) & (p <= p.dtype.type(1 - EPSILON))


def _through_clipped_log(grad: Any, p: Any) -> Any:
    """The gradient w.r.t. ``log(clip(p))`` taken back to ``p`` as TF does: times the reciprocal, then zero where
    the clip cut."""
    return np.where(_clip_passes(p), grad * (1 / _clipped(p)), 0).astype(p.dtype, copy=False)


def _log_sum_exp(x: Any, axis: int) -> tuple[Any, Any]:
    """``x - max(x)`` along ``axis`` and the log of the sum of its exponentials (TF's stable softmax terms)."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted, portable_math.log(tf_sum(portable_math.exp(shifted), axis=axis, keepdims=True))


class BinaryCrossentropy(_DenseCrossentropy):
    """Mean over ``axis`` of the element-wise binary cross-entropy (smoothing pulls targets toward 0.5)."""

    default_name = "binary_crossentropy"
    _stacks = True

    def _smoothed(self, y_true: Any) -> Any:
        t = y_true.dtype.type
        return y_true * t(1.0 - self.label_smoothing) + t(0.5 * self.label_smoothing)

    def _elementwise(self, y_true: Any, y_pred: Any) -> Any:
        if self.from_logits:  # TF's sigmoid_cross_entropy_with_logits
            terms = (np.maximum(y_pred, 0) - y_pred * y_true) + portable_math.log1p(portable_math.exp(-abs(y_pred)))
        else:
            p = np.clip(y_pred, EPSILON, 1 - EPSILON)
            terms = -(y_true * portable_math.log(p) + (1 - y_true) * portable_math.log(1 - p))
        return tf_mean(terms, axis=self.axis)

    def _elementwise_grad(self, y_true: Any, y_pred: Any, upstream: Any) -> Any:
        g = upstream / y_pred.dtype.type(y_pred.shape[self.axis])  # the mean's gradient, as TF's
        if self.from_logits:
            return g * (_sigmoid(y_pred) - y_true)
        p = _clipped(y_pred)
        both = (-g * y_true) * (1 / p) + -((-g * (1 - y_true)) * (1 / (1 - p)))  # t*log(p) + (1-t)*log(1-p)
        return np.where(_clip_passes(y_pred), both, 0)


class CategoricalCrossentropy(_DenseCrossentropy):
    """Cross-entropy against one-hot (or soft) targets over ``axis``; probabilities are renormalised first."""

    default_name = "categorical_crossentropy"
    _stacks = True

    def _smoothed(self, y_true: Any) -> Any:
        t = y_true.dtype.type
        return y_true * t(1.0 - self.label_smoothing) + t(self.label_smoothing) / t(y_true.shape[-1])

    def _targets(self, y_true: Any, y_pred: Any) -> tuple[Any, Any]:
        if isinstance(self.axis, bool):
            raise ValueError(f"`axis` must be of type `int`. Received: axis={self.axis} of type {type(self.axis)}")
        if np.ndim(y_pred) < 1:  # Keras reads the number of classes first
            raise IndexError("tuple index out of range")
        if np.ndim(y_true) < 1:
            raise ValueError("Arguments `target` and `output` must be at least rank 1. Received: "
                             f"target.shape={np.shape(y_true)}, output.shape={np.shape(y_pred)}")
        return super()._targets(y_true, y_pred)

    def _elementwise(self, y_true: Any, y_pred: Any) -> Any:
        if self.from_logits:  # TF's softmax_cross_entropy_with_logits
            shifted, log_norm = _log_sum_exp(y_pred, self.axis)
            return tf_sum(y_true * (log_norm - shifted), axis=self.axis)
        probs = np.clip(y_pred / tf_sum(y_pred, axis=self.axis, keepdims=True), EPSILON, 1 - EPSILON)
        return -tf_sum(y_true * portable_math.log(probs), axis=self.axis)

    def _elementwise_grad(self, y_true: Any, y_pred: Any, upstream: Any) -> Any:
        if self.from_logits:  # TF's op gradient: softmax minus the labels
            return upstream * (activations.softmax(y_pred, self.axis) - y_true)
        total = tf_sum(y_pred, axis=self.axis, keepdims=True)
        normalised = y_pred / total
        grad = _through_clipped_log(y_true * -upstream, normalised)  # -sum(t * log(clip(p / total)))
        return grad / total + tf_sum(grad * (-y_pred / total / total), axis=self.axis, keepdims=True)


def _sigmoid(x: Any) -> Any:
    """The logistic function."""
    return activations.get("sigmoid").forward(x)


def _function_form(loss: Loss, y_true: Any, y_pred: Any) -> Any:
    """Keras' per-example function: a sigmoid or softmax output counts as its logits, no reduction; on a recording
    tape, predictions the tape follows give losses it differentiates."""
    loss, y_pred = loss._on_logits(watched(y_pred))
    value = loss.per_example(untracked(y_true), untracked(y_pred))
    return track(value, lambda g: [(y_pred, loss.grad(untracked(y_true), untracked(y_pred), g))], (y_pred,))


def mean_squared_error(y_true: Any, y_pred: Any) -> Any:
    """Per-example mean squared error, in ``y_pred``'s dtype."""
    return _function_form(MeanSquaredError(reduction=None), y_true, y_pred)


def mean_absolute_error(y_true: Any, y_pred: Any) -> Any:
    """Per-example mean absolute error, in ``y_pred``'s dtype."""
    return _function_form(MeanAbsoluteError(reduction=None), y_true, y_pred)


def mean_squared_logarithmic_error(y_true: Any, y_pred: Any) -> Any:
    """Per-example mean squared logarithmic error, in ``y_pred``'s dtype."""
    return _function_form(MeanSquaredLogarithmicError(reduction=None), y_true, y_pred)


def log_cosh(y_true: Any, y_pred: Any) -> Any:
    """Per-example log-cosh error, in ``y_pred``'s dtype."""
    return _function_form(LogCosh(reduction=None), y_true, y_pred)


def huber(y_true: Any, y_pred: Any, delta: float = 1.0) -> Any:
    """Per-example Huber loss, in ``y_pred``'s dtype."""
    return _function_form(Huber(delta, reduction=None), y_true, y_pred)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False) -> Any:
    """Per-example sparse categorical cross-entropy, in ``y_pred``'s dtype."""
    return _function_form(SparseCategoricalCrossentropy(from_logits=from_logits, reduction=None), y_true, y_pred)


def binary_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0,
                        axis: int = -1) -> Any:
    """Per-example binary cross-entropy (mean over ``axis``), in ``y_pred``'s dtype; no rank matching."""
    return _function_form(BinaryCrossentropy(from_logits, label_smoothing, axis, reduction=None), y_true, y_pred)


def categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0,
                             axis: int = -1) -> Any:
    """Per-example categorical cross-entropy over ``axis``, in ``y_pred``'s dtype; no rank matching."""
    return _function_form(CategoricalCrossentropy(from_logits, label_smoothing, axis, reduction=None), y_true, y_pred)


def check_function_shapes(fn: Callable[..., Any], y_true_shape: tuple, y_pred_shape: tuple) -> None:
    """The shape errors the per-example function ``fn`` raises (a metric's, in a traced step) for labels and
    predictions of these static shapes (None: unknown): the cross-entropies' checks, without rank matching, and the
    element-wise losses' broadcasting."""
    if fn in (binary_crossentropy, categorical_crossentropy):
        _check_dense_shapes(tuple(y_true_shape), tuple(y_pred_shape))
    elif fn is sparse_categorical_crossentropy:
        _check_sparse_shapes(tuple(y_true_shape), tuple(y_pred_shape))
    elif issubclass(_CLASS_OF_FUNCTION.get(fn, Loss), _ElementwiseMean):
        _check_broadcast(y_true_shape, y_pred_shape, fn.__name__)


_CLASS_OF_FUNCTION: dict[Callable[..., Any], type[Loss]] = {
    mean_squared_error: MeanSquaredError, mean_absolute_error: MeanAbsoluteError, huber: Huber, log_cosh: LogCosh,
    mean_squared_logarithmic_error: MeanSquaredLogarithmicError,
    sparse_categorical_crossentropy: SparseCategoricalCrossentropy, binary_crossentropy: BinaryCrossentropy,
    categorical_crossentropy: CategoricalCrossentropy,
}
_CLASSES: dict[str, type[Loss]] = {cls.__name__: cls for cls in _CLASS_OF_FUNCTION.values()}
FUNCTIONS: dict[str, Callable[..., Any]] = {  # names and aliases of the per-example functions
    **{fn.__name__: fn for fn in _CLASS_OF_FUNCTION},
    "mse": mean_squared_error, "MSE": mean_squared_error, "mae": mean_absolute_error, "MAE": mean_absolute_error,
    "bce": binary_crossentropy, "BCE": binary_crossentropy,
    "msle": mean_squared_logarithmic_error, "MSLE": mean_squared_logarithmic_error,
}


def get(identifier: Any) -> Any:
    """As ``keras.losses.get``: a function name or alias gives the function, a class name a new instance, a config
    its object, a loss instance or function itself."""
    return resolve(identifier, Loss, FUNCTIONS, _CLASSES, "loss")


def serialize(loss: Any) -> Any:
    return serialize_keras_object(loss)


def deserialize(config: Any, custom_objects: dict[str, Any] | None = None) -> Any:
    return deserialize_keras_object({"module": "keras.losses", **config} if isinstance(config, dict) else config,
                                    custom_objects)


def label_kind(y_true_shape: tuple, y_pred_shape: tuple) -> str:
    """Keras' reading of labels against predictions: "binary" for one output unit, "sparse" for labels of lower rank
    (or one label against several units), else "categorical"."""
    if y_pred_shape[-1] == 1:
        return "binary"
    if len(y_true_shape) < len(y_pred_shape) or (y_true_shape[-1] == 1 and y_pred_shape[-1] > 1):
        return "sparse"
    return "categorical"


def chosen_by_shapes(identifier: Any) -> bool:
    """Whether ``compile(loss=identifier)`` means the cross-entropy the label shapes pick (``"crossentropy"``/``"ce"``,
    any case), as in Keras."""
    return str(identifier).lower() in ("crossentropy", "ce")


def for_shapes(y_true_shape: tuple, y_pred_shape: tuple) -> Loss:
    """The cross-entropy ``"crossentropy"`` means for labels and predictions of these shapes."""
    return {"binary": BinaryCrossentropy, "sparse": SparseCategoricalCrossentropy,
            "categorical": CategoricalCrossentropy}[label_kind(y_true_shape, y_pred_shape)]()


def as_loss(identifier: Any) -> Loss:
    """A ``Loss`` instance for ``compile``: functions become their class (gradients need its ``grad``)."""
    loss = get(identifier)
    if loss is None:
        raise ValueError("compile needs a loss, e.g. loss='sparse_categorical_crossentropy'.")
    if isinstance(loss, Loss):
        return loss
    if loss not in _CLASS_OF_FUNCTION:
        raise ValueError(f"mirrorlab cannot train with the loss {loss!r}: gradients come from explicit backward "
                         f"passes.\nFix: use one of {sorted(_CLASSES)} (or their names), or subclass "
                         "mirrorlab.keras.losses.Loss with call() and grad().")
    return _CLASS_OF_FUNCTION[loss]()
