"""Evaluating described arrays (``lazy_array``) into NumPy arrays, bit for bit what the algorithm would have computed.

Small collectives are replayed operation by operation (``replay``); large ones go through ``FusedSums``, which
computes every element with the same additions in the same order but in few, large NumPy calls, and one array
that every worker's result views. Results never view a writable array of the caller: such data is copied, as the
network's snapshot of a sent message would have copied it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mirrorlab.tensor import immutable

from .fused_sums import FusedSums
from .lazy_array import Add, Concat, LazyArray, Leaf, Reshape, Slice, bottom_up, view_base

__all__ = ["replay", "Materializer", "FUSE_FROM"]

FUSE_FROM = 1 << 16  # elements x ranks from which a collective's results are computed fused


def _compute(node: LazyArray) -> Any:
    if isinstance(node, Add):
        value = node.a.value + node.b.value
    elif isinstance(node, Concat):
        value = np.concatenate([p.value for p in node.parts])
    elif isinstance(node, Slice):
        return node.base.value[node.key]
    elif isinstance(node, Reshape):
        return node.base.value.reshape(node.new_shape)
    else:
        return node.bound.value
    value.flags.writeable = False  # ours alone: views of it may be handed out without a copy
    return value


def replay(node: LazyArray) -> Any:
    """``node``'s value, computing every operation below it once, in the algorithm's order."""
    bottom_up(node, lambda n: n.value is not None, lambda n: setattr(n, "value", _compute(n)))
    return node.value


class Materializer:
    """Turns one collective instance's described results into arrays; large results are computed once (fused) and
    shared by every rank's result."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.fused = FusedSums()

    def results(self, value: Any) -> Any:
        """``value`` (a body's result: an array, a list or tuple of them, or None) with every described array
        replaced by its value."""
        if isinstance(value, LazyArray):
            return self.array(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.results(v) for v in value)
        return value

    def array(self, node: LazyArray) -> Any:
        """``node``'s value; fused when the array it views is large (so that every part of a packed result views
        one shared array), else replayed."""
        base, _ = view_base(node)
        if not isinstance(base, Leaf) and base.size * self.ranks >= FUSE_FROM:
            return self.fused.array(node)
        out = replay(node)
        return out if immutable(out) else out.copy()
