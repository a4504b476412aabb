"""``ReplicaContext``: what a replica function sees inside ``strategy.run``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import errors, nest
from ..aggregation import ReduceOp
from ..callsite import user_call_site
from ..collective.communicator import FIX_DESYNC
from ..collective.request_kind import requesting
from ..communication import Options
from ..tensor import IndexedSlices, as_tensor
from . import context
from .kernel_dtypes import check_addn_inputs, check_reducible
from .one_device import check_batch_placement
from .regroup import regroup, select_replica
from .replica_pool import MERGE_CALL, SyncRequest
from .scatter import reduce_slices

if TYPE_CHECKING:
    from .strategy import Strategy

__all__ = ["ReplicaContext", "checked_all_reduce", "reduce_replica_leaves"]


class ReplicaContext:
    """Replica ``local_id`` of this worker; its global id is ``worker_rank * local_replicas + local_id``."""

    def __init__(self, strategy: "Strategy", local_id: int, in_run: bool = False) -> None:
        self._strategy = strategy
        self._local_id = local_id
        self._in_run = in_run  # made by ``strategy.run`` (TF's default strategy makes one there too)

    @property
    def strategy(self) -> "Strategy":
        return self._strategy

    @property
    def num_replicas_in_sync(self) -> int:
        return self._strategy.num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self) -> Any:
        """This replica's global id: an int32 scalar inside ``strategy.run`` (TF returns a constant int32
        tensor there, even for the default strategy), a plain 0 in the default replica context."""
        ext = self._strategy.extended
        replica_id = ext._rank * len(ext._devices) + self._local_id
        return replica_id if self._strategy._is_default and not self._in_run else np.int32(replica_id)

    @property
    def devices(self) -> Any:
        """This replica's device as TF gives it: ``('',)`` in the default replica context (no device scope),
        ``(device,)`` under OneDeviceStrategy, and, as TF's mirrored replica context returns its entry of
        ``worker_devices_by_replica``, ``[[device]]`` under Mirrored and MWMS."""
        if self._strategy._is_default:
            return ("",)
        device = self._strategy.extended._devices[self._local_id]
        return (device,) if self._strategy._single_plain else [[device]]

    def _sync(self, kind: str, payload: Any, handler: Callable[[list[SyncRequest]], list[Any]]) -> Any:
        request = SyncRequest(kind, payload, user_call_site(), handler)
        return self._strategy.extended._pool.sync(self._local_id, request)

    def all_reduce(self, reduce_op: ReduceOp | str, value: Any, options: Options | None = None) -> Any:
        """Reduce ``value`` (a nest of arrays) over all replicas of all workers; every replica gets the result.
        IndexedSlices (sparse gradients) combine by concatenating every replica's rows (MEAN scales them)."""
        op = ReduceOp.coerce(reduce_op)
        ext = self._strategy.extended
        ext._options.merge(options)  # validates options, as TF does even for one replica
        flat = nest.flatten(value)
        _check_python_numbers(self._strategy, flat, "all_reduce")
        leaves = [x if isinstance(x, IndexedSlices) else as_tensor(x) for x in flat]
        if self.num_replicas_in_sync == 1:  # TF: a one-replica all-reduce is the identity (dtype kept)
            if ext._is_mirrored:  # after MirroredStrategy's batch check, which one device runs too
                check_batch_placement([[leaf] for leaf in leaves])
            return nest.pack_sequence_as(value, leaves)

        def handler(requests: list[SyncRequest]) -> list[Any]:
            structures = _same_structures(requests)
            by_leaf = [[r.payload[1][i] for r in requests] for i in range(len(requests[0].payload[1]))]
            results = reduce_replica_leaves(self._strategy, op, by_leaf, requests[0].site, options)
            return _results_per_replica(ext, structures, results)

        return self._sync(f"all_reduce({op.name})", (value, leaves), handler)

    def all_gather(self, value: Any, axis: int, options: Options | None = None) -> Any:
        """Concatenate ``value`` (a nest) from all replicas along ``axis``, in replica-id order. Python numbers
        are not gathered: each comes back as a tensor of itself, as in TF."""
        flat = nest.flatten(value)
        _check_python_numbers(self._strategy, flat, "all_gather")
        if any(is_python_number(x) for x in flat):
            tensors = [x for x in flat if not is_python_number(x)]
            gathered = iter(self.all_gather(tensors, axis, options) if tensors else ())
            return nest.pack_sequence_as(value, [as_tensor(x) if is_python_number(x) else next(gathered) for x in flat])
        leaves = [as_tensor(x) for x in flat]
        if self.num_replicas_in_sync == 1:
            return nest.pack_sequence_as(value, leaves)
        ext = self._strategy.extended

        def handler(requests: list[SyncRequest]) -> list[Any]:
            structures = _same_structures(requests)
            by_leaf = [[r.payload[1][i] for r in requests] for i in range(len(requests[0].payload[1]))]
            results = ext._gather_leaves(by_leaf, axis, requests[0].site, options)
            return _results_per_replica(ext, structures, results)

        return self._sync(f"all_gather(axis={axis})", (value, leaves), handler)

    def merge_call(self, merge_fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None) -> Any:
        """Pause all replicas, call ``merge_fn(strategy, *grouped_args)`` once in cross-replica context,
        and give each replica its part of the result."""
        strategy = self._strategy

        def handler(requests: list[SyncRequest]) -> list[Any]:
            fn = requests[0].payload[0]
            grouped_args = regroup([r.payload[1] for r in requests])
            grouped_kwargs = regroup([r.payload[2] for r in requests])
            with context.enter(strategy, None), strategy.extended._placement.scope(0):
                result = fn(strategy, *grouped_args, **grouped_kwargs)
            return [select_replica(k, result) for k in range(len(requests))]

        return self._sync(MERGE_CALL, (merge_fn, tuple(args), dict(kwargs or {})), handler)

    def _check_variable_update(self, name: str, kind: str) -> None:
        """Nothing: a replica may update a distributed variable (a stacked batch-safe function may not)."""

    def __repr__(self) -> str:
        return f"ReplicaContext(replica_id_in_sync_group={self.replica_id_in_sync_group})"


