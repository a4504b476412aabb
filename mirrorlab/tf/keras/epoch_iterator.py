"""Which batches each epoch of ``fit`` (and the one epoch of ``evaluate`` and ``predict``) takes, as Keras 3's epoch
iterator on TF 2.21 hands them out.

An epoch is ``steps_per_epoch`` steps, else one pass over the data (data of no batches still tries a first step).
Its steps come in *executions* of ``steps_per_execution`` steps (Keras runs each in one traced call and calls the
batch callbacks once per execution, with its first and last step numbers). An execution starts at every multiple of
``steps_per_execution`` below the epoch's steps and takes that many batches, even past ``steps_per_epoch``; it stops
early, silently, when the data ends after its first batch.
With ``steps_per_epoch`` one iterator runs across epochs; once the data's known number of batches is used up
(mid-epoch: a short epoch, with a warning) a fresh pass starts at once, so training goes on for every epoch.
Data of unknown length runs until an execution finds no batch at all (its steps count, as Keras' counter does, and
the epoch stops there with a warning); that count then serves as the number of batches.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from ..data.dataset import Dataset
from ...distribute.input_lib import DistributedDataset

__all__ = ["EpochIterator", "RAN_OUT"]

RAN_OUT = ("Your input ran out of data; interrupting training. Make sure that your dataset or generator can generate "
           "at least `steps_per_epoch * epochs` batches. You may need to use the `.repeat()` function when building "
           "your dataset.")


def _known_batches(data: Iterable[Any]) -> int | None:
    """The data's number of batches when its cardinality says (None: infinite or unknown)."""
    if isinstance(data, DistributedDataset):
        cardinality = data.cardinality
    elif isinstance(data, Dataset):
        cardinality = data._cardinality()
    else:
        return None
    return int(cardinality) if int(cardinality) >= 0 else None


def _checked_steps_per_execution(value: Any) -> int:
    """``compile(steps_per_execution=...)`` as the step of Keras' range of executions, with the errors that range
    raises in TF (at fit, evaluate or predict) and the fix."""
    fix = "\nFix: compile the model with steps_per_execution set to a positive integer (1 runs one step per call)."
    try:
        steps = operator.index(value)
    except TypeError:
        raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer\n"
                        f"compile(steps_per_execution={value!r}) is not a number of steps.{fix}") from None
    if steps == 0:
        raise ValueError(f"range() arg 3 must not be zero\ncompile(steps_per_execution=0) would never end.{fix}")
    if steps < 0:
        raise ValueError(f"compile(steps_per_execution={steps}) is negative: no step would run.{fix}")
    return steps


class EpochIterator:
    """The executions of each epoch of ``fit`` over ``data`` and, for each, its batches.

    ``steps_per_execution`` is the model's compile setting as given (checked here, where Keras' loop fails on a bad
    one); ``num_batches`` is the data's number of batches where its cardinality cannot tell (arrays cut into
    batches)."""

    def __init__(self, data: Iterable[Any], steps_per_epoch: int | None, steps_per_execution: Any = 1,
                 num_batches: int | None = None) -> None:
        self._data = data
        self._steps_per_epoch = steps_per_epoch
        self.steps_per_execution = _checked_steps_per_execution(steps_per_execution)
        self._num_batches = _known_batches(data) if num_batches is None else num_batches
        self._iterator: Iterator[Any] | None = None
        self._seen = 0

    def steps(self) -> Iterator[tuple[int, int]]:
        """One epoch's executions as their (first, last) step numbers; the caller fetches each execution's batches
        with ``execution`` (and may stop early, which leaves the iterator where it is, as leaving Keras' loop does)."""
        if self._iterator is None or self._steps_per_epoch is None:
            self._iterator, self._seen = iter(self._data), 0
        per = self.steps_per_execution
        limit = self._steps_per_epoch or self._num_batches or None  # no batches known: try until the end
        begin = 0
        while limit is None or begin < limit:
            if self._num_batches and self._seen >= self._num_batches:
                if self._steps_per_epoch:
                    warnings.warn(RAN_OUT, stacklevel=2)
                break
            self._seen += per
            yield begin, begin + per - 1
            begin += per
        if self._num_batches and self._seen >= self._num_batches:
            # Keras starts the next pass right away (a seeded shuffle draws its next seeds now); an epoch without
            # ``steps_per_epoch`` then starts yet another, so such epochs see every other shuffle order, as in TF.
            self._iterator, self._seen = iter(self._data), 0

    def execution(self) -> Iterator[Any]:
        """The current execution's batches: up to ``steps_per_execution`` of them, fewer when the data ends after
        the first; none when it has ended already (the epoch stops, with Keras' warning; the next one starts a
        fresh pass)."""
        for index in range(self.steps_per_execution):
            try:
                batch = next(self._iterator)
            except StopIteration:
                if index == 0:
                    self._ended()
                else:  # (the next execution finds the end at once, as Keras' next get_next does)
                    self._iterator = iter(())
                return
            yield batch

    def _ended(self) -> None:
        """The data ended at the start of an execution: remember how many batches it had, and drop it."""
        if self._num_batches is None:
            self._num_batches = self._seen
        warnings.warn(RAN_OUT, stacklevel=3)
        self._iterator = None
