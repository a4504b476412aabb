"""What ``fit``/``evaluate`` make of their inputs, as Keras 3 on TF 2.21 does: NumPy arrays (with ``sample_weight``
or ``class_weight``) become a batched dataset, ``validation_split`` takes the last part of the arrays before any
shuffling, datasets may yield ``(x, y, sample_weight)`` triples and get ``class_weight`` mapped onto their batches;
inputs Keras refuses raise its error class and text."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import errors, nest
from ..data.dataset import Dataset
from ...distribute.input_lib import DistributedDataset
from ...tensor import asarray

__all__ = ["as_arrays", "unpack_x_y_sample_weight", "train_validation_split", "class_weight_to_sample_weights",
           "class_weight_map_fn", "as_dataset"]


def unpack_x_y_sample_weight(data: Any) -> tuple[Any, Any, Any]:
    """``(x, y, sample_weight)`` of ``x``, ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)`` (a list counts as a tuple)."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if len(data) in (1, 2, 3):
        return (*data, *(None,) * (3 - len(data)))  # type: ignore[return-value]
    raise ValueError("Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
                     f"found: {data}")


def as_arrays(x: Any) -> Any:
    """Inputs as arrays: a list or tuple of arrays (a model's several inputs) becomes a tuple of them, a dict a dict
    of them, anything else one array."""
    if isinstance(x, dict):
        return {key: asarray(value) for key, value in x.items()}
    if isinstance(x, (list, tuple)) and x and all(len(getattr(item, "shape", ())) >= 1 for item in x):
        return tuple(asarray(item) for item in x)
    return asarray(x)


def _samples(x: Any) -> int:
    """The number of samples in arrays (the first one's, for several inputs)."""
    return int(np.shape(nest.flatten(x)[0])[0])


def _is_dataset(x: Any) -> bool:
    return isinstance(x, (Dataset, DistributedDataset))


def _sliceable(x: Any) -> bool:
    """Keras' ``can_slice_array``: None, an array or anything convertible to one."""
    return x is None or isinstance(x, np.ndarray) or hasattr(x, "__array__")


def train_validation_split(arrays: tuple[Any, Any, Any], validation_split: float) -> tuple[tuple, tuple]:
    """``(train, validation)`` of ``(x, y, sample_weight)``: validation is the last ``validation_split`` of the samples
    (Keras' arithmetic: training keeps ``floor(n * (1 - validation_split))`` of them)."""
    unsplitable = [type(t) for t in nest.flatten(list(arrays)) if not _sliceable(t)]
    if unsplitable:
        raise ValueError("Argument `validation_split` is only supported for tensors or NumPy arrays."
                         f"Found incompatible type in the input: {unsplitable}")
    parts = [None if t is None else as_arrays(t) for t in arrays]
    present = [t for t in parts if t is not None]
    if not present:
        return arrays, arrays
    samples = _samples(present[0])
    split_at = int(math.floor(samples * (1.0 - validation_split)))
    if split_at in (0, samples):
        raise ValueError(f"Training data contains {samples} samples, which is not sufficient to split it into a "
                         f"validation and training set as specified by `validation_split={validation_split}`. "
                         "Either provide more data, or a different value for the `validation_split` argument.")
    train = tuple(None if t is None else nest.map_structure(lambda a: a[0:split_at], t) for t in parts)
    validation = tuple(None if t is None else nest.map_structure(lambda a: a[split_at:samples], t) for t in parts)
    return train, validation  # type: ignore[return-value]


def _class_ids(y: Any) -> Any:
    """The class of each label: the arg-max of one-hot rows, else the rounded label (a column squeezed first)."""
    y = np.asarray(y)
    if y.ndim > 1:
        y = np.argmax(y, axis=-1) if y.shape[-1] != 1 else np.squeeze(y, axis=-1)
    return np.round(y).astype(np.int32)


def class_weight_to_sample_weights(y: Any, class_weight: dict) -> np.ndarray:
    """Array inputs: each sample weighs its class's weight, 1.0 for a class the map lacks (float32)."""
    return np.array([class_weight.get(int(c), 1.0) for c in _class_ids(y)], np.float32)