def reduce_replica_leaves(strategy: "Strategy", op: ReduceOp, by_leaf: list[list[Any]], site: str,
                          options: Options | None) -> list[Any]:
    """One all-reduce of every leaf over all replicas (``by_leaf[i][k]``: leaf i of local replica k), as a replica
    context's ``all_reduce`` hands it to the group; shared by ``strategy.run`` and stacked steps (``stacked_run``)."""
    ext = strategy.extended
    dense = [leaf for leaf in by_leaf if not isinstance(leaf[0], IndexedSlices)]
    one_device = ext._is_mirrored and check_batch_placement(by_leaf) and ext._int32_on_one_device
    with requesting("all_reduce"):
        reduced = iter(checked_all_reduce(ext, op, dense, site, options, addn=one_device) if dense else ())
    return [reduce_slices(strategy, op, leaf, site) if isinstance(leaf[0], IndexedSlices) else next(reduced)
            for leaf in by_leaf]


def _results_per_replica(ext: Any, structures: list[Any], results: list[Any]) -> list[Any]:
    """Each replica's own copy of the collective's results (a new view; on its GPU when it has one)."""
    put = ext._placement.put
    if len(results) == 1 and not nest.is_nested(structures[0]):  # one leaf (per replica: the same structure)
        return [_own(put(results[0], k)) for k in range(len(structures))]
    return [nest.pack_sequence_as(s, [_own(put(r, k)) for r in results]) for k, s in enumerate(structures)]


def _own(result: Any) -> Any:
    """A replica's own object for a shared result: a new array view, or new IndexedSlices over new views."""
    if isinstance(result, IndexedSlices):
        return IndexedSlices(result.values.view(), result.indices.view(), result.dense_shape)
    return result.view()


def is_python_number(value: Any) -> bool:
    """Whether ``value`` is a Python bool, int or float (not a NumPy scalar)."""
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def _check_python_numbers(strategy: Any, flat: list[Any], what: str) -> None:
    """TF's errors for Python numbers among a collective's leaves ``flat``: MultiWorkerMirroredStrategy finds no
    destination for them; MirroredStrategy's all-reduce reads their dtype (its all-gather hands them back, see
    ``all_gather``); the default strategy takes them as tensors."""
    numbers = [leaf for leaf in flat if is_python_number(leaf)]
    if not numbers or strategy._single_plain:  # (TF's default strategy converts them to tensors)
        return
    if not strategy.extended._is_mirrored:
        raise ValueError("destinations must be one of a `DistributedValues` object, a tf.Variable object, or a device "
                         f"string.\nFix: pass tensors to {what} (e.g. tf.constant({numbers[0]!r})), not Python numbers.")
    if what == "all_reduce":
        raise AttributeError(f"'{type(numbers[0]).__name__}' object has no attribute 'dtype'")


def _same_structures(requests: list[SyncRequest]) -> list[Any]:
    """The value structure of each replica's request; they must all match."""
    structures = [r.payload[0] for r in requests]
    first = _flat_signature(structures[0])
    if first is not None and all(_flat_signature(s) == first for s in structures[1:]):
        return structures
    for k, s in enumerate(structures[1:], start=1):
        try:
            nest.assert_same_structure(structures[0], s, check_types=False)
        except ValueError as exc:
            raise errors.CollectiveTypeMismatchError(
                f"Replicas passed differently structured values to {requests[0].kind}: replica 0 at "
                f"{requests[0].site} vs replica {k} at {requests[k].site}: {exc}\n{FIX_DESYNC}") from None
    return structures


def _flat_signature(structure: Any) -> tuple | None:
    """(container type, length) of a flat tuple/list or a leaf; None for deeper nests (checked in full)."""
    if not nest.is_nested(structure):
        return (None, 0)
    if nest.is_flat_sequence(structure):
        return (type(structure), len(structure))
    return None


def checked_all_reduce(ext: Any, op: ReduceOp, leaves: list[list[Any]], site: str, options: Options | None,
                addn: bool) -> list[Any]:
    """The group's all-reduce after TF's dtype checks; ``addn`` marks TF's single-worker reduce, one local AddN
    (its dtype list and errors, and a mismatch poisons nothing)."""
    check_reducible(leaves, addn)
    if addn:
        check_addn_inputs(leaves)
    return ext._group.all_reduce(op, leaves, site, options)
