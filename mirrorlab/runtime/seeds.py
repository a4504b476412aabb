"""Seeds for ops created without one (a shuffle, a stateful random op), shared by the simulator and real
workers so an unseeded program computes the same on both."""

from __future__ import annotations

import numpy as np

__all__ = ["op_seed"]


def op_seed(worker: int, count: int) -> int:
    """The ``count``-th such seed of worker ``worker`` (its id in the cluster): distinct per worker and op, and
    independent of scheduling."""
    return int(np.random.SeedSequence([worker, count]).generate_state(1, np.uint64)[0] >> 1)
