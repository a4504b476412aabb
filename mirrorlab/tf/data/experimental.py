"""``mirrorlab.data.experimental``: TF's ``tf.data.experimental`` names. Besides the options and constants, the
functional forms of transformations (``dataset.apply(unbatch())``) that older TF code uses, each the same as the
dataset method it names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .cardinality import AssertCardinalityDataset
from .dataset import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from .options import (SHARD_HINT, AutoShardPolicy, AutotuneOptions, DistributeOptions, OptimizationOptions,
                      ThreadingOptions)
from .sources import ListDataset
from .tensors import int64_arg

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "SHARD_HINT", "AutoShardPolicy",
           "AutotuneOptions", "DistributeOptions", "OptimizationOptions", "ThreadingOptions", "Counter",
           "RandomDataset", "assert_cardinality", "bucket_by_sequence_length", "cardinality", "choose_from_datasets",
           "enumerate_dataset", "from_list", "get_next_as_optional", "get_single_element", "group_by_window",
           "ignore_errors", "map_and_batch", "parallel_interleave", "sample_from_datasets", "scan",
           "shuffle_and_repeat", "snapshot", "take_while", "unbatch", "unique"]

Transformation = Callable[[Dataset], Dataset]


def cardinality(dataset: Dataset) -> Any:
    """``dataset.cardinality()``."""
    return dataset.cardinality()


def assert_cardinality(expected_cardinality: Any) -> Transformation:
    """Declare the input's element count (its ``cardinality()`` from then on) and check it while reading."""
    expected = int64_arg(expected_cardinality)
    return lambda dataset: AssertCardinalityDataset(dataset, expected)


def choose_from_datasets(datasets: list[Dataset], choice_dataset: Dataset,
                         stop_on_empty_dataset: bool = False) -> Dataset:
    """``Dataset.choose_from_datasets``."""
    return Dataset.choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)


def sample_from_datasets(datasets: list[Dataset], weights: Any = None, seed: int | None = None,
                         stop_on_empty_dataset: bool = False) -> Dataset:
    """``Dataset.sample_from_datasets``."""
    return Dataset.sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset)


def enumerate_dataset(start: int = 0) -> Transformation:
    """``dataset.enumerate(start)``."""
    return lambda dataset: dataset.enumerate(start)


def get_single_element(dataset: Dataset) -> Any:
    """``dataset.get_single_element()``."""
    return dataset.get_single_element()


def group_by_window(key_func: Callable, reduce_func: Callable, window_size: int | None = None,
                    window_size_func: Callable | None = None) -> Transformation:
    """``dataset.group_by_window(...)``."""
    return lambda dataset: dataset.group_by_window(key_func, reduce_func, window_size, window_size_func)


def bucket_by_sequence_length(element_length_func: Callable, bucket_boundaries: list[int],
                              bucket_batch_sizes: list[int], padded_shapes: Any = None, padding_values: Any = None,
                              pad_to_bucket_boundary: bool = False, no_padding: bool = False,
                              drop_remainder: bool = False) -> Transformation:
    """``dataset.bucket_by_sequence_length(...)``."""
    return lambda dataset: dataset.bucket_by_sequence_length(
        element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes, padding_values,
        pad_to_bucket_boundary, no_padding, drop_remainder)


def unbatch() -> Transformation:
    """``dataset.unbatch()``."""
    return lambda dataset: dataset.unbatch()


def ignore_errors(log_warning: bool = False) -> Transformation:
    """``dataset.ignore_errors(log_warning)``."""
    return lambda dataset: dataset.ignore_errors(log_warning)


def snapshot(path: str, compression: str | None = "AUTO", reader_func: Callable | None = None,
             shard_func: Callable | None = None) -> Transformation:
    """``dataset.snapshot(path, compression, reader_func, shard_func)``."""
    return lambda dataset: dataset.snapshot(path, compression, reader_func, shard_func)


def unique() -> Transformation:
    """``dataset.unique()``."""
    return lambda dataset: dataset.unique()


def take_while(predicate: Callable) -> Transformation:
    """``dataset.take_while(predicate)``."""
    return lambda dataset: dataset.take_while(predicate)


def scan(initial_state: Any, scan_func: Callable) -> Transformation:
    """``dataset.scan(initial_state, scan_func)``."""
    return lambda dataset: dataset.scan(initial_state, scan_func)


def shuffle_and_repeat(buffer_size: int, count: int | None = None, seed: int | None = None) -> Transformation:
    """``dataset.shuffle(buffer_size, seed).repeat(count)``, exactly as TF defines it."""
    return lambda dataset: dataset.shuffle(buffer_size, seed=seed).repeat(count)


def map_and_batch(map_func: Callable, batch_size: int, num_parallel_batches: int | None = None,
                  drop_remainder: bool = False, num_parallel_calls: int | None = None) -> Transformation:
    """``dataset.map(map_func).batch(batch_size, drop_remainder)`` (parallelism does not change the elements)."""
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("`map_and_batch` allows only one of `num_parallel_batches` and `num_parallel_calls` to be "
                         f"set, but `num_parallel_batches` was set to {num_parallel_batches} and "
                         f"`num_parallel_calls` as set to {num_parallel_calls}.")
    return lambda dataset: dataset.map(map_func).batch(batch_size, drop_remainder=drop_remainder)


def parallel_interleave(map_func: Callable, cycle_length: int, block_length: int = 1, sloppy: bool | None = False,
                        buffer_output_elements: int | None = None,
                        prefetch_input_elements: int | None = None) -> Transformation:
    """``dataset.interleave(map_func, cycle_length, block_length)``: TF's order (mirrorlab runs it in order, which
    is also an order ``sloppy=True`` allows)."""
    return lambda dataset: dataset.interleave(map_func, cycle_length, block_length)


def Counter(start: int = 0, step: int = 1, dtype: Any = np.int64) -> Dataset:  # noqa: N802 (TF's name)
    """``Dataset.counter(start, step, dtype)``."""
    return Dataset.counter(start, step, dtype)


def RandomDataset(seed: int | None = None, rerandomize_each_iteration: bool | None = None,  # noqa: N802
                  name: Any = None) -> Dataset:
    """``Dataset.random(seed, rerandomize_each_iteration)``."""
    return Dataset.random(seed, rerandomize_each_iteration)


def get_next_as_optional(iterator: Any) -> Any:
    """``iterator.get_next_as_optional()``."""
    return iterator.get_next_as_optional()


def from_list(elements: list[Any], name: Any = None) -> Dataset:
    """A dataset of the given elements (one structure and dtype; shapes may differ)."""
    return ListDataset(elements)
