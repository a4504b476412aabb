"""``strategy.extended``'s public helpers from TF 2.21's ``StrategyExtended``: ``update``/``update_non_slot``,
``reduce_to``/``batch_reduce_to``, ``broadcast_to``, ``read_var``, ``call_for_each_replica``, the variable queries
(``value_container``, ``variable_created_in_scope``, ``colocate_vars_with``, ``non_slot_devices``) and
device facts (``worker_devices_by_replica``, ``experimental_require_static_shapes``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from .. import nest
from ..aggregation import ReduceOp
from ..callsite import user_call_site
from ..cluster.devices import canonical_device
from ..tensor import IndexedSlices, as_tensor, is_cupy
from . import context
from .regroup import regroup, select_replica
from .one_device import check_batch_placement
from .values import Mirrored, ReplicaValues
from .distributed_variables import ComponentVariable, DistributedVariable
from .variables import Variable, _ArrayLike, _new_tensor

if TYPE_CHECKING:
    from .strategy import Strategy

__all__ = ["ExtendedApi", "CROSS_REPLICA_REQUIRED"]

CROSS_REPLICA_REQUIRED = "Method requires being in cross-replica context, use get_replica_context().merge_call()"
BAD_DESTINATIONS = "destinations must be one of a `DistributedValues` object, a tf.Variable object, or a device string."


class ExtendedApi:
    """The public helpers of ``strategy.extended`` (mixed into ``StrategyExtended``)."""

    _devices: tuple[str, ...]
    _is_mirrored: bool
    _container: Callable[[], "Strategy"]
    _placement: Any

    def _strategy(self) -> "Strategy":
        """The strategy these helpers belong to."""
        return self._container()

    def update(self, var: DistributedVariable, fn: Callable[..., Any], args: Sequence[Any] = (),
               kwargs: dict | None = None, group: bool = True) -> Any:
        """``fn(copy, *args, **kwargs)`` on each local copy of ``var`` in cross-replica context (each copy
        gets its replica's part of PerReplica arguments); from a replica function, through ``merge_call``.
        Grouped results are a Mirrored of the new values (the value itself with one copy); ungrouped ones
        are a tuple per copy."""
        frame = context.current_frame()
        if frame is not None and frame.replica is not None:
            return frame.replica.merge_call(
                lambda strategy, *a, **k: strategy.extended.update(var, fn, a, k, group),
                args=tuple(args), kwargs=kwargs)
        if not isinstance(var, DistributedVariable) and self._strategy()._single_plain:
            result = fn(var, *args, **(kwargs or {}))  # TF's default strategy: one call on the variable itself
            return result if group else nest.map_structure(lambda leaf: (leaf,), result)
        if not isinstance(var, DistributedVariable):
            raise AssertionError(f"extended.update needs a variable created in a strategy's scope, got "
                                 f"{type(var).__name__} {getattr(var, 'name', var)!r}. Fix: create it inside "
                                 "`with strategy.scope():`, or update a plain variable directly.")
        strategy = self._strategy()
        kwargs = kwargs or {}
        results = []
        for k, copy in enumerate(var.values):
            with context.enter(strategy, None, update=k):
                results.append(fn(copy, *select_replica(k, tuple(args)), **select_replica(k, kwargs)))
        return self._group_updates(results, group)

    def update_non_slot(self, colocate_with: tuple[str, ...], fn: Callable[..., Any], args: Sequence[Any] = (),
                        kwargs: dict | None = None, group: bool = True) -> Any:
        """``fn(*args, **kwargs)`` once per device of ``colocate_with`` (what ``non_slot_devices`` returns), each
        call updating that device's copy of any distributed variable it touches (TF's UpdateContext) with its
        replica's part of PerReplica arguments; results are grouped as ``update``'s."""
        strategy = self._strategy()
        strategy._require_cross_replica(CROSS_REPLICA_REQUIRED)
        if not isinstance(colocate_with, tuple):
            raise AssertionError(f"update_non_slot takes the tuple of devices extended.non_slot_devices(var_list) "
                                 f"returns, got {type(colocate_with).__name__} {colocate_with!r}.")
        if not colocate_with:
            raise IndexError("list index out of range\nFix: pass extended.non_slot_devices(var_list), which names "
                             "every local device.")
        kwargs = kwargs or {}
        results = []
        for k in range(len(colocate_with)):
            with context.enter(strategy, None, update=k):
                results.append(fn(*select_replica(k, tuple(args)), **select_replica(k, kwargs)))
        return self._group_updates(results, group)

    def _group_updates(self, results: list[Any], group: bool) -> Any:
        """TF's grouping of per-copy update results: a Mirrored of their values (the value itself when every copy
        gave the same object, or with one copy); ungrouped, a tuple per copy."""
        if not group:
            return nest.map_structure(self._strategy().experimental_local_results, regroup(results, Mirrored))
        return regroup(results, _grouped_mirrored)

    def reduce_to(self, reduce_op: ReduceOp | str, value: Any, destinations: Any, options: Any = None) -> Any:
        """Reduce ``value`` across all replicas onto ``destinations`` (a variable or distributed value:
        one copy per local device, a Mirrored when there are several; a device string: one value)."""
        strategy = self._strategy()
        strategy._require_cross_replica(CROSS_REPLICA_REQUIRED)
        op = ReduceOp.coerce(reduce_op)
        if strategy._single_plain:
            return value  # TF's default strategy: the value as given, wherever it is sent
        with context.enter(strategy, None):
            reduced = strategy._reduce_leaves(op, [value], user_call_site())[0]
        return self._mirror_to(reduced, destinations)

    def broadcast_to(self, tensor: Any, destinations: Any) -> Any:
        """``tensor`` copied to the devices of ``destinations`` (a variable or distributed value: one copy per local
        device, a Mirrored when there are several; a device string or a tensor: one value). Python numbers come
        back unchanged, as in TF (an update converts them to the variable's dtype)."""
        if destinations is None:
            raise AssertionError("broadcast_to needs destinations: a variable, a distributed value or a device string.")
        self._strategy()._require_cross_replica(CROSS_REPLICA_REQUIRED)
        if isinstance(destinations, (list, tuple)):
            raise AssertionError(f"broadcast_to takes one destination (a variable, a distributed value or a device "
                                 f"string), not a {type(destinations).__name__} of devices.")
        return self._broadcast_to(tensor, destinations)

    def _broadcast_to(self, tensor: Any, destinations: Any) -> Any:
        """MirroredStrategy's (and MWMS's) broadcast: a local copy per destination device."""
        if isinstance(tensor, (int, float)):
            return tensor
        if not isinstance(destinations, (ReplicaValues, DistributedVariable)) and not destinations:
            raise ValueError(f"{BAD_DESTINATIONS}\nFix: pass a variable or a device name such as '/cpu:0'.")
        if not isinstance(destinations, (ReplicaValues, Variable, IndexedSlices, str)) and not (
                hasattr(destinations, "__array_interface__") or is_cupy(destinations)):
            raise ValueError(f"{BAD_DESTINATIONS}\nGot {type(destinations).__name__} {destinations!r}; fix: pass a "
                             "variable or a device name such as '/cpu:0'.")
        return self._mirror_to(self._broadcast_value(tensor), destinations)

    def _broadcast_value(self, tensor: Any) -> Any:
        """What a broadcast copies: a variable's value, a tensor of anything else. MirroredStrategy reads the dtype of
        what it is given, so a Python list or tuple raises TF's AttributeError there (MWMS converts it)."""
        if isinstance(tensor, IndexedSlices):
            return tensor
        if isinstance(tensor, _ArrayLike):
            return tensor._read()
        if isinstance(tensor, (list, tuple)) and self._is_mirrored:
            raise AttributeError(f"'{type(tensor).__name__}' object has no attribute 'dtype'\nFix: pass a tensor "
                                 "(e.g. tf.constant(value)).")
        return as_tensor(tensor)

    def _mirror_to(self, value: Any, destinations: Any) -> Any:
        """``value`` on each device of ``destinations``: a Mirrored for a variable or distributed value with several
        local copies, else one new value (on a local copy's device, or the named one)."""
        if isinstance(destinations, (DistributedVariable, ReplicaValues)) and len(destinations.values) > 1:
            return Mirrored([self._placement.put(_new_tensor(value), k) for k in range(len(destinations.values))])
        return self._placement.put(_new_tensor(value), self._device_index(destinations))

    def _device_index(self, destination: Any) -> int:
        """The local copy a single destination names: a local copy's own, a device string's, else the first."""
        if isinstance(destination, ComponentVariable):
            return destination._local_id
        if isinstance(destination, str):
            try:
                wanted = canonical_device(destination).rsplit("/", 1)[1]  # "device:GPU:1", on any job and task
            except ValueError:
                return 0
            return next((k for k, d in enumerate(self._devices) if d.rsplit("/", 1)[1] == wanted), 0)
        return 0

    def batch_reduce_to(self, reduce_op: ReduceOp | str, value_destination_pairs: Sequence[tuple[Any, Any]],
                        options: Any = None) -> list[Any]:
        """``reduce_to`` for each ``(value, destinations)`` pair, in order (MirroredStrategy first refuses a batch of
        several values with an int32 one, as TF's)."""
        if self._is_mirrored:
            check_batch_placement([list(value.values) if isinstance(value, (ReplicaValues, DistributedVariable))
                                   else [value if hasattr(value, "dtype") else as_tensor(value)]
                                   for value, _ in value_destination_pairs])
        return [self.reduce_to(reduce_op, value, destinations, options)
                for value, destinations in value_destination_pairs]

    def value_container(self, value: Any) -> Any:
        """The distributed variable a local copy belongs to; any other value itself."""
        return value._var if isinstance(value, ComponentVariable) else value

    def variable_created_in_scope(self, v: Any) -> bool:
        """True if ``v`` was created in this strategy's scope."""
        if not isinstance(v, (Variable, ComponentVariable)):
            raise AttributeError(f"'{type(v).__name__}' object has no attribute '_distribute_strategy'")
        owner = self.value_container(v)
        return getattr(owner, "_strategy", None) is self._strategy()

    def colocate_vars_with(self, colocate_with_variable: Any) -> AbstractContextManager[None]:
        """Variables created inside go where ``colocate_with_variable`` is (every local device, as all
        variables of these strategies). As TF, checked at the call: this strategy must be current (its scope
        or ``run``) and the variable one of its distributed variables; the default strategy checks nothing."""
        strategy = self._strategy()
        if not strategy._is_default:
            current = context.get_strategy()
            if current is not strategy:
                if not context.has_strategy():
                    raise RuntimeError(f'Need to be inside "with strategy.scope()" for {strategy}')
                raise RuntimeError(f"Mixing different tf.distribute.Strategy objects: {current} is not {strategy}")
            kind = Variable if strategy._single_plain else DistributedVariable  # (OneDeviceStrategy: plain ones)
            if not isinstance(colocate_with_variable, kind):
                raise ValueError("`colocate_vars_with` must only be passed a variable created in this "
                                 f"tf.distribute.Strategy.scope(), not: {colocate_with_variable!r}")
            if getattr(colocate_with_variable, "_strategy", None) is not strategy:
                raise ValueError("`colocate_vars_with` must only be passed a variable created in this tf.distribute."
                                 f"Strategy.scope(), not {colocate_with_variable} created in scope: "
                                 f"{getattr(colocate_with_variable, '_strategy', None)}")
        return nullcontext()

    def non_slot_devices(self, var_list: Sequence[Any]) -> tuple[str, ...]:
        """The devices for non-slot variables: every local device."""
        return tuple(self._devices)

    @property
    def worker_devices_by_replica(self) -> list[list[str]]:
        """Each local replica's devices (one each), as TF's lists; absent from OneDeviceStrategy's, as in TF."""
        self._mirrored_only("worker_devices_by_replica")
        return [[device] for device in self._devices]

    @property
    def experimental_enable_get_next_as_optional(self) -> bool:
        """True, as TF's Mirrored and MWMS: replicas without data get empty batches (see ``input_lib``)."""
        self._mirrored_only("experimental_enable_get_next_as_optional")
        return True

    _tf_single_name = "OneDeviceExtended"  # the TF class named where a single-device extended lacks an attribute

    def _mirrored_only(self, name: str) -> None:
        """TF's AttributeError for what the ``extended`` of OneDeviceStrategy and the default strategy lack."""
        if self._strategy()._single_plain:
            raise AttributeError(f"'{self._tf_single_name}' object has no attribute '{name}'")

    @property
    def experimental_require_static_shapes(self) -> bool:
        """False: these strategies accept dynamic shapes."""
        return False

    def read_var(self, v: Variable) -> Any:
        """``v``'s value as read in cross-replica context (ON_READ: aggregated over all replicas)."""
        self._strategy()._require_cross_replica(CROSS_REPLICA_REQUIRED)
        return v.read_value()

    def call_for_each_replica(self, fn: Callable[..., Any], args: Sequence[Any] = (),
                              kwargs: dict | None = None) -> Any:
        """``fn`` in every local replica (``strategy.run`` without options)."""
        return self._strategy().run(fn, tuple(args), kwargs)


def _grouped_mirrored(values: Sequence[Any]) -> Any:
    """TF's grouping of per-copy update results: a Mirrored of their values now, or None for results that
    are not tensors (TF's group op)."""
    if not all(_is_tensor_like(v) for v in values):
        return None
    return Mirrored([_new_tensor(v._read() if isinstance(v, _ArrayLike) else v) for v in values])


def _is_tensor_like(value: Any) -> bool:
    """Arrays and variables (TF tensors)."""
    return isinstance(value, _ArrayLike) or hasattr(value, "__array_interface__") or is_cupy(value)
