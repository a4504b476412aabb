"""Transformations that carry state or stop early: ``reduce``, ``scan`` and ``take_while``, with TF 2.21's
rules for the state (its structure and dtypes stay those of the initial state)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import errors, nest
from .dataset import UNKNOWN_CARDINALITY, Dataset, TensorSpec, UnaryDataset
from .failures import Failed, attempt, elements
from .tensors import STRING, call, to_element

__all__ = ["reduce_dataset", "ScanDataset", "TakeWhileDataset", "UniqueDataset"]


def _next_state(state: Any, result: Any, what: str) -> Any:
    """``result`` as the new state, checked against ``state``: the same number of components and dtypes."""
    new = to_element(tuple(result) if isinstance(result, list) else result)
    old_flat, new_flat = nest.flatten(state), nest.flatten(new)
    if len(old_flat) != len(new_flat):
        raise errors.InvalidArgumentError(
            f"The number of components of the initial state and the {what} function output does not match. "
            f"(initial_state={len(old_flat)}, output={len(new_flat)}).")
    for old, fresh in zip(old_flat, new_flat):
        if np.asarray(fresh).dtype != np.asarray(old).dtype:
            raise TypeError(f"The element types for the new state must match the initial state. Expected "
                            f"{np.asarray(old).dtype.name}; got {np.asarray(fresh).dtype.name}.\nFix: give the "
                            f"initial state the dtype the {what} function returns, e.g. np.int64(0) for int64 "
                            "elements.")
    return nest.pack_sequence_as(state, new_flat)


def reduce_dataset(dataset: Dataset, initial_state: Any, reduce_func: Callable) -> Any:
    """``Dataset.reduce``: ``reduce_func(state, element)`` folded over the elements, from ``initial_state``."""
    state = to_element(initial_state)
    for value in dataset:
        state = _next_state(state, reduce_func(state, value), "reduce")
    return state


class ScanDataset(UnaryDataset):
    """``scan``: yields the outputs of ``scan_func(state, element) -> (new_state, output)``."""

    _stops_file_sharding = True

    def __init__(self, input_dataset: Dataset, initial_state: Any, scan_func: Callable) -> None:
        super().__init__(input_dataset)
        self.initial_state = to_element(initial_state)
        self.fn = scan_func

    def _iterate(self) -> Iterator[Any]:
        """A failure (failures.py) passes on and leaves the state as it was."""
        state = self.initial_state
        for value in elements(self._input):
            result = value if type(value) is Failed else attempt(self.fn, state, value)  # not unpacked, as TF
            if type(result) is Failed:
                yield result
                continue
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise TypeError("Invalid `scan_func`. `scan_func` should return a pair consisting of new state and "
                                f"the output value but it returned {result!r}.")
            state = _next_state(state, result[0], "scan")
            yield to_element(result[1])

    @property
    def element_spec(self) -> Any:
        return self._function_spec(lambda value: to_element(self.fn(self.initial_state, value)[1]))


class TakeWhileDataset(UnaryDataset):
    """``take_while``: the elements up to the first one for which the predicate is False."""

    _stops_file_sharding = True

    def __init__(self, input_dataset: Dataset, predicate: Callable) -> None:
        super().__init__(input_dataset)
        self.predicate = predicate

    def _iterate(self) -> Iterator[Any]:
        for value in elements(self._input):
            keep = value if type(value) is Failed else attempt(call, self.predicate, value)
            if type(keep) is not Failed and not np.asarray(keep):
                return
            yield value if type(keep) is not Failed else keep

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY


class UniqueDataset(UnaryDataset):
    """``unique``: the first occurrence of every element (int32, int64 or string scalars, as TF)."""

    _stops_file_sharding = True

    def __init__(self, input_dataset: Dataset) -> None:
        super().__init__(input_dataset)
        spec = input_dataset.element_spec
        if not isinstance(spec, TensorSpec) or spec.dtype not in (np.int32, np.int64, STRING):
            dtype = getattr(spec, "dtype", None)
            shown = f"<dtype: '{dtype.name}'>" if isinstance(dtype, np.dtype) else "a structure"
            raise TypeError(f"`tf.data.Dataset.unique` does not support type {shown} -- only `tf.int32`, "
                            "`tf.int64`, and `tf.string` are supported.")

    def _iterate(self) -> Iterator[Any]:
        seen: set[Any] = set()
        for value in elements(self._input):
            if type(value) is Failed:
                yield value
                continue
            key = value.item()
            if key not in seen:
                seen.add(key)
                yield value

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY
