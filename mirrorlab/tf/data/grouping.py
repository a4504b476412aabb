"""``group_by_window`` and ``bucket_by_sequence_length``, as TF 2.21's GroupByWindowDataset orders them.

Elements go to groups by an int64 key; a group whose window is full is handed at once to ``reduce_func`` as a
dataset, and everything that dataset yields comes out before more input is read. At the end of the input the
remaining groups are flushed in ascending key order (TF keeps them in a ``std::map``). A key's window size is
asked for once, when the key is first seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ... import errors, nest
from ...tensor import as_tensor
from .dataset import UNKNOWN_CARDINALITY, Dataset, TensorSpec, UnaryDataset
from .padding import shape_leaves
from .sources import ElementsDataset
from .failures import Failed, attempt, elements
from .tensors import call

__all__ = ["GroupByWindowDataset", "bucket_by_sequence_length"]

BOTH_OR_NEITHER = "Either the `window_size` argument or the `window_size_func` argument must be specified."


def _int64_scalar(value: Any, what: str) -> int:
    """``value`` converted as TF converts a function's result to an int64 scalar, or TF's error."""
    array = np.asarray(value)
    if isinstance(value, (bool, np.bool_)) or (array.dtype != np.int64 and not isinstance(value, int)):
        raise ValueError(f"Tensor conversion requested dtype int64 for Tensor with dtype {array.dtype.name}: "
                         f"{value!r}\nFix: make `{what}` return an int64 scalar, e.g. `tf.cast(..., tf.int64)`.")
    if array.shape != ():
        raise errors.InvalidArgumentError(f"`{what}` must return a scalar int64.")
    return int(array)


def _check_reduced(result: Any) -> None:
    """TF's TypeError when ``reduce_func`` returned something other than a dataset (None: not traced)."""
    if result is not None and not isinstance(result, Dataset):
        spec = nest.map_structure(lambda leaf: TensorSpec.of(as_tensor(leaf)), result)
        raise TypeError(f"Invalid `reduce_func`. `reduce_func` must return a single `tf.data.Dataset` object but its "
                        f"return type is {spec}.\nFix: return a dataset made from the window, e.g. "
                        "`lambda key, window: window.batch(4)`.")


class GroupByWindowDataset(UnaryDataset):
    """``group_by_window(key_func, reduce_func, window_size | window_size_func)``."""

    _stops_file_sharding = True

    def __init__(self, input_dataset: Dataset, key_func: Callable, reduce_func: Callable[[Any, Dataset], Dataset],
                 window_size_func: Callable[[Any], Any], spec_of: Callable[[Dataset], Any] | None = None) -> None:
        super().__init__(input_dataset)
        self.key_func = key_func
        self.reduce_func = reduce_func
        self.window_size_func = window_size_func
        self.spec_of = spec_of  # the output spec from an empty window, where TF's depends on the key (buckets)
        # TF traces both functions when the dataset is made: a key of another dtype, or a reduce_func that makes
        # no dataset, fails then (mirrorlab calls them on zeros of the input's type, where it can).
        traced_key = self._traced(lambda dummy: call(key_func, dummy))
        if traced_key is not None:
            _int64_scalar(traced_key, "key_func")
        try:
            traced_window = reduce_func(np.int64(0), ElementsDataset([], input_dataset.element_spec))
        except Exception:  # noqa: BLE001 - only the kind of result is checked here
            traced_window = None
        _check_reduced(traced_window)

    def _reduced(self, key: int, elements: list[Any]) -> Dataset:
        result = self.reduce_func(np.int64(key), ElementsDataset(elements, self._input.element_spec))
        _check_reduced(result)
        return result

    def _iterate(self) -> Iterator[Any]:
        """A failure (failures.py) passes on at once, the windows kept."""
        groups: dict[int, list[Any]] = {}
        sizes: dict[int, int] = {}
        for element in elements(self._input):
            key = element if type(element) is Failed else attempt(call, self.key_func, element)
            if type(key) is Failed:
                yield key
                continue
            key = _int64_scalar(key, "key_func")
            if key not in sizes:
                size = _int64_scalar(self.window_size_func(np.int64(key)), "window_size_func")
                if size <= 0:
                    raise errors.InvalidArgumentError(f"Window size must be greater than zero, but got {size}.")
                sizes[key] = size
            group = groups.setdefault(key, [])
            group.append(element)
            if len(group) == sizes[key]:
                yield from self._reduced(key, groups.pop(key))
        for key in sorted(groups):
            yield from self._reduced(key, groups[key])

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    @property
    def element_spec(self) -> Any:
        """The spec of ``reduce_func``'s dataset for an empty window (TF traces it on the window's type)."""
        if self.spec_of is not None:
            return self.spec_of(ElementsDataset([], self._input.element_spec))
        return self._reduced(0, []).element_spec


