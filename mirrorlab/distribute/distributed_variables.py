"""Distributed variables: ``MirroredVariable`` (ON_WRITE, one copy per local replica kept equal) and
``SyncOnReadVariable`` (ON_READ, copies aggregated when read across replicas), with TF 2.21's update and read rules in
both contexts, and ``ComponentVariable``, one local copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import nest
from ..aggregation import ReduceOp, VariableAggregation, VariableSynchronization
from ..callsite import user_call_site
from ..collective.group import mean_of_sum
from ..collective.request_kind import requesting
from ..tensor import (STRING, dtype_name, frozen, is_string, like)
from . import context
from .regroup import regroup
from .replica_pool import SyncRequest
from .scatter import UNAGGREGATABLE, check_scatter_kernel, is_scatter
from .scatter_nd import PER_COPY_ND_KINDS, SCATTER_ND_KINDS
from .values import DistributedValues, Mirrored, ReplicaValues
from .variables import Variable, _convert, _new_tensor, _var_repr

if TYPE_CHECKING:
    from .strategy import Strategy

__all__ = ["ComponentVariable", "DistributedVariable", "MirroredVariable", "SyncOnReadVariable"]


def _from_variable(name: str) -> property:
    """A read-only property of a local copy that returns its distributed variable's ``name`` attribute."""
    return property(lambda self: getattr(self._var, name), doc=f"The distributed variable's ``{name}``.")


class ComponentVariable(Variable):
    """The copy of a distributed variable on one local replica (``experimental_local_results``), and what an
    update of one copy returns: a ``Variable`` (TF's component and ``_UnreadVariable`` are plain variables) whose
    value lives in its distributed variable."""

    def __init__(self, var: "DistributedVariable", local_id: int) -> None:
        self._var = var
        self._local_id = local_id

    def _read(self) -> Any:
        return self._var._components[self._local_id]

    @property
    def name(self) -> str:
        base = self._var.name[:-2]
        return self._var.name if self._local_id == 0 else f"{base}/replica_{self._local_id}:0"

    @property
    def device(self) -> str:
        return self._var._strategy.extended._devices[self._local_id]

    # What a copy says about itself is what its distributed variable says.
    shape = _from_variable("shape")
    dtype = _from_variable("dtype")
    trainable = _from_variable("trainable")
    _created_trainable = _from_variable("_created_trainable")
    synchronization = _from_variable("synchronization")
    aggregation = _from_variable("aggregation")
    constraint = _from_variable("constraint")

    def _update(self, kind: str, value: Any, read_value: bool) -> Any:
        """Update only this copy (TF's component variables are plain variables on their device)."""
        self._var._set_local(self._local_id, kind, value)
        return self if read_value else None

    def __repr__(self) -> str:
        return _var_repr(self.name, self.shape, self.dtype, self._read())


