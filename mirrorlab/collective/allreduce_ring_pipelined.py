"""Pipelined ring all-reduce for large messages: the ring of ``allreduce_ring.py`` with each chunk cut into
segments of at most ``segment_bytes``, each forwarded as soon as it is reduced.

A rank sends segment k of a step while its right neighbour is still reducing segment k-1 and its left one is
producing segment k+1, so on real transports sending, receiving and adding overlap instead of taking turns
chunk by chunk. Each element is summed exactly as in the plain ring (chunk c as ``((x_c + x_{c+1}) + ...) +
x_{c-1}``, the received partial first), so results are bit-identical to it. Complete chunks are written into
one output array (no final concatenation), each slice once, frozen before it is sent and never written again
(partials are fresh arrays), so transports may send them without a copy.
"""

from __future__ import annotations

from typing import Any

from ..tensor import array_module, frozen
from .allreduce_ring import chunk_bounds
from .communicator import Instance

__all__ = ["allreduce_ring_pipelined", "segment_bounds", "SEGMENT_BYTES"]

SEGMENT_BYTES = 1 << 20
"""Default bound on one pipelined message: small enough to overlap, large enough to amortise a message's cost."""


def segment_bounds(start: int, end: int, itemsize: int, segment_bytes: int) -> list[tuple[int, int]]:
    """``range(start, end)`` cut into pieces of at most ``segment_bytes`` (at least one element, and at least one
    piece, empty for an empty range)."""
    step = max(1, segment_bytes // max(1, itemsize))
    return [(a, min(a + step, end)) for a in range(start, end, step)] or [(start, end)]


def allreduce_ring_pipelined(inst: Instance, flat: Any, segment_bytes: int = SEGMENT_BYTES) -> Any:
    """Sum the 1-D array ``flat`` over all ranks of ``inst``; returns a new array on every rank."""
    n, r = inst.size, inst.rank
    if n == 1:
        return flat
    xp = array_module(flat)
    out = inst.empty_like(flat)
    segments = [segment_bounds(a, b, flat.itemsize, segment_bytes) for a, b in chunk_bounds(flat.shape[0], n)]
    per_step = max(len(s) for s in segments)
    right, left = (r + 1) % n, (r - 1) % n
    for k, (a, b) in enumerate(segments[r]):  # reduce-scatter, step 0: this rank's own chunk r goes first
        inst.send(right, flat[a:b], step=k)
    for s in range(n - 1):  # receive chunk (r-s-1), add this rank's part, pass it on (it is step s+1's chunk)
        last = s == n - 2  # chunk r+1 is then complete: it goes to ``out`` and its sends start the all-gather
        for k, (a, b) in enumerate(segments[(r - s - 1) % n]):
            theirs = inst.recv(left, step=s * per_step + k)
            part = frozen(xp.add(theirs, flat[a:b], out=out[a:b]) if last else theirs + flat[a:b])
            inst.send(right, part, step=(s + 1) * per_step + k)
    for s in range(n - 1):  # all-gather: receive the complete chunk (r-s) into ``out``, pass it on but the last
        for k, (a, b) in enumerate(segments[(r - s) % n]):
            out[a:b] = inst.recv(left, step=(n - 1 + s) * per_step + k)
            if s < n - 2:
                inst.send(right, frozen(out[a:b]), step=(n + s) * per_step + k)
    return out
