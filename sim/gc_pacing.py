"""Young-generation garbage collection paced for a simulated run.

CPython collects its youngest generation every 700 net allocations of container objects, and each collection
walks every young object still alive. In a simulated cluster every worker that waits in a collective keeps its
step's young objects alive (closures, frames' locals, results), so each young collection walks all the waiting
workers' objects: on 64 workers a collection every step, about 4,400 objects, 4 us per replica of a tiny
all-reduce. A simulated run raises the threshold to ``YOUNG_THRESHOLD`` (a few MB of young objects at most) and
puts the caller's thresholds back when it ends; nothing is collected later than the run's own garbage would be.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "young_collections_paced"]

YOUNG_THRESHOLD = 10_000
"""Net container allocations between young collections during a simulated run (CPython's default: 700)."""


@contextmanager
def young_collections_paced(threshold: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Collect the young generation at most every ``threshold`` net allocations inside; a threshold of 0 (automatic
    collection off) is left as it is."""
    before = gc.get_threshold()
    if before[0]:
        gc.set_threshold(max(before[0], threshold), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
