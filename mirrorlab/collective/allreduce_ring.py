"""Ring all-reduce (SUM): reduce-scatter then all-gather, rank r sending to rank r+1.

Chunk c is summed in ring order starting at rank c: ``((x_c + x_{c+1}) + ...) + x_{c-1}``, a fixed
order, so every worker (and every transport) gets bit-identical results. Inputs are never mutated, and
every array the algorithm creates is frozen before it is sent, so transports may send it without a copy.
"""

from __future__ import annotations

from typing import Any

from ..tensor import array_module, frozen
from .communicator import Instance

__all__ = ["allreduce_ring", "chunk_bounds"]


def chunk_bounds(length: int, parts: int) -> list[tuple[int, int]]:
    """Split ``range(length)`` into ``parts`` contiguous pieces whose sizes differ by at most one."""
    base, extra = divmod(length, parts)
    bounds, start = [], 0
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def allreduce_ring(inst: Instance, flat: Any) -> Any:
    """Sum the 1-D array ``flat`` over all ranks of ``inst``; returns a new array on every rank."""
    n, r = inst.size, inst.rank
    if n == 1:
        return flat
    xp = array_module(flat)
    chunks = [flat[a:b] for a, b in chunk_bounds(flat.shape[0], n)]
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        inst.send(right, chunks[(r - s) % n], step=s)
        idx = (r - s - 1) % n
        chunks[idx] = frozen(inst.recv(left, step=s) + chunks[idx])
    for s in range(n - 1):
        inst.send(right, chunks[(r + 1 - s) % n], step=n - 1 + s)
        chunks[(r - s) % n] = inst.recv(left, step=n - 1 + s)
    return xp.concatenate(chunks)
