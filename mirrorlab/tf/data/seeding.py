"""Seeds for shuffles created without one: distinct per op, reproducible inside a simulation."""

from __future__ import annotations

import numpy as np

from ...runtime import current_environment

__all__ = ["dataset_seed"]


def dataset_seed(seed: int | None) -> int:
    """``seed`` if given; else the environment's next op seed (from the simulation seed in a
    SimCluster worker, so a run replays exactly; fresh OS entropy in a plain process)."""
    if seed is not None:
        return int(seed)
    op_seed = current_environment().next_op_seed()
    if op_seed is not None:
        return int(op_seed)
    return int(np.random.SeedSequence().entropy % (2**63))
