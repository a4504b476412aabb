"""An all-reduce instance stated whole, so that a transport holding every rank's input may compute it once.

``total(flats)`` is what the instance's algorithm returns on every rank, given the ranks' 1-D inputs in rank order,
bit for bit: the same additions in the same operand order (``allreduce_gather_reduce.ORDERS``, which gather-reduce
already relies on). ``finish`` turns that array into this rank's result of the instance. A real transport runs the
algorithm's messages; the simulator, where every message arrives at once, computes ``total`` once for all members
instead (``sim/collective_batch.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

__all__ = ["ClosedForm"]


class ClosedForm(NamedTuple):
    """This rank's input ``flat``, the algorithm's exact-order ``total`` over all ranks' inputs, and ``finish``."""

    flat: Any
    total: Callable[[Sequence[Any]], Any]
    finish: Callable[[Any], Any]
