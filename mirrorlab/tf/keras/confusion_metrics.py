"""``Precision``, ``Recall`` and ``AUC``: confusion-matrix counts per threshold in ON_READ SUM variables (so each
replica counts its own examples and a read sums the cluster), updated as Keras 3's ``update_confusion_matrix_variables``
does: predictions above a threshold are positive; ``top_k`` keeps the k largest predictions per row, ``class_id``
one column; three or more evenly spaced thresholds take Keras' bucketed path."""

from __future__ import annotations

import contextlib

from typing import Any

import numpy as np

from .._kernels import portable_math
from ..autodiff import untracked
from ...distribute import get_strategy, has_strategy
from ..math_ops import divide_no_nan
from .._kernels.summation import tf_sum
from ...tensor import asarray
from . import activations, losses
from .metrics import Metric
from .naming import auto_name

__all__ = ["Precision", "Recall", "AUC"]

NEG_INF = -1e10  # Keras' value for the predictions top_k filters out
EPSILON = 1e-7


def _thresholds(thresholds: Any, default: float) -> list[float]:
    """Keras' ``parse_init_thresholds``: a list of floats in [0, 1] (the default when None)."""
    if thresholds is None:
        return [default]
    listed = list(thresholds) if isinstance(thresholds, (list, tuple, np.ndarray)) else [thresholds]
    invalid = [t for t in listed if t is None or t < 0 or t > 1]
    if invalid:
        raise ValueError(f"Threshold values must be in [0, 1]. Received: {invalid}")
    return listed


def _evenly_distributed(thresholds: list[float]) -> bool:
    """Keras' test for its bucketed update: three or more thresholds at 0, 1/(n-1), ..., 1."""
    n = len(thresholds)
    return n >= 3 and bool(np.allclose(thresholds, np.arange(n, dtype=np.float32) / (n - 1), atol=EPSILON))


def _filter_top_k(values: np.ndarray, k: int) -> np.ndarray:
    """The k largest values of each row kept (ties: the lower index, as ``top_k``), the others NEG_INF."""
    order = np.argsort(-values, axis=-1, kind="stable")[..., :k]
    mask = np.zeros(values.shape, values.dtype)
    np.put_along_axis(mask, order, 1, axis=-1)
    return values * mask + values.dtype.type(NEG_INF) * (1 - mask)


def _prepared(y_true: Any, y_pred: Any, sample_weight: Any, dtype: np.dtype, top_k: int | None,
              class_id: int | None) -> tuple[np.ndarray, np.ndarray, Any]:
    """Labels, predictions and weights in the metric's dtype, ranks matched, ``top_k`` and ``class_id`` applied (the
    first half of Keras' ``update_confusion_matrix_variables``)."""
    y_true = asarray(untracked(y_true)).astype(dtype)
    y_pred = asarray(untracked(y_pred)).astype(dtype)
    y_pred, y_true = losses.squeeze_or_expand_to_same_rank(y_pred, y_true)
    if sample_weight is not None:
        weight = np.expand_dims(asarray(untracked(sample_weight)).astype(dtype), -1)
        _, sample_weight = losses.squeeze_or_expand_to_same_rank(y_true, weight, expand_rank_1=False)
    if top_k is not None:
        y_pred = _filter_top_k(y_pred, top_k)
    if class_id is not None:
        if y_pred.ndim == 1:
            raise ValueError(f"When class_id is provided, y_pred must be a 2D array with shape (num_samples, "
                             f"num_classes), found shape: {y_pred.shape}")
        y_true, y_pred = y_true[..., class_id, None], y_pred[..., class_id, None]
    return y_true, y_pred, sample_weight


def _confusion_counts(y_true: np.ndarray, y_pred: np.ndarray, weight: Any, thresholds: Any, evenly: bool,
                      label_weights: Any = None, multi_label: bool = False) -> dict[str, Any]:
    """The weighted true/false positives and negatives (``tp``, ``fp``, ``fn``, ``tn``) per threshold, and per label
    (column) with ``multi_label`` (else the labels are flattened into one, as Keras does): by Keras' bucketed path
    for evenly spaced thresholds, else by comparing every prediction with every threshold."""
    thresholds = np.asarray(thresholds)
    if not evenly:
        return _per_threshold(y_true, y_pred, weight, label_weights, thresholds, multi_label)
    with_epsilon = bool(thresholds[0] < 0 or thresholds[-1] > 1)
    if not multi_label:
        return _bucketed(y_true, y_pred, weight, label_weights, len(thresholds), with_epsilon)
    weight = None if weight is None else np.broadcast_to(weight, y_pred.shape)
    columns = [_bucketed(y_true[:, [j]], y_pred[:, [j]], None if weight is None else weight[:, [j]], None,
                         len(thresholds), with_epsilon) for j in range(y_pred.shape[1])]
    return {key: np.stack([np.asarray(c[key]) for c in columns], axis=1) for key in columns[0]}


