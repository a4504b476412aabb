"""``Dataset.random`` and ``Dataset.sample_from_datasets`` as TF 2.21 builds them, so seeded pipelines match.

``random`` yields the uint32 samples of ``PhiloxRandom(seed, seed2)`` as int64 scalars (a fresh seed pair per
iterator when ``rerandomize_each_iteration``, drawn like a shuffle's). ``sample_from_datasets`` chooses the input
of each element by a stateless multinomial draw over ``log(weights)``, seeded by two consecutive ``random``
samples, then reads it as ``choose_from_datasets`` does (zero weights drop their datasets first).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._kernels import portable_math
from .._kernels.philox import PhiloxStream
from .._kernels.random_kernels import multinomial_row, stateless_stream
from ...tensor import Tensor, as_tensor
from .combining import ChooseDataset
from .dataset import INFINITE_CARDINALITY, Dataset, TensorSpec
from .shuffling import SeedGenerator, tf_op_seeds
from .sources import SourceDataset

__all__ = ["RandomDataset", "sample_from_datasets"]


class RandomDataset(SourceDataset):
    """``Dataset.random(seed, rerandomize_each_iteration)``: endless int64 scalars in [0, 2**32)."""

    def __init__(self, seed: int | None, rerandomize: bool | None) -> None:
        self.seed = seed
        self.rerandomize = bool(rerandomize)
        self._seeds = SeedGenerator(*tf_op_seeds(seed), self.rerandomize)

    def _iterate(self) -> Iterator[Any]:
        stream = PhiloxStream(*self._seeds.generate())
        while True:
            yield np.asarray(stream.next(), np.int64)

    def _initialize_iterators(self) -> None:
        self._seeds.generate()

    def _cardinality(self) -> int:
        return INFINITE_CARDINALITY

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), np.int64)


def _draw(logits: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """One stateless multinomial sample (int64 scalar) from a [1, n] row of logits."""
    return multinomial_row(np.asarray(logits)[0], 1, stateless_stream(np.asarray(seed, np.int64)))[0]


def _log_weights(*weights: Any) -> np.ndarray:
    """TF's logits of one element of a weights dataset: ``log`` of the element as a [1, n] row (zero weights give
    -inf, never drawn)."""
    with np.errstate(divide="ignore"):
        return portable_math.log(np.asarray(weights))


def _float_weights(weights: Any) -> np.ndarray:
    """``weights`` as a float32/float64 array, or TF's TypeError."""
    array = as_tensor(weights)
    if array.dtype not in (np.float32, np.float64):
        raise TypeError(f"Invalid `weights`. `weights` type must be either `tf.float32` or `tf.float64` but is "
                        f"<dtype: '{array.dtype.name}'>.\nFix: pass float weights, e.g. [0.5, 0.5].")
    return np.asarray(array)


def sample_from_datasets(datasets: Sequence[Dataset], weights: Any = None, seed: int | None = None,
                         stop_on_empty_dataset: bool = False,
                         rerandomize_each_iteration: bool | None = None) -> Dataset:
    """Elements drawn at random from ``datasets`` with probabilities ``weights`` (a list, an array or a dataset
    of weight vectors; uniform when None)."""
    datasets = list(datasets)
    if not datasets:
        raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
    seeds = RandomDataset(seed, rerandomize_each_iteration).batch(2)
    if isinstance(weights, Dataset):
        logits_and_seeds = Dataset.zip((weights.map(_log_weights), seeds))
        selector = logits_and_seeds.map(_draw)
    else:
        if weights is None:
            logits = np.ones((1, len(datasets)), np.float32)
        else:
            if isinstance(weights, Tensor):
                if np.ndim(weights) != 1 or len(weights) != len(datasets):
                    raise ValueError(f"Invalid `weights`. The shape of `weights` should be compatible with "
                                     f"`[len(datasets)]` but is {tuple(np.shape(weights))}.")
            else:
                if len(datasets) != len(weights):
                    raise ValueError(f"Invalid `weights`. `weights` should have the same length as `datasets` but "
                                     f"got `len(weights)={len(weights)}` vs. `len(datasets)={len(datasets)}`.")
                kept = [(d, w) for d, w in zip(datasets, weights) if w > 0]
                datasets, weights = ([d for d, _ in kept], [w for _, w in kept]) if kept else \
                    ([datasets[0].take(0)], [1.0])
            logits = portable_math.log(_float_weights(weights))[None]
        if len(datasets) == 1:
            return datasets[0]
        selector = seeds.map(lambda pair: _draw(logits, pair))
    return ChooseDataset(datasets, selector, bool(stop_on_empty_dataset))
