"""Failed elements, for ``ignore_errors()`` (TF's IgnoreErrorsDataset).

In TF an iterator goes on after an element fails: the error takes the element's place downstream, and an
``ignore_errors()`` drops it. mirrorlab's iterators are generators, which end once they raise, so while an
``ignore_errors()`` node reads its input ("carrying"), a failure travels as a ``Failed`` value instead. A node that
reads its input with ``elements`` passes failures on by TF's rule for that op (most pass them at once; batch drops
the elements it had read); a node that reads it with ``iter`` gets the failure raised, and ends with it as its
last output (``_stream``).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ... import errors

if TYPE_CHECKING:
    from .dataset import Dataset

__all__ = ["Failed", "carrying", "carried", "elements", "attempt", "failure", "raising", "ending"]

_CARRYING: contextvars.ContextVar[bool] = contextvars.ContextVar("mirrorlab_data_carrying_failures", default=False)


class Failed:
    """An element whose computation raised ``error`` (a TF runtime error), in its place in the stream."""

    __slots__ = ("error",)

    def __init__(self, error: errors.OpError) -> None:
        self.error = error


def carrying() -> bool:
    """Whether failures travel as ``Failed`` values now (an ``ignore_errors()`` is reading)."""
    return _CARRYING.get()


def carried(read: Callable[[], Any]) -> Any:
    """``read()`` with failures carried as values (what an ``ignore_errors()`` node does around each read)."""
    token = _CARRYING.set(True)
    try:
        return read()
    finally:
        _CARRYING.reset(token)


def elements(dataset: "Dataset") -> Iterator[Any]:
    """The input of a node that carries failures: its elements, and ``Failed`` ones while carrying."""
    return dataset._stream() if _CARRYING.get() else iter(dataset)


def attempt(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; while carrying, a TF runtime error it raises comes back as a ``Failed`` value."""
    try:
        return fn(*args)
    except errors.OpError as error:
        if not _CARRYING.get():
            raise
        return Failed(error)


def failure(error: errors.OpError) -> Failed:
    """An error a node raises itself, after which TF's iterator goes on (a selector out of range, an element that
    cannot be unbatched): while carrying, the ``Failed`` value to yield in its place; otherwise it is raised."""
    if not _CARRYING.get():
        raise error
    return Failed(error)


def raising(stream: Iterator[Any]) -> Iterator[Any]:
    """``stream`` for a node that does not carry failures: the first ``Failed`` value is raised in it."""
    for value in stream:
        if type(value) is Failed:
            raise value.error
        yield value


def ending(stream: Iterator[Any]) -> Iterator[Any]:
    """The output of a node that does not carry failures: it ends at its first error, which is its last value."""
    try:
        yield from stream
    except errors.OpError as error:
        yield Failed(error)
