"""Which all-reduce algorithm runs a packed message, from values every worker agrees on once fingerprints
match (the message's byte size, the number of workers, the requested implementation), so all choose the same.

The summation order is today's rule and never depends on size: the ring's (TF's) up to ``RING_UP_TO`` workers
or when RING is requested, recursive halving/doubling's beyond. Size only picks how that order is executed,
so results are bit-identical whichever runs: a one-round gather-reduce for small messages (AUTO only: RING
keeps the ring's messages), the pipelined ring for large ring-order messages, the plain algorithm otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..communication import CommunicationImplementation
from .allreduce_gather_reduce import (ORDERS, allreduce_gather_reduce, halving_doubling_order_total,
                                      ring_order_total)
from .allreduce_halving_doubling import allreduce_halving_doubling
from .allreduce_ring import allreduce_ring
from .allreduce_ring_pipelined import allreduce_ring_pipelined
from .communicator import Instance

__all__ = ["AllReduceAlgorithm", "choose_all_reduce", "RING_UP_TO", "GATHER_REDUCE_UP_TO_WORKERS",
           "GATHER_REDUCE_MAX_BYTES", "PIPELINED_RING_FROM_BYTES"]

RING_UP_TO = 8
"""AUTO sums in the ring's order up to this many workers, in halving/doubling's beyond (2·log2(n) rounds
instead of 2·(n-1) for the same bytes). RING sums in the ring's order at any size."""

GATHER_REDUCE_UP_TO_WORKERS = 16
"""Gather-reduce sends n-1 messages per rank: beyond this many workers halving/doubling's rounds cost less."""

GATHER_REDUCE_MAX_BYTES = 256 << 10
"""Gather-reduce runs while each rank sends at most this much in all (message bytes x (workers - 1)): measured
on 2 and 4 local processes (docs/collectives.md), it beat the ring up to about this volume over both transports."""

PIPELINED_RING_FROM_BYTES = 4 << 20
"""Ring-order messages of at least this many bytes run the pipelined ring (segments overlap)."""


@dataclass(frozen=True)
class AllReduceAlgorithm:
    """An algorithm as chosen: ``name`` (what the trace records), ``run(inst, flat)``, and ``total(flats)``: the
    sum it gives every rank from all ranks' inputs, bit for bit (its order of additions, for ``ClosedForm``)."""

    name: str
    run: Callable[[Instance, Any], Any]
    total: Callable[[Sequence[Any]], Any]


_RING = AllReduceAlgorithm("ring", allreduce_ring, ring_order_total)
_PIPELINED_RING = AllReduceAlgorithm("pipelined_ring", allreduce_ring_pipelined, ring_order_total)
_HALVING_DOUBLING = AllReduceAlgorithm("halving_doubling", allreduce_halving_doubling, halving_doubling_order_total)
_GATHER_REDUCE = {order: AllReduceAlgorithm(f"gather_reduce({order} order)",
                                            partial(allreduce_gather_reduce, order=order), ORDERS[order])
                  for order in ("ring", "halving_doubling")}


def choose_all_reduce(nbytes: int, workers: int, implementation: CommunicationImplementation
                      ) -> AllReduceAlgorithm:
    """The algorithm for one packed all-reduce of ``nbytes`` bytes over ``workers`` workers."""
    if nbytes < 0 or workers < 1:
        raise ValueError(f"choose_all_reduce needs nbytes >= 0 and workers >= 1; got nbytes={nbytes}, "
                         f"workers={workers}")
    ring_order = implementation == CommunicationImplementation.RING or workers <= RING_UP_TO
    if (implementation != CommunicationImplementation.RING and 1 < workers <= GATHER_REDUCE_UP_TO_WORKERS
            and nbytes * (workers - 1) <= GATHER_REDUCE_MAX_BYTES):
        return _GATHER_REDUCE["ring" if ring_order else "halving_doubling"]
    if not ring_order:
        return _HALVING_DOUBLING
    return _PIPELINED_RING if nbytes >= PIPELINED_RING_FROM_BYTES else _RING
