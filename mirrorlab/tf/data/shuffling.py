"""``shuffle``: TF 2.21's shuffle buffer, seeds and reshuffling, so a seeded pipeline yields TF's order.

TF resolves an op seed with ``random_seed.get_seed`` (``mirrorlab.random``: ``(87654321, seed % (2**31 - 1))``
without a global seed). Each shuffle dataset owns a seed generator: fixed (``reshuffle_each_iteration=False``) or a
Philox stream of fresh iterator seeds. Every new iterator, and every new epoch of a fused
``shuffle().repeat()``, takes two seeds from it; the buffer is a ring from which the element at a random
offset of the oldest epoch's slice is emitted and swapped with the slice's first element.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import deque
from collections.abc import Iterator
from typing import Any

from ... import errors
from .dataset import FUSED_REPEAT_ZERO, Dataset, UnaryDataset
from .failures import Failed, elements
from ..random import get_seed
from .._kernels.philox import PhiloxStream

__all__ = ["ShuffleDataset", "tf_op_seeds", "peeking"]

_PEEKING: contextvars.ContextVar[bool] = contextvars.ContextVar("mirrorlab_data_peeking", default=False)


@contextlib.contextmanager
def peeking() -> Iterator[None]:
    """Iterate for inspection only (an element spec, a file check): seed generators do not advance, as
    TF answers these questions statically without creating iterators."""
    token = _PEEKING.set(True)
    try:
        yield
    finally:
        _PEEKING.reset(token)


def tf_op_seeds(seed: int | None) -> tuple[int, int]:
    """TF's ``(seed, seed2)`` for an op seed, under the global seed if ``tf.random.set_seed`` set one; an op
    without either gets one from mirrorlab's environment (the simulation seed in a SimCluster worker), where TF
    would draw fresh entropy."""
    seeds = get_seed(seed)
    if seeds == (None, None):
        from .seeding import dataset_seed

        seeds = get_seed(dataset_seed(None))
    return seeds


class SeedGenerator:
    """Iterator seeds of one shuffle dataset, shared by every iterator (and distributed copy) of it."""

    def __init__(self, seed: int, seed2: int, reshuffle: bool) -> None:
        self._fixed = (seed, seed2)
        self._stream = PhiloxStream(seed, seed2) if reshuffle else None
        self._upcoming: tuple[int, int] | None = None

    def generate(self) -> tuple[int, int]:
        """The next iterator's seeds (two fresh Philox samples when reshuffling); a peek sees them without
        using them up."""
        if self._stream is None:
            return self._fixed
        if self._upcoming is None:
            self._upcoming = (self._stream.next(), self._stream.next())
        seeds = self._upcoming
        if not _PEEKING.get():
            self._upcoming = None
        return seeds


class ShuffleDataset(UnaryDataset):
    """``shuffle(buffer_size, seed, reshuffle_each_iteration)``."""

    def __init__(self, input_dataset: Dataset, buffer_size: int, seed: int | None, reshuffle: bool) -> None:
        super().__init__(input_dataset)
        if buffer_size < 1:
            raise errors.InvalidArgumentError(f"buffer_size must be greater than zero or UNKNOWN_CARDINALITY\n(got "
                                              f"{buffer_size}) Fix: pass a positive buffer_size.")
        self.buffer_size = buffer_size
        self.seed = seed
        self.reshuffle = reshuffle
        self._seeds = SeedGenerator(*tf_op_seeds(seed), reshuffle)

    def _iterate(self) -> Iterator[Any]:
        return self.iterate_epochs(1)

    def _initialize_iterators(self) -> None:
        self._seeds.generate()  # a new iterator draws its seeds; it reads its input only when asked

    def iterate_epochs(self, count: int | None) -> Iterator[Any]:
        """The shuffled stream over ``count`` epochs of the input (None: forever), as TF's fused
        ShuffleAndRepeat: the buffer may hold several epochs, but each is emitted whole before the next,
        and each epoch draws new seeds."""
        if count == 0:  # TF fuses shuffle().repeat(0) into an op that rejects the count
            raise errors.InvalidArgumentError(FUSED_REPEAT_ZERO)
        rng = PhiloxStream(*self._seeds.generate())
        return self._shuffled(rng, count)

    def _shuffled(self, rng: PhiloxStream, count: int | None) -> Iterator[Any]:
        size = self.buffer_size
        buffer: list[Any] = [None] * size
        slices: deque[list[int]] = deque()
        held = epoch = 0
        source: Iterator[Any] | None = None
        produced = False
        while True:
            while ((source is not None or count is None or epoch < count)
                   and not (len(slices) > 3 and held > 0) and held < size):
                if source is None:
                    start = slices[-1][1] if slices else 0
                    slices.append([start, start])
                    source = elements(self._input)
                    epoch += 1
                element = next(source, _END)
                if type(element) is Failed:  # passed on at once (TF's fill returns the error), no seed drawn
                    yield element
                    continue
                if element is _END:
                    source = None
                    if not produced and count is None:
                        break  # an empty input repeated forever ends at once
                    continue
                produced = True
                buffer[slices[-1][1] % size] = element
                slices[-1][1] += 1
                held += 1
            if held == 0:
                return
            while slices[0][0] == slices[0][1]:
                slices.popleft()
                rng = PhiloxStream(*self._seeds.generate())
            first = slices[0]
            index = (first[0] + rng.next() % (first[1] - first[0])) % size
            head = first[0] % size
            element, buffer[index] = buffer[index], buffer[head]
            buffer[head] = None
            first[0] += 1
            held -= 1
            yield element


_END = object()