class DistributedVariable(Variable):
    """A variable with one copy per local replica; which copy is read depends on the context."""

    @property
    def sparse_read(self) -> Any:
        """Absent, as on TF's distributed variables (read a local copy's, or gather the value)."""
        raise AttributeError(f"'{type(self).__name__}' object has no attribute 'sparse_read'")

    @property
    def gather_nd(self) -> Any:
        """Absent, as on TF's distributed variables."""
        raise AttributeError(f"'{type(self).__name__}' object has no attribute 'gather_nd'")

    # TF's distributed variables convert to no Python number, and define no truth value (so Python's default: True)
    def __float__(self) -> float:
        raise TypeError(f"float() argument must be a string or a real number, not '{type(self).__name__}'"
                        "\nFix: float(variable.numpy()), or read it first with variable.read_value().")

    def __int__(self) -> int:
        raise TypeError(f"int() argument must be a string, a bytes-like object or a real number, not "
                        f"'{type(self).__name__}'\nFix: int(variable.numpy()).")

    def __complex__(self) -> complex:
        raise TypeError(f"complex() first argument must be a string or a number, not '{type(self).__name__}'"
                        "\nFix: complex(variable.numpy()).")

    def __bool__(self) -> bool:
        return True

    def __init__(self, strategy: "Strategy", value: Any, name: str | None, trainable: bool,
                 synchronization: VariableSynchronization, aggregation: VariableAggregation,
                 constraint: Any = None) -> None:
        self._strategy = strategy
        self._init_common(value, name, trainable, synchronization, aggregation, constraint)
        self._components = strategy.extended._placement.replicate(value)

    @property
    def values(self) -> tuple[ComponentVariable, ...]:
        return tuple(ComponentVariable(self, k) for k in range(len(self._components)))

    @property
    def device(self) -> str:
        """The reading replica's device inside ``run`` (the updated copy's inside an update), else the first local
        device."""
        return self._strategy.extended._devices[self._context_copy() or 0]

    @property
    def distribute_strategy(self) -> "Strategy":
        return self._strategy

    def _replica_id(self) -> int | None:
        """The local replica reading this variable, or None in cross-replica context."""
        frame = context.current_frame()
        if frame is not None and frame.replica is not None and frame.strategy is self._strategy:
            return frame.replica._local_id
        return None

    def _context_copy(self) -> int | None:
        """The copy this context works on: the replica's inside ``run``, the one being updated inside
        ``extended.update``/``update_non_slot`` (TF's UpdateContext); None in plain cross-replica context."""
        frame = context.current_frame()
        if frame is None or frame.strategy is not self._strategy:
            return None
        return frame.replica._local_id if frame.replica is not None else frame.update

    def _read(self) -> Any:
        local_id = self._context_copy()
        if local_id is not None:
            return self._components[local_id]
        return self._cross_replica_value()

    def _cross_replica_value(self) -> Any:
        return self._components[0]

    def _relocate(self, reference: Any) -> None:
        """Move this replica's copy (all copies in cross-replica context) next to ``reference``."""
        local_id = self._context_copy()
        ids = range(len(self._components)) if local_id is None else (local_id,)
        components = list(self._components)
        for k in ids:
            components[k] = frozen(like(components[k], reference))
        self._components = components

    def _set_all(self, kind: str, value: Any) -> None:
        """Apply one update to every local copy (computed once while the copies are shared)."""
        first = self._components[0]
        if all(c is first for c in self._components):
            self._components = [self._new_value(first, kind, value)] * len(self._components)
        else:
            self._components = [self._new_value(c, kind, value) for c in self._components]

    def _set_each(self, kind: str, values: Sequence[Any]) -> None:
        """Apply ``kind`` of ``values[k]`` to local copy k: each replica's own update (a distributed value's parts in
        cross-replica context, or all replicas' updates of a stacked step at once)."""
        self._components = [self._new_value(c, kind, v) for c, v in zip(self._components, values)]

    def _set_local(self, local_id: int, kind: str, value: Any) -> None:
        components = list(self._components)
        components[local_id] = self._new_value(components[local_id], kind, value)
        self._components = components

    def _update(self, kind: str, value: Any, read_value: bool) -> Any:
        if kind in SCATTER_ND_KINDS:
            return self._scatter_nd_copy(kind)._update(kind, value, read_value)
        local_id = self._replica_id()
        if local_id is not None:
            context.current_frame().replica._check_variable_update(self.name, kind)
            self._update_replica(local_id, kind, value)
            return self._replica_result(local_id) if read_value else None
        updating = self._context_copy()
        if updating is not None:  # inside an update of one copy, TF writes that copy only
            self._set_local(updating, kind, value)
            return ComponentVariable(self, updating) if read_value else None
        self._update_cross_replica(kind, value)
        return self._cross_replica_result() if read_value else None

    def _scatter_nd_copy(self, kind: str) -> "ComponentVariable":
        """The copy a ``scatter_nd_*`` call updates. TF's distributed variables have no scatter_nd_update/add/sub
        (NotImplementedError) and reach scatter_nd_max/min by delegating to one copy: the context's (replica or
        update), in cross-replica context the one ``_cross_replica_copy`` names. No aggregation, no sync."""
        if kind not in PER_COPY_ND_KINDS:
            raise NotImplementedError(
                f"{kind} is not supported on distributed variables (TF 2.21's {type(self).__name__} raises "
                f"NotImplementedError).\nFix: update each copy with strategy.extended.update(v, lambda copy: "
                f"copy.{kind}(indices, updates)), or use scatter_update/scatter_add with tf.IndexedSlices.")
        local_id = self._context_copy()
        return ComponentVariable(self, self._cross_replica_copy(kind) if local_id is None else local_id)

    def _cross_replica_copy(self, kind: str) -> int:
        """The copy TF's attribute delegation reaches in cross-replica context: the first one."""
        return 0

    def _cross_replica_result(self) -> Any:
        """What a cross-replica update returns: with one local copy that copy, read when used (TF's plain
        ``_UnreadVariable``); with several a Mirrored of their new values (TF 2.21's MirroredStrategy)."""
        if len(self._components) == 1:
            return ComponentVariable(self, 0)
        return Mirrored([_new_tensor(c) for c in self._components])

    def _replica_result(self, local_id: int) -> Any:
        """What an update returns in replica ``local_id``: its own copy, read when used (TF's
        ``_UnreadVariable``), so ``run`` gives one result per replica."""
        return ComponentVariable(self, local_id)

    def _update_cross_replica(self, kind: str, value: Any) -> None:
        # A distributed value, or another distributed variable, gives each copy its own replica's part.
        if isinstance(value, (ReplicaValues, DistributedVariable)):
            self._set_each(kind, value.values)
        else:
            self._set_all(kind, value)

    def _update_replica(self, local_id: int, kind: str, value: Any) -> None:
        if isinstance(value, ReplicaValues):
            raise TypeError("Cannot use DistributedValues to update variables in replica context.")
        self._set_local(local_id, kind, value)

    def __repr__(self) -> str:
        body = ",\n".join(f"  {k}: {c!r}" for k, c in enumerate(self.values))
        return f"{type(self).__name__}:{{\n{body}\n}}"


