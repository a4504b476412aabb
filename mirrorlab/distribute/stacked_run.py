"""One step of all this worker's local replicas as a single ("stacked") computation on the worker's own thread.

``run_stacked`` keeps what ``strategy.run`` does around the replica function (the step count, the fault hook, the
call site, the simulator's seeded replica-order draws, the divergence notes) and gives the step the sync points of
``strategy.run``: ``all_reduce`` hands every local replica's share to the collective group as its own, and
``merge_call`` runs once in cross-replica context. So a stacked step that computes each replica's share as the
replica would gets bit-identical results, without a thread handoff per replica and sync point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..aggregation import ReduceOp
from ..callsite import calls_from, user_call_site
from ..communication import Options
from ..tensor import root_array
from . import context
from .extended_api import CROSS_REPLICA_REQUIRED
from .replica_context import ReplicaContext, reduce_replica_leaves
from .replica_pool import ReplicaPool, SyncRequest

if TYPE_CHECKING:
    from .strategy import Strategy

__all__ = ["StackedReplicas", "run_stacked", "stack_parts"]


class StackedReplicas:
    """What a stacked step sees: each local replica's context (entered one at a time, for per-replica state such as
    metric copies) and ``strategy.run``'s sync points, ``all_reduce`` and ``merge_call``."""

    def __init__(self, strategy: "Strategy", site: str) -> None:
        self.strategy = strategy
        self.site = site
        self._ext = strategy.extended

    @property
    def num_local(self) -> int:
        """How many replicas this worker runs (the size of the stacked axis)."""
        return len(self._ext._devices)

    def replica(self, k: int) -> Any:
        """Run the block as local replica ``k`` inside ``strategy.run`` (its variable copies, its replica id)."""
        return self.replica_context(ReplicaContext(self.strategy, k, in_run=True))

    @contextmanager
    def replica_context(self, replica_context: ReplicaContext) -> Iterator[None]:
        """Run the block in ``replica_context`` (what ``get_replica_context`` returns there)."""
        with context.enter(self.strategy, replica_context):
            yield

    def all_reduce(self, reduce_op: ReduceOp | str, by_leaf: list[list[Any]], options: Options | None = None,
                   site: str | None = None) -> list[Any]:
        """Each leaf reduced over all replicas of all workers (``by_leaf[i][k]``: leaf i of local replica k), exactly
        as the replicas' own ``all_reduce`` of those leaves, called at ``site`` (default: where the step was run);
        one result per leaf (every replica's)."""
        results = reduce_replica_leaves(self.strategy, ReduceOp.coerce(reduce_op), by_leaf, site or self.site, options)
        self._next_stretch()
        return results

    def merge_call(self, merge_fn: Callable[..., Any], *args: Any) -> Any:
        """``merge_fn(strategy, *args)`` once in cross-replica context, as a replica's ``merge_call`` runs it."""
        with context.enter(self.strategy, None), self._ext._placement.scope(0):
            result = merge_fn(self.strategy, *args)
        self._next_stretch()
        return result

    def _next_stretch(self) -> None:
        """The replica pool draws the order of its next stretch (the simulator from its seed) after each sync point:
        drawn here too, so a run's later seeded choices do not depend on whether its steps were stacked."""
        if self.num_local > 1:
            self._ext._runtime.replica_order(list(range(self.num_local)))


class _NoReplicaThreads(ReplicaPool):
    """The replica pool during a stacked step, which has no replica threads to pause: a sync point reached other
    than through ``StackedReplicas`` (a variable created, or a mirrored one updated, in replica context) raises
    instead of waiting for replicas that do not exist."""

    def __init__(self, size: int) -> None:
        self.size = size

    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        raise RuntimeError("strategy.run inside a stacked step.\nFix: call strategy.run outside the step.")

    def sync(self, local_id: int, request: SyncRequest) -> Any:
        raise NotImplementedError(f"{request.kind} at {request.site} needs the replicas to meet, which a stacked step "
                                  "cannot do.\nFix: create and update variables in cross-replica context (merge_call)"
                                  ", or run the function per replica (without @batch_safe).")


def run_stacked(strategy: "Strategy", step: Callable[[StackedReplicas], Any]) -> Any:
    """``step(replicas)`` once for all local replicas, with ``strategy.run``'s bookkeeping around it; returns what
    ``step`` returns."""
    strategy._require_cross_replica(CROSS_REPLICA_REQUIRED)
    ext = strategy.extended
    with ext._one_step():
        replicas = StackedReplicas(strategy, user_call_site())
        replicas._next_stretch()  # (the pool's first stretch)
        pool, ext._pool = ext._pool, _NoReplicaThreads(ext._pool.size)
        try:
            with context.enter(strategy, None), calls_from(replicas.site):
                result = step(replicas)
        finally:
            ext._pool = pool
    return result


def stack_parts(parts: Sequence[np.ndarray]) -> np.ndarray:
    """``np.stack(parts)``, the replicas' parts of one value on a new first axis; without copying when the parts
    already lie one after the other in one array's memory (a batch split per replica), as a view of it, writeable
    as the parts are (so a step that writes into its input writes where each replica would)."""
    first = parts[0]
    size, shape, dtype = first.nbytes, first.shape, first.dtype
    root = root_array(first)
    address = first.__array_interface__["data"][0]
    writeable = True
    for part in parts:
        if (not size or part.shape != shape or part.dtype != dtype or not part.flags.c_contiguous
                or part.__array_interface__["data"][0] != address or root_array(part) is not root):
            return np.stack(parts)
        address += size
        writeable = writeable and part.flags.writeable
    return np.lib.stride_tricks.as_strided(first, (len(parts), *shape), (size, *first.strides), writeable=writeable)