def _per_threshold(y_true: np.ndarray, y_pred: np.ndarray, weight: Any, label_weights: Any, thresholds: np.ndarray,
                   multi_label: bool) -> dict[str, Any]:
    """Keras' general path: every prediction compared with every threshold; weighted hits summed over the
    examples."""
    dtype = y_pred.dtype
    weights = None if weight is None else np.broadcast_to(weight.astype(dtype), y_pred.shape)
    if label_weights is not None:
        tiled = np.broadcast_to(np.asarray(label_weights, dtype), y_pred.shape)
        weights = tiled if weights is None else weights * tiled
    if not multi_label:
        y_true, y_pred = y_true.reshape(-1), y_pred.reshape(-1)
        weights = None if weights is None else weights.reshape(-1)
    pred_is_pos = y_pred[None] > thresholds.astype(dtype).reshape((-1,) + (1,) * y_pred.ndim)
    label_is_pos = np.broadcast_to(y_true.astype(bool)[None], pred_is_pos.shape)
    cells = {"tp": (label_is_pos, pred_is_pos), "fp": (~label_is_pos, pred_is_pos),
             "fn": (label_is_pos, ~pred_is_pos), "tn": (~label_is_pos, ~pred_is_pos)}

    def weighted(label: np.ndarray, pred: np.ndarray) -> Any:
        hit = label & pred
        values = hit.astype(dtype) if weights is None else np.where(hit, np.broadcast_to(weights[None], hit.shape),
                                                                    dtype.type(0))
        return tf_sum(values, axis=1)
    return {key: weighted(*cell) for key, cell in cells.items()}


def _bucketed(y_true: np.ndarray, y_pred: np.ndarray, weight: Any, label_weights: Any, count: int,
              with_epsilon: bool) -> dict[str, Any]:
    """Keras' path for evenly spaced thresholds: each prediction's weight summed into the bucket of the highest
    threshold it exceeds, then cumulated from the top; the negatives are the totals less the positives."""
    dtype = y_pred.dtype
    weights: Any = dtype.type(1)
    if weight is not None:
        weights = np.broadcast_to(weight.astype(dtype), y_pred.shape).reshape(-1)
    if label_weights is not None:
        weights = weights * np.broadcast_to(np.asarray(label_weights, dtype), y_pred.shape).reshape(-1)
    y_pred = np.clip(y_pred, 0, 1).reshape(-1)
    y_true = (y_true != 0).astype(dtype).reshape(-1)
    true_labels = np.broadcast_to(y_true * weights, y_true.shape)
    false_labels = np.broadcast_to((1 - y_true) * weights, y_true.shape)
    buckets = np.ceil(y_pred * dtype.type(count - 1)) - 1
    if with_epsilon:  # the lowest threshold is below 0: a prediction of 0 exceeds it
        buckets = np.maximum(buckets, 0)
    buckets = buckets.astype(np.int32)

    def cumulated(labels: np.ndarray) -> np.ndarray:
        sums = np.zeros(count, dtype)
        keep = buckets >= 0
        np.add.at(sums, buckets[keep], labels[keep])
        return np.cumsum(sums[::-1], dtype=dtype)[::-1]
    tp, fp = cumulated(true_labels), cumulated(false_labels)
    return {"tp": tp, "fp": fp, "fn": tf_sum(true_labels) - tp, "tn": tf_sum(false_labels) - fp}


def _divide_no_nan(x: Any, y: Any) -> np.ndarray:
    """``math.divide_no_nan`` as a plain array of ``x``'s dtype."""
    return np.asarray(untracked(divide_no_nan(x, y)), x.dtype)