def _length(value: Any) -> int:
    """An element's length as TF's bucket function takes it: a Python int or an int32 scalar."""
    if not isinstance(value, (int, np.integer, np.ndarray)) or isinstance(value, bool):
        raise TypeError(f"element_length_func must return an int32 scalar, got {type(value).__name__}")
    dtype = np.asarray(value).dtype if not isinstance(value, int) else np.dtype(np.int32)
    if dtype != np.int32:
        raise TypeError(f"Input 'y' of 'LessEqual' Op has type {dtype.name} that does not match type int32 of argument "
                        "'x'.\nFix: return the length as int32, e.g. `tf.shape(x)[0]`.")
    return int(value)


def bucket_by_sequence_length(dataset: Dataset, element_length_func: Callable, bucket_boundaries: Sequence[int],
                              bucket_batch_sizes: Sequence[int], padded_shapes: Any = None,
                              padding_values: Any = None, pad_to_bucket_boundary: bool = False,
                              no_padding: bool = False, drop_remainder: bool = False) -> Dataset:
    """TF's composition: the bucket of each element's length is its key, the bucket's batch size its window, and
    each window is (padded-)batched; with ``pad_to_bucket_boundary`` unknown dimensions pad to the boundary - 1."""
    if len(bucket_batch_sizes) != len(bucket_boundaries) + 1:
        raise ValueError(f"`len(bucket_batch_sizes)` must equal `len(bucket_boundaries) + 1` but "
                         f"`len(bucket_batch_sizes)={len(bucket_batch_sizes)}` and "
                         f"`len(bucket_boundaries)={len(bucket_boundaries)}`.")
    boundaries = [int(b) for b in bucket_boundaries]
    batch_sizes = [int(b) for b in bucket_batch_sizes]
    lows = [int(np.iinfo(np.int32).min), *boundaries]
    highs = [*boundaries, int(np.iinfo(np.int32).max)]

    def bucket_id(*args: Any) -> np.int64:
        length = _length(element_length_func(*args))
        matches = [i for i, (low, high) in enumerate(zip(lows, highs)) if low <= length < high]
        return np.int64(min(matches) if matches else np.iinfo(np.int64).max)

    def batching(key: Any, window: Dataset, padding_known: bool = True) -> Dataset:
        batch_size = batch_sizes[int(key)]
        if no_padding:
            return window.batch(batch_size, drop_remainder=drop_remainder)
        filler = None
        if pad_to_bucket_boundary and padding_known:
            if int(key) >= len(batch_sizes) - 1:  # (TF's assert fails inside its batching function: InternalError)
                raise errors.InternalError(
                    "Got error code INVALID_ARGUMENT and message: assertion failed: [When pad_to_bucket_boundary=True, "
                    "elements must have length < max(bucket_boundaries).]\nFix: add a bucket boundary above the "
                    "longest element, or pad without pad_to_bucket_boundary.")
            filler = boundaries[int(key)] - 1
        specs = window.element_spec
        leaves = shape_leaves(padded_shapes, specs) if padded_shapes is not None else \
            [spec.shape for spec in nest.flatten(specs)]
        filled = [[filler if d is None or d == -1 else d for d in shape] for shape in leaves]
        shapes = nest.pack_sequence_as(specs, filled) if nest.is_nested(specs) else filled[0]
        return window.padded_batch(batch_size, shapes, padding_values, drop_remainder=drop_remainder)

    def spec_of(window: Dataset) -> Any:
        """TF's static spec: the batch size and the boundary padding depend on the key, so they are unknown."""
        spec = batching(0, window, padding_known=False).element_spec
        return nest.map_structure(lambda s: TensorSpec((None, *s.shape[1:]), s.dtype), spec)

    traced = dataset._traced(lambda dummy: call(element_length_func, dummy), dataset.element_spec)
    if traced is not None:
        _length(traced)  # TF compares the length with int32 bounds when it traces: another dtype fails at once
    return GroupByWindowDataset(dataset, bucket_id, batching, lambda key: np.int64(batch_sizes[int(key)]), spec_of)
