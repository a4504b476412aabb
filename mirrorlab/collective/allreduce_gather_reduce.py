"""One-round all-reduce for small messages: every rank sends its whole array to every other rank, then
each sums all of them locally.

One message latency instead of the ring's 2(n-1) or halving/doubling's 2·log2(n) rounds, at the price of
(n-1) x the bytes, so it only pays for small messages (``algorithm_choice.py`` decides). Every element is
summed in exactly the order of the algorithm that would otherwise run, ``order`` = ``"ring"`` or
``"halving_doubling"``, so the result is bit-identical to it whichever runs (NaN payloads included: the
operands are added in the same operand order too).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..tensor import array_module
from .allreduce_ring import chunk_bounds
from .communicator import Instance

__all__ = ["allreduce_gather_reduce", "ring_order_total", "halving_doubling_order_total", "ORDERS"]


PICK_BELOW = 1 << 16
"""Ring-order totals of fewer elements x ranks than this pick every element's operands first (two copies of the
inputs, n - 1 NumPy additions); larger ones add chunk by chunk into the result (no copy, n(n-1) additions)."""


def ring_order_total(arrays: Sequence[Any]) -> Any:
    """The ring's sum: chunk c (``chunk_bounds``) as ``((x_c + x_{c+1}) + ...) + x_{c-1}``, into one new array.

    Small totals pick each element's operands first (row k holds each element's k-th operand) and add whole rows:
    the same additions, in the same operand order, in fewer NumPy calls."""
    n, first = len(arrays), arrays[0]
    xp = array_module(first)
    if n == 1:
        return xp.array(first)
    if n * first.shape[0] < PICK_BELOW:
        picked = xp.take(xp.concatenate(arrays), xp.asarray(_ring_picks(first.shape[0], n)))
        total = picked[0] + picked[1]
        for k in range(2, n):
            xp.add(total, picked[k], out=total)
        return total
    total = xp.empty(first.shape, first.dtype)
    for c, (a, b) in enumerate(chunk_bounds(first.shape[0], n)):
        acc = total[a:b]
        xp.add(arrays[c][a:b], arrays[(c + 1) % n][a:b], out=acc)
        for k in range(2, n):
            xp.add(acc, arrays[(c + k) % n][a:b], out=acc)
    return total


@lru_cache(maxsize=64)
def _ring_picks(length: int, n: int) -> np.ndarray:
    """Where element e's k-th operand of the ring's sum sits in the n arrays laid end to end (chunk c starts at
    rank c), as an (n, length) index (under ``PICK_BELOW`` entries: the cache holds at most 32 MiB)."""
    first = np.empty(length, np.intp)
    for c, (a, b) in enumerate(chunk_bounds(length, n)):
        first[a:b] = c
    picks = (first + np.arange(n)[:, None]) % n * length + np.arange(length)
    picks.flags.writeable = False
    return picks


def halving_doubling_order_total(arrays: Sequence[Any]) -> Any:
    """Halving/doubling's sum (the same tree for every element): with p = 2^floor(log2 n) and r = n - p, the
    first 2r ranks fold pairwise (``x_2v + x_2v+1``), then partials whose virtual ranks differ in bit p/2, p/4,
    ..., 1 are added, the one with the bit clear first: for p = 4, ``(y0 + y2) + (y1 + y3)``.

    Evaluated depth first, adding into partials it made itself, so it holds about log2(n) temporary arrays, not
    n / 2 (1024 ranks of 4 MiB each: 40 MiB, not 2 GiB). Described arrays (a simulator's dry run) are added with
    ``+`` only."""
    n = len(arrays)
    p = 1 << (n.bit_length() - 1)
    return _halving_doubling_partial(arrays, p, n - p, 0, 1)[0]


def _halving_doubling_partial(arrays: Sequence[Any], p: int, extra: int, v: int, half: int) -> tuple[Any, bool]:
    """The partial of virtual rank v once the bits above ``half`` are folded in, and whether it is ours (a function
    of its own, not a closure calling itself: that closure's cycle kept every rank's input alive until a collection)."""
    if half == p:
        if v >= extra:
            return arrays[v + extra], False
        left, right = arrays[2 * v], arrays[2 * v + 1]
    else:
        (left, ours), (right, _) = (_halving_doubling_partial(arrays, p, extra, v, 2 * half),
                                    _halving_doubling_partial(arrays, p, extra, v + half, 2 * half))
        if ours:
            return array_module(left).add(left, right, out=left), True
    total = left + right
    return total, isinstance(total, array_module(total).ndarray)  # a new array (not a described one)


ORDERS = {"ring": ring_order_total, "halving_doubling": halving_doubling_order_total}


def allreduce_gather_reduce(inst: Instance, flat: Any, order: str = "ring") -> Any:
    """Sum the 1-D array ``flat`` over all ranks of ``inst`` in ``order``'s summation order; returns a new
    array on every rank. ``flat`` must not change until the peers have it (the group's arrays are frozen)."""
    if order not in ORDERS:
        raise ValueError(f"allreduce_gather_reduce: order must be one of {sorted(ORDERS)}; got {order!r}")
    n, r = inst.size, inst.rank
    if n == 1:
        return flat
    total_in_order = ORDERS[order]
    for k in range(1, n):
        inst.send((r + k) % n, flat, step=0)
    arrays: list[Any] = [None] * n
    arrays[r] = flat
    for k in range(1, n):
        peer = (r - k) % n
        arrays[peer] = inst.recv(peer, step=0)
    return inst.combine(total_in_order, arrays)