def class_weight_map_fn(class_weight: dict) -> Callable[..., tuple]:
    """Dataset inputs: a map from a batch ``(x, y)`` to ``(x, y, weights)`` looking the classes up in a table of
    classes 0..max(class_weight) (missing ones weigh 1.0); a class outside it fails as TF's gather does."""
    table = np.array([class_weight.get(int(c), 1.0) for c in range(max(class_weight.keys()) + 1)], np.float32)

    def weigh(*data: Any) -> tuple:
        x, y, _ = unpack_x_y_sample_weight(data)
        classes = _class_ids(y)
        outside = np.flatnonzero((classes < 0) | (classes >= len(table)))
        if outside.size:
            where = int(outside[0])
            raise errors.InvalidArgumentError(f"indices[{where}] = {int(classes.flat[where])} is not in "
                                              f"[0, {len(table)})\n\t [[{{{{node GatherV2}}}}]]")
        return x, y, table[classes]
    return weigh


def _check_dataset_arguments(x: Any, y: Any, sample_weight: Any) -> None:
    """Keras' refusal of targets or weights passed beside a dataset (they belong in its elements)."""
    for value, name, description in ((y, "y", "the targets"), (sample_weight, "sample_weights", "the sample weights")):
        if value is not None:
            raise ValueError(f"When providing `x` as a tf.data.Dataset, `{name}` should not be passed. Instead, "
                             f"{description} should be included as part of the tf.data.Dataset.")


def _with_class_weights(dataset: Dataset | DistributedDataset, class_weight: dict) -> Dataset:
    """``dataset`` whose batches carry their classes' weights (a distributed dataset has no ``map``, as in TF)."""
    if isinstance(dataset, DistributedDataset):
        raise AttributeError("'DistributedDataset' object has no attribute 'map'")
    weigh = class_weight_map_fn(class_weight)
    spec = dataset.element_spec
    _, labels, weights = unpack_x_y_sample_weight(spec)
    if weights is not None:
        raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
    if isinstance(labels, (tuple, list, dict)):
        raise ValueError("`class_weight` is only supported for Models with a single output.")
    return dataset.map(weigh)


def _check_cardinality(arrays: tuple) -> None:
    """Keras' error when the arrays disagree on the number of samples."""
    if len({_samples(a) for a in arrays}) > 1:
        sizes = "".join(f"'{label}' sizes: {_samples(a)}\n" for label, a in zip(("x", "y", "sample_weight"), arrays))
        raise ValueError("Data cardinality is ambiguous. Make sure all arrays contain the same number of samples."
                         + sizes)


def _array_dataset(x: Any, y: Any, sample_weight: Any, batch_size: int | None, steps: int | None,
                   shuffle: bool, class_weight: dict | None) -> Dataset:
    """Arrays as Keras' array adapter batches them (``batch_size``, else enough for ``steps`` batches, else 32),
    shuffled per epoch with their weights; the batches have a static size when they are all full, as there."""
    if y is None:
        raise ValueError("fit/evaluate with NumPy inputs needs both x and y.\nFix: pass the targets as y.")
    if sample_weight is not None and class_weight is not None:
        raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
    x, y = as_arrays(x), np.asarray(y)
    if class_weight is not None:
        sample_weight = class_weight_to_sample_weights(y, class_weight)
    arrays = (x, y) if sample_weight is None else (x, y, np.asarray(sample_weight))
    _check_cardinality(arrays)
    samples = _samples(x)
    dataset = Dataset.from_tensor_slices(arrays)
    if shuffle and samples:  # (Keras permutes the arrays: no samples, nothing to shuffle)
        dataset = dataset.shuffle(samples)
    size = batch_size or (int(math.ceil(samples / steps)) if steps else 32)
    return dataset.batch(size, drop_remainder=samples % size == 0)


def as_dataset(x: Any, y: Any = None, sample_weight: Any = None, batch_size: int | None = None,
               steps: int | None = None, shuffle: bool = False, class_weight: dict | None = None) -> Any:
    """The (undistributed or distributed) dataset ``fit``/``evaluate`` iterate for these arguments."""
    if not _is_dataset(x):
        return _array_dataset(x, y, sample_weight, batch_size, steps, shuffle, class_weight)
    _check_dataset_arguments(x, y, sample_weight)
    if shuffle:
        warnings.warn("`shuffle=True` was passed, but will be ignored since the data `x` was provided as a tf.data.Dataset. "
                      "The Dataset is expected to already be shuffled (via `.shuffle(buffer_size)`).", stacklevel=3)
    return x if class_weight is None else _with_class_weights(x, class_weight)