class _ConfusionMetric(Metric):
    """True positives plus one other count per threshold; ``result`` is ``tp / (tp + other)`` (0 where that is
    0/0), a scalar for one threshold."""

    _config_keys = ("thresholds", "top_k", "class_id")
    _direction = "up"
    _other = ""  # "fp" or "fn"

    def __init__(self, thresholds: Any = None, top_k: int | None = None, class_id: int | None = None,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(name or auto_name(type(self).__name__), dtype or "float32")
        self.init_thresholds = thresholds
        self.top_k = top_k
        self.class_id = class_id
        self._threshold_list = _thresholds(thresholds, 0.5 if top_k is None else NEG_INF)
        self._evenly = _evenly_distributed(self._threshold_list)
        shape = (len(self._threshold_list),)
        self.true_positives = self.add_variable("true_positives", shape)
        self.others = self.add_variable({"fp": "false_positives", "fn": "false_negatives"}[self._other], shape)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "thresholds": self.init_thresholds}

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        y_true, y_pred, weight = _prepared(y_true, y_pred, sample_weight, self.dtype, self.top_k, self.class_id)
        counts = _confusion_counts(y_true, y_pred, weight, self._threshold_list, self._evenly)
        self._accumulate(self.true_positives, counts["tp"])
        self._accumulate(self.others, counts[self._other])

    def result(self) -> Any:
        tp = asarray(self.true_positives._read(), self.dtype)
        value = _divide_no_nan(tp, tp + asarray(self.others._read(), self.dtype))
        return value[0] if len(self._threshold_list) == 1 else value


class Precision(_ConfusionMetric):
    """The fraction of predicted positives that are labelled positive: ``tp / (tp + fp)``."""

    _other = "fp"


class Recall(_ConfusionMetric):
    """The fraction of labelled positives that are predicted positive: ``tp / (tp + fn)``."""

    _other = "fn"


CURVES = ("ROC", "PR", "PRGAIN")
SUMMATIONS = ("interpolation", "minoring", "majoring")