DistributedValues.register(DistributedVariable)  # as in TF, where DistributedVariable subclasses DistributedValues


class MirroredVariable(DistributedVariable):
    """ON_WRITE: replica updates are aggregated (SUM/MEAN across all replicas, or the worker's first
    replica) and written to every copy. With aggregation NONE a replica update changes only its own copy,
    so copies may silently diverge, exactly as in TF (diagnostics flags it)."""

    def _update_replica(self, local_id: int, kind: str, value: Any) -> None:
        if self._aggregation == VariableAggregation.NONE:
            super()._update_replica(local_id, kind, value)
            self._strategy.extended._note_unsynced_update(self, user_call_site())
            return
        strategy = self._strategy
        agg = self._aggregation
        if is_scatter(kind) and strategy.extended._num_workers == 1:
            check_scatter_kernel(kind, self._dtype)  # one worker's rows combine whatever their dtype, then fail here

        def handler(requests: list[SyncRequest]) -> list[Any]:
            # As TF's merge_call: identical objects regroup to one plain value, then reduce_to applies.
            grouped = regroup([r.payload for r in requests])
            if agg == VariableAggregation.ONLY_FIRST_REPLICA:  # TF broadcasts the first replica's value
                reduced = strategy.extended._broadcast_value(strategy.experimental_local_results(grouped)[0])
            else:  # as reduce: a Python list leaf by leaf but under MWMS; IndexedSlices combine (see _reduce_leaves)
                op = ReduceOp.from_variable_aggregation(agg)
                whole = strategy._is_plain_nest(grouped)
                leaves = [grouped] if whole else nest.flatten(grouped)
                reduced = strategy._reduce_leaves(op, leaves, requests[0].site)
                reduced = reduced[0] if whole else nest.pack_sequence_as(grouped, reduced)
            self._set_all(kind, reduced)
            return [None] * len(requests)

        strategy.extended._pool.sync(local_id, SyncRequest(f"{kind}({self._name})", value, user_call_site(), handler))

    def _update(self, kind: str, value: Any, read_value: bool) -> Any:
        """TF refuses the scatters that cannot combine replicas' rows for SUM/MEAN variables in both contexts."""
        if kind in UNAGGREGATABLE and self._aggregation in (VariableAggregation.SUM, VariableAggregation.MEAN):
            raise NotImplementedError(
                f"{kind} is only supported for mirrored variable (variable created within certain "
                f"`tf.distribute.Strategy` scope) with NONE or `ONLY_FIRST_REPLICA` aggregation, got: "
                f"{self._aggregation}.")
        return super()._update(kind, value, read_value)

    def _replica_result(self, local_id: int) -> Any:
        """With several local copies an aggregated update returns the new value as a tensor (TF groups the
        copies' updates); otherwise the replica's copy (see the base class)."""
        if self._aggregation == VariableAggregation.NONE or len(self._components) == 1:
            return super()._replica_result(local_id)
        return _new_tensor(self._components[local_id])


