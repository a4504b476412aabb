"""``@batch_safe``: a user's replica function that ``strategy.run`` may call once for all local replicas, stacked.

A function is batch-safe when computing on its inputs stacked on a leading replica axis gives, on each slice of its
outputs, exactly what it computes for that replica alone (``np.matmul`` of (replica, batch, in) arrays by a weight
matrix is; a sum over the batch written ``x.sum(axis=0)`` is not: write ``axis=1``). Its replica context then
works on stacked values too: ``all_reduce`` takes them (the replica axis first) and returns the result repeated
along that axis; ``merge_call`` hands the merge function each replica's slice (per-replica values), as it would
get them from separate replicas; ``replica_id_in_sync_group`` is the vector of the local replicas' ids. Every array
passed to ``merge_call`` or returned carries the replica axis first. Variables are read, not updated, in replica
context (update them in ``merge_call``, as optimizers do); other collectives raise (remove ``@batch_safe``).

``strategy.run`` stacks a batch-safe function when the worker has several local replicas on CPUs and every
per-replica argument holds arrays of one shape and dtype on all of them; otherwise (a partial batch, GPUs) it
calls the function once per replica, as for any function. Results are bit-identical to per-replica calls when
the function really is batch-safe (the collectives get each replica's share as its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .. import nest
from ..aggregation import ReduceOp
from ..callsite import user_call_site
from ..communication import Options
from . import context
from .regroup import select_replica
from .replica_context import ReplicaContext
from .stacked_run import StackedReplicas, run_stacked, stack_parts
from .values import PerReplica, ReplicaValues

if TYPE_CHECKING:
    from .strategy import Strategy

__all__ = ["batch_safe", "is_batch_safe", "run_batch_safe", "stacked_replicas", "slice_replicas_of", "NOT_STACKED"]

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__mirrorlab_batch_safe__"
NOT_STACKED = object()  # run_batch_safe's answer when the call must run per replica


def batch_safe(fn: F) -> F:
    """Declare ``fn`` batch-safe (see the module): ``strategy.run(fn, ...)`` may run it stacked. Returns ``fn``."""
    if not callable(fn):
        raise TypeError(f"batch_safe takes a function, got {type(fn).__name__}.\nFix: decorate the replica function "
                        "itself: @batch_safe above its def.")
    setattr(fn, _MARK, True)
    return fn


def is_batch_safe(fn: Any) -> bool:
    """Whether ``fn`` was declared with ``@batch_safe``."""
    return getattr(fn, _MARK, False) is True


def stacked_replicas() -> int | None:
    """The number of local replicas on the leading axis of the values a ``@batch_safe`` function run stacked sees,
    when this thread runs one (in its replica context); None elsewhere. Ops that reduce over a batch ask it to keep
    each replica's reduction its own."""
    frame = context.current_frame()
    replica = None if frame is None else frame.replica
    return replica._replicas.num_local if isinstance(replica, BatchSafeReplicaContext) else None