class AUC(Metric):
    """The area under the ROC (or precision-recall, or PR-gain) curve, from the four confusion counts at
    ``num_thresholds`` thresholds spaced evenly over [0, 1] (or at the given ``thresholds``), summed as Keras does
    (``interpolation``: trapezoids, or the exact precision-recall interpolation for PR; ``minoring``/``majoring``)."""

    _direction = "up"

    def __init__(self, num_thresholds: int = 200, curve: str = "ROC", summation_method: str = "interpolation",
                 name: str | None = None, dtype: Any = None, thresholds: Any = None, multi_label: bool = False,
                 num_labels: int | None = None, label_weights: Any = None, from_logits: bool = False) -> None:
        if str(curve).upper() not in CURVES:
            raise ValueError(f'Invalid AUC curve value: "{curve}". Expected values are ["PR", "ROC", "PRGAIN"]')
        if str(summation_method).lower() not in SUMMATIONS:
            raise ValueError(f'Invalid AUC summation method value: "{summation_method}". Expected values are '
                             '["interpolation", "majoring", "minoring"]')
        if num_labels and not multi_label:
            raise ValueError("`num_labels` is needed only when `multi_label` is True.")
        self._init_from_thresholds = thresholds is not None
        if thresholds is not None:
            inner = sorted(_thresholds(thresholds, 0.5))
            self.num_thresholds = len(inner) + 2
            self._evenly = _evenly_distributed([0.0] + inner + [1.0])
        else:
            if num_thresholds <= 1:
                raise ValueError(f"Argument `num_thresholds` must be an integer > 1. Received: "
                                 f"num_thresholds={num_thresholds}")
            self.num_thresholds = num_thresholds
            inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
            self._evenly = True
        self._thresholds = np.array([0.0 - EPSILON] + inner + [1.0 + EPSILON])
        self.curve = str(curve).upper()
        self.summation_method = str(summation_method).lower()
        super().__init__(name or auto_name("AUC"), dtype or "float32")
        self.multi_label = multi_label
        self.num_labels = num_labels
        self.label_weights = None if label_weights is None else np.asarray(label_weights, self.dtype)
        self._from_logits = from_logits
        self._strategy = get_strategy()  # where the counts are made if the labels' number is known later
        self._built = False
        if not multi_label:
            self._build(None)
        elif num_labels:
            self._build((None, num_labels))

    def _build(self, shape: Any) -> None:
        """The four count variables: per threshold, and per label too with ``multi_label``."""
        if self.multi_label and len(shape) != 2:
            raise ValueError(f"`y_pred` must have rank 2 when `multi_label=True`. Found rank {len(shape)}. Full "
                             f"shape received for `y_pred`: {tuple(shape)}")
        variable_shape = (self.num_thresholds, shape[1]) if self.multi_label else (self.num_thresholds,)
        with contextlib.nullcontext() if has_strategy() else self._strategy.scope():
            self.true_positives = self.add_variable("true_positives", variable_shape)
            self.false_positives = self.add_variable("false_positives", variable_shape)
            self.true_negatives = self.add_variable("true_negatives", variable_shape)
            self.false_negatives = self.add_variable("false_negatives", variable_shape)
        self._built = True

    @property
    def thresholds(self) -> list[float]:
        return list(self._thresholds)

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "num_thresholds": self.num_thresholds, "curve": self.curve,
                  "summation_method": self.summation_method, "multi_label": self.multi_label,
                  "num_labels": self.num_labels,
                  "label_weights": None if self.label_weights is None else self.label_weights,
                  "from_logits": self._from_logits}
        if self._init_from_thresholds:
            config["thresholds"] = self.thresholds[1:-1]
        return config

    def build_for(self, y_pred_shape: tuple) -> None:
        """With ``multi_label``, the counts per label, once the number of labels is known."""
        if not self._built:
            self._build(y_pred_shape)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        self.build_for(np.shape(y_pred))
        if self._from_logits:
            y_pred = activations.get("sigmoid")(asarray(untracked(y_pred)).astype(self.dtype))
        y_true, y_pred, weight = _prepared(y_true, y_pred, sample_weight, self.dtype, None, None)
        counts = _confusion_counts(y_true, y_pred, weight, self._thresholds, self._evenly,
                                   None if self.multi_label else self.label_weights, self.multi_label)
        for key, var in (("tp", self.true_positives), ("fp", self.false_positives), ("tn", self.true_negatives),
                         ("fn", self.false_negatives)):
            self._accumulate(var, counts[key])

    def _counts(self) -> tuple[np.ndarray, ...]:
        return tuple(asarray(v._read(), self.dtype) for v in (self.true_positives, self.false_positives,
                                                               self.true_negatives, self.false_negatives))

    def _interpolated_pr_auc(self) -> Any:
        """Keras' exact interpolation of precision over recall between thresholds (Davis & Goadrich)."""
        tp, fp, _, fn = self._counts()
        one = self.dtype.type(1)
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = _divide_no_nan(dtp, np.maximum(dp, 0))
        intercept = tp[1:] - slope * p[1:]
        ratio = np.where((p[:-1] > 0) & (p[1:] > 0), _divide_no_nan(p[:-1], np.maximum(p[1:], 0)), one)
        increments = _divide_no_nan(slope * (dtp + intercept * portable_math.log(ratio)),
                                    np.maximum(tp[1:] + fn[1:], 0))
        return self._total(increments)

    def _total(self, terms: np.ndarray) -> Any:
        """The sum of the area's terms; with ``multi_label``, per label, then their mean (or label-weighted mean)."""
        if not self.multi_label:
            return tf_sum(terms)
        by_label = tf_sum(terms, axis=0)
        if self.label_weights is None:
            return np.asarray(tf_sum(by_label) / self.dtype.type(by_label.shape[0]), self.dtype)
        return _divide_no_nan(np.asarray(tf_sum(by_label * self.label_weights)),
                              np.asarray(tf_sum(self.label_weights)))

    def result(self) -> Any:
        if self.curve == "PR" and self.summation_method == "interpolation":
            return np.asarray(self._interpolated_pr_auc(), self.dtype)
        tp, fp, tn, fn = self._counts()
        recall = _divide_no_nan(tp, tp + fn)
        if self.curve == "ROC":
            x, y = _divide_no_nan(fp, fp + tn), recall
        elif self.curve == "PR":
            x, y = recall, _divide_no_nan(tp, tp + fp)
        else:
            scaling = _divide_no_nan(tp + fn, tn + fp)
            recall_gain = np.where(tp == 0, 0, 1 - scaling * _divide_no_nan(fn, tp)).astype(self.dtype)
            x = np.maximum(recall_gain, 0)
            y = np.where(tp == 0, 1, 1 - scaling * _divide_no_nan(fp, tp)).astype(self.dtype)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / self.dtype.type(2)
        elif self.summation_method == "minoring":
            heights = np.minimum(y[:-1], y[1:])
        else:
            heights = np.maximum(y[:-1], y[1:])
        return np.asarray(self._total((x[:-1] - x[1:]) * heights), self.dtype)
