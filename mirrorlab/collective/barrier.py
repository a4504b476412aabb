"""Dissemination barrier: in round k every rank signals rank+2^k and waits for rank-2^k."""

from __future__ import annotations

import numpy as np

from .communicator import Instance

__all__ = ["barrier"]

_TOKEN = np.zeros(0, dtype=np.uint8)


def barrier(inst: Instance) -> None:
    """Return only once every rank has entered this barrier."""
    n, r = inst.size, inst.rank
    distance, step = 1, 0
    while distance < n:
        inst.send((r + distance) % n, _TOKEN, step=step)
        inst.recv((r - distance) % n, step=step)
        distance <<= 1
        step += 1
