"""``assert_cardinality``: a pass-through node that declares the input's element count and checks it as the
elements are read (TF's AssertCardinalityDataset)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ... import errors
from .dataset import INFINITE_CARDINALITY, Dataset, UnaryDataset
from .failures import Failed, elements

__all__ = ["AssertCardinalityDataset"]


def _elements(count: int) -> str:
    return f"{count} element" + ("" if count == 1 else "s")


class AssertCardinalityDataset(UnaryDataset):
    """The input's elements, its cardinality ``expected``; FailedPreconditionError at the element that shows the
    count wrong (one too many, or the end too early), as TF's kernel checks each read."""

    def __init__(self, input_dataset: Dataset, expected: int) -> None:
        super().__init__(input_dataset)
        self.expected = expected

    def _cardinality(self) -> int:
        return self.expected

    def _iterate(self) -> Iterator[Any]:
        wanted = ("an infinite number of elements" if self.expected == INFINITE_CARDINALITY
                  else _elements(self.expected))
        seen = 0
        for element in elements(self._input):
            if type(element) is Failed:  # passed on, uncounted (TF's kernel retries forever)
                yield element
                continue
            seen += 1
            if seen > self.expected and self.expected != INFINITE_CARDINALITY:
                raise self._error(f"Input dataset was expected to contain {wanted} but contained at least "
                                  f"{_elements(seen)}.")
            yield element
        if seen != self.expected:
            raise self._error(f"Input dataset was expected to contain {wanted} but contained only {_elements(seen)}.")

    @staticmethod
    def _error(message: str) -> errors.FailedPreconditionError:
        return errors.FailedPreconditionError(f"{message} [Op:IteratorGetNext] name: \nFix: pass assert_cardinality "
                                              "the number of elements the dataset really has (or drop it).")
