"""``tf.random.set_seed`` and TF 2.21's rule turning it and an op's own seed into the op's two seeds.

With a global seed, an op gets ``(global seed, its seed)``, and an op without a seed takes the next draw of a
``random.Random(global seed)`` (TF's eager ``internal_operation_seed``), so a seeded program replays TF's shuffles.
Without one, an op's seed pairs with TF's default graph seed; an op with no seed at all is left to the caller
(TF draws fresh entropy; mirrorlab's simulator draws from its own seed). Each worker keeps its own global seed.
"""

from __future__ import annotations

import random as _random
from typing import Any

import numpy as np

from .runtime import current_environment

__all__ = ["set_seed", "get_seed", "DEFAULT_GRAPH_SEED"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1


def set_seed(seed: Any) -> None:
    """Set this worker's global seed (None clears it), restarting the draws for ops created without a seed."""
    state = current_environment().process_state
    if seed is None:
        state.pop("tf.random", None)
        return
    try:
        hash(seed)
    except TypeError:  # an array, as TF converts it
        seed = int(np.array(seed))
    state["tf.random"] = (seed, _random.Random(seed))


def get_seed(op_seed: int | None) -> tuple[int | None, int | None]:
    """TF's ``random_seed.get_seed``: ``(seed, seed2)`` for an op created with ``op_seed``; ``(None, None)`` when
    neither it nor a global seed is set."""
    found = current_environment().process_state.get("tf.random")
    if found is not None:
        global_seed, rng = found
        if op_seed is None:
            op_seed = rng.randint(0, _MAXINT32)
        seeds = (int(global_seed) % _MAXINT32, int(op_seed) % _MAXINT32)
    elif op_seed is not None:
        seeds = (DEFAULT_GRAPH_SEED, int(op_seed) % _MAXINT32)
    else:
        return None, None
    return (0, _MAXINT32) if seeds == (0, 0) else seeds