class SyncOnReadVariable(DistributedVariable):
    """ON_READ: each replica updates its own copy; a cross-replica read aggregates the copies over the
    cluster (a collective for SUM/MEAN, the worker's first copy for ONLY_FIRST_REPLICA)."""

    def _update(self, kind: str, value: Any, read_value: bool) -> Any:
        if is_scatter(kind):
            raise NotImplementedError(f"Variables with `synchronization=ON_READ` doesn't support `{kind}`")
        return super()._update(kind, value, read_value)

    def _update_replica(self, local_id: int, kind: str, value: Any) -> None:
        """A replica updates its own copy; TF reads a distributed value's dtype first (its AttributeError)."""
        if isinstance(value, ReplicaValues):
            raise AttributeError(f"'{type(value).__name__}' object has no attribute 'dtype'\nFix: in a replica "
                                 "function update the variable with this replica's tensor, not a distributed value.")
        super()._update_replica(local_id, kind, value)

    def _cross_replica_value(self) -> Any:
        """TF's ``strategy.reduce`` of the copies (a local AddN on one worker, a collective across workers; one
        copy on one worker is not reduced); the worker's first copy for ONLY_FIRST_REPLICA."""
        if self._aggregation == VariableAggregation.ONLY_FIRST_REPLICA:
            return self._components[0]
        op = ReduceOp.from_variable_aggregation(self._aggregation)
        with requesting("ON_READ read"):
            return self._strategy._reduce_leaves(op, [self], user_call_site())[0]

    def _update_cross_replica(self, kind: str, value: Any) -> None:
        """Every copy takes the value (SUM: the value over the replica count, so a read sums back to it). TF reads
        the value's dtype first (an AttributeError for distributed values) and SUM divides it with ``/`` (a
        TypeError for distributed values and Python lists)."""
        if self._aggregation == VariableAggregation.SUM:
            if kind != "assign":
                raise ValueError(f"SyncOnReadVariable does not support `{kind}` in cross-replica context when "
                                 "aggregation is set to `tf.VariableAggregation.SUM`.")
            if isinstance(value, (list, tuple, ReplicaValues)):
                raise TypeError(f"unsupported operand type(s) for /: '{type(value).__name__}' and 'int'\nFix: "
                                "assign a tensor (e.g. tf.constant(value)), the same one for every copy.")
            n = self._strategy.num_replicas_in_sync
            # TF divides the value by the replica count (Python numbers in Python, tensors of any number dtype as
            # tensors) and casts the quotient to the variable's dtype.
            if self._dtype != STRING and isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
                value = np.asarray(value / n).astype(self._dtype)
            else:
                value = _convert(value, STRING if self._dtype == STRING else None)
                if is_string(value.dtype) or value.dtype.kind == "b":
                    raise TypeError(f"`x` and `y` must have the same dtype, got tf.{dtype_name(value)} != tf.int32."
                                    f"\nFix: a {dtype_name(self._dtype)} ON_READ variable cannot be SUM-aggregated; "
                                    "use ONLY_FIRST_REPLICA.")
                value = mean_of_sum(value, n).astype(self._dtype, copy=False)
        elif isinstance(value, ReplicaValues):
            raise AttributeError(f"'{type(value).__name__}' object has no attribute 'dtype'\nFix: an ON_READ "
                                 "variable's copies take per-replica values inside strategy.run.")
        super()._update_cross_replica(kind, value)

    def _cross_replica_result(self) -> Any:
        return self._read()

    def _mean_of_lone_copy(self) -> bool:
        """True where TF's cross-replica reduce hands this variable's copy back instead of a value: MEAN under an
        MWMS of one worker with one device."""
        ext = self._strategy.extended
        return (self._aggregation == VariableAggregation.MEAN and not ext._is_mirrored and ext._num_workers == 1
                and len(self._components) == 1)

    def value(self) -> Any:
        """The aggregated value; where TF's reduce hands the lone copy back (``_mean_of_lone_copy``) that copy, a
        variable read when used."""
        if self._context_copy() is None and self._mean_of_lone_copy():
            return ComponentVariable(self, 0)
        return super().value()

    def _cross_replica_copy(self, kind: str) -> int:
        """TF delegates to what a cross-replica read gives: the first copy for ONLY_FIRST_REPLICA, and the lone copy
        ``_mean_of_lone_copy`` names; otherwise the aggregated value (NONE's ValueError, or a collective and then
        an AttributeError: a tensor has no ``kind``)."""
        if self._aggregation == VariableAggregation.ONLY_FIRST_REPLICA or self._mean_of_lone_copy():
            return 0
        value = self._cross_replica_value()
        raise AttributeError(f"'{type(value).__module__}.{type(value).__name__}' object has no attribute '{kind}'\n"
                             f"Fix: inside strategy.run each replica's {kind} updates its own copy.")

    def _restore_value(self, value: Any) -> None:
        self._update_cross_replica("assign", value)