def run_batch_safe(strategy: "Strategy", fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``strategy.run(fn, args, kwargs)`` of a batch-safe ``fn`` as one stacked call; ``NOT_STACKED`` when it cannot
    stack (one local replica, GPUs, per-replica arguments of different shapes or dtypes)."""
    ext = strategy.extended
    n = len(ext._devices)
    if n < 2 or ext._placement.on_gpu:
        return NOT_STACKED
    stacked = _stacked_arguments((tuple(args), dict(kwargs)), n)
    if stacked is None:
        return NOT_STACKED

    def step(replicas: StackedReplicas) -> Any:
        with replicas.replica_context(BatchSafeReplicaContext(strategy, replicas)):
            result = fn(*stacked[0], **stacked[1])
        return _per_replica(result, n)
    return run_stacked(strategy, step)


def _stacked_arguments(structure: Any, n: int) -> Any:
    """``structure`` with each per-replica leaf (``ReplicaValues``) stacked on a new first axis; None when the
    replicas' components differ in shape or dtype (or are not arrays)."""
    leaves = nest.flatten(structure)
    out = []
    for leaf in leaves:
        if isinstance(leaf, ReplicaValues):
            parts = [np.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else None for v in leaf.values]
            if any(p is None for p in parts) or len({(p.shape, p.dtype) for p in parts}) != 1:
                return None
            leaf = stack_parts(parts)
        out.append(leaf)
    return nest.pack_sequence_as(structure, out)


def _per_replica(structure: Any, n: int) -> Any:
    """A stacked structure as ``strategy.run`` regroups the replicas' values: each array with the replica axis
    first as per-replica values of its slices (other leaves, the same for every replica, as they are)."""
    return nest.map_structure(lambda v: PerReplica([v[k] for k in range(n)]) if _stacked(v, n) else v, structure)


_SLICED_TYPES: tuple[type, ...] = (np.ndarray,)  # stacked values handed back to the replicas slice by slice


def slice_replicas_of(cls: type) -> None:
    """Hand stacked values of ``cls`` (array-like: ``ndim``, ``shape``, indexing on the first axis; the TF
    look-alike's tape values) back from a stacked run as each replica's slice, as arrays are."""
    global _SLICED_TYPES
    _SLICED_TYPES = (*_SLICED_TYPES, cls)


def _stacked(value: Any, n: int) -> bool:
    return isinstance(value, _SLICED_TYPES) and value.ndim >= 1 and value.shape[0] == n


class BatchSafeReplicaContext(ReplicaContext):
    """The replica context of a batch-safe function run stacked: values carry the local replicas on their first
    axis (see the module)."""

    def __init__(self, strategy: "Strategy", replicas: StackedReplicas) -> None:
        super().__init__(strategy, 0, in_run=True)  # (variables read replica 0's copy: mirrored copies agree)
        self._replicas = replicas

    @property
    def replica_id_in_sync_group(self) -> Any:
        """The local replicas' global ids, one per slice of the stacked axis (int32)."""
        n = self._replicas.num_local
        return (self._strategy.extended._rank * n + np.arange(n)).astype(np.int32)

    def all_reduce(self, reduce_op: ReduceOp | str, value: Any, options: Options | None = None) -> Any:
        """Reduce each stacked leaf over all replicas of all workers; the result repeated along the replica axis."""
        n = self._replicas.num_local
        leaves = [np.asarray(leaf) for leaf in nest.flatten(value)]
        for leaf in leaves:
            if not _stacked(leaf, n):
                raise ValueError(f"all_reduce in a @batch_safe function got a value of shape {leaf.shape}: stacked "
                                 f"values carry the {n} local replicas on their first axis.\nFix: reduce values "
                                 "computed from the stacked inputs (replica axis first), or remove @batch_safe.")
        results = self._replicas.all_reduce(reduce_op, [list(leaf) for leaf in leaves], options, user_call_site())
        return nest.pack_sequence_as(value, [np.broadcast_to(r, (n, *np.shape(r))) for r in results])

    def all_gather(self, value: Any, axis: int, options: Options | None = None) -> Any:
        raise NotImplementedError("all_gather is not supported in a @batch_safe function run stacked.\nFix: remove "
                                  "@batch_safe (the function then runs once per replica).")

    def merge_call(self, merge_fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None) -> Any:
        """``merge_fn(strategy, *args, **kwargs)`` once, each stacked argument given as per-replica values; a
        per-replica result comes back stacked."""
        n = self._replicas.num_local
        grouped_args, grouped_kwargs = _per_replica(tuple(args), n), _per_replica(dict(kwargs or {}), n)
        result = self._replicas.merge_call(lambda strategy: merge_fn(strategy, *grouped_args, **grouped_kwargs))
        return nest.map_structure(
            lambda v: np.stack([np.asarray(select_replica(k, v)) for k in range(n)])
            if isinstance(v, ReplicaValues) else v, result)

    def _check_variable_update(self, name: str, kind: str) -> None:
        raise NotImplementedError(f"{kind} of {name} in replica context is not supported in a @batch_safe function "
                                  "run stacked (each replica would update its own copy).\nFix: update variables in "
                                  "merge_call, as optimizers do, or remove @batch_safe.")

    def _sync(self, kind: str, payload: Any, handler: Any) -> Any:
        raise NotImplementedError(f"{kind} is not supported in a @batch_safe function run stacked.\nFix: remove "
                                  "@batch_safe (the function then runs once per replica).")
