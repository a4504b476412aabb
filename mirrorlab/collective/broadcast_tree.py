"""Binomial-tree broadcast from a root rank: ceil(log2 n) rounds instead of a chain's n-1."""

from __future__ import annotations

from typing import Any

from .communicator import Instance

__all__ = ["broadcast_tree"]


def broadcast_tree(inst: Instance, value: Any, root: int) -> Any:
    """Root's ``value`` on every rank (non-roots pass a placeholder, which is ignored)."""
    n, r = inst.size, inst.rank
    vr = (r - root) % n
    top = 1
    while top < n:
        top <<= 1
    if vr:
        low = vr & -vr
        value = inst.recv((vr - low + root) % n, step=0)
        top = low
    mask = top >> 1
    while mask:
        if vr + mask < n:
            inst.send((vr + mask + root) % n, value, step=0)
        mask >>= 1
    return value
