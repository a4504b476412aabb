"""The strategies: ``MultiWorkerMirroredStrategy``, ``MirroredStrategy`` and the default one.

A strategy binds to a ``WorkerRuntime`` (its devices and collective group, given by the environment:
a plain process, a simulated worker or a real backend) and implements ``run``, ``reduce``, ``gather``
and variable creation on top of the replica pool and the collective group.
"""

from __future__ import annotations

import hashlib
import logging
import os
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, NamedTuple

import numpy as np

from .. import config as device_config, nest
from ..aggregation import ReduceOp, VariableAggregation, VariableSynchronization
from ..callsite import calls_from, user_call_site
from ..cluster import ClusterResolver, TFConfigClusterResolver
from ..cluster import roles
from ..cluster.devices import local_device
from ..collective.communicator import CHECK_SITES_ENV
from ..collective.request_kind import requesting
from ..collective.group import CollectiveGroup, truediv_dtype
from .kernel_dtypes import check_broadcastable, check_gatherable, check_reducible, tf_dtype
from ..communication import CommunicationImplementation, Options
from ..runtime import WorkerRuntime, current_environment
from ..frontend import current_frontend
from ..tensor import IndexedSlices, array_module, as_tensor, device_of, frozen, is_cupy, like, to_host
from ..trace import TraceNote
from ..train.strings import encode_strings
from mirrorlab.diagnostics.runtime_hook import tf_config_diagnosed
from . import context
from .batch_safe import NOT_STACKED, is_batch_safe, run_batch_safe
from .cross_device_ops import check_cross_device_ops
from .extended_api import CROSS_REPLICA_REQUIRED, ExtendedApi
from .input_context import InputContext, ValueContext
from .input_lib import DistributedDataset
from .mirror_check import check_copies, check_mirrors_from_env, copies_may_differ
from .one_device import concat_on_one_device, is_int32
from .regroup import regroup, select_replica
from .scatter import reduce_slices
from .replica_context import ReplicaContext, checked_all_reduce, is_python_number
from .replica_pool import InlinePool, SyncRequest, ThreadPool
from .values import Mirrored, ReplicaValues
from .distributed_variables import DistributedVariable, MirroredVariable, SyncOnReadVariable
from .variables import _initial_array, validate_synchronization_aggregation_trainable

__all__ = ["Strategy", "StrategyExtended", "MultiWorkerMirroredStrategy", "MirroredStrategy",
           "default_strategy"]

log = logging.getLogger("mirrorlab")

GATHER_CROSS_REPLICA_REQUIRED = ("tf.distribute.Strategy.gather method requires cross-replica context, use "
                                 "get_replica_context().all_gather() instead")



def _content(copy: np.ndarray) -> bytes:
    """A copy's value as bytes: its buffer, or for strings (object arrays) the strings themselves, not pointers."""
    return encode_strings(copy).tobytes() if copy.dtype.hasobject else copy.tobytes()


def _digest(copy: np.ndarray) -> str:
    """The short SHA-1 by which the trace names one variable copy's value (the same in every run)."""
    return hashlib.sha1(_content(copy)).hexdigest()[:12]


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two contiguous arrays hold the same bytes (NaNs included), without hashing either (strings compare
    by content, as the digest does)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.hasobject:
        return _content(a) == _content(b)
    return np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                          np.ascontiguousarray(b).reshape(-1).view(np.uint8))


class _OneStep:
    """The context of ``StrategyExtended._one_step`` (a class, not a generator: it is entered once a step)."""

    __slots__ = ("_ext",)

    def __init__(self, ext: "StrategyExtended") -> None:
        self._ext = ext

    def __enter__(self) -> None:
        ext = self._ext
        ext._step += 1
        ext._group.step = ext._step
        ext._runtime.before_step(ext._step)

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None and self._ext._unsynced:
            self._ext._record_unsynced_updates()


class StrategyExtended(ExtendedApi):
    """``strategy.extended``: devices, roles, and the machinery (replica pool, collective group)."""

    def __init__(self, strategy: "Strategy", runtime: WorkerRuntime, options: Options, *, rank: int = 0,
                 num_workers: int = 1, task_type: str | None = None, task_id: int | None = None,
                 is_chief: bool = True, between_graph: bool = False) -> None:
        self._container = weakref.ref(strategy)
        self._runtime = runtime
        self._options = options
        self._rank = rank
        self._num_workers = num_workers
        self._task_type = task_type
        self._task_id = task_id
        self._is_chief = is_chief
        self._between_graph = between_graph
        self._step = 0
        self._is_mirrored = False  # TF's MirroredStrategy (one worker), not MWMS
        self._unsynced: dict[int, tuple[DistributedVariable, str]] = {}
        self._warned_unsynced: set[int] = set()
        self._check_mirrors = check_mirrors_from_env()
        devices = runtime.devices
        runtime.comm.check_sites = os.environ.get(CHECK_SITES_ENV, "1").strip() != "0"
        self._group = CollectiveGroup(runtime.comm, len(devices), devices, options, runtime.trace,
                                      runtime.before_collective)
        self._placement = self._group.placement
        if len(devices) == 1:
            self._pool = InlinePool()
        else:
            self._pool = ThreadPool(len(devices), runtime.spawn, runtime.comm.worker_label(rank), runtime.comm.fail,
                                    runtime.replica_order, runtime.make_queue)
            weakref.finalize(strategy, self._pool.close)
            runtime.adopt(self._pool)

    # -- TF's public surface --------------------------------------------------------------------

    @property
    def worker_devices(self) -> tuple[str, ...]:
        return self._devices

    @property
    def parameter_devices(self) -> tuple[str, ...]:
        return self._devices

    @property
    def _devices(self) -> tuple[str, ...]:
        """This worker's replica devices (what ``worker_devices`` says, also for the default strategy)."""
        return self._runtime.devices

    @property
    def transport_name(self) -> str:
        """What carries this worker's collectives: ``simulated``, ``grpc`` (``grpc+lane`` when messages travel
        on TCP data lanes), ``shm`` or ``local``."""
        return self._runtime.transport_name

    @property
    def should_checkpoint(self) -> bool:
        return self._is_chief

    @property
    def should_save_summary(self) -> bool:
        return self._is_chief

    @property
    def experimental_should_init(self) -> bool:
        return True

    @property
    def experimental_between_graph(self) -> bool:
        return self._between_graph

    @property
    def _id_in_cluster(self) -> int:
        return self._rank

    @property
    def _int32_on_one_device(self) -> bool:
        """TF's MirroredStrategy on several devices sends int32 values to one device (ReductionToOneDevice)."""
        return self._is_mirrored and len(self._devices) > 1

    def _make_input_context(self) -> InputContext:
        """One input pipeline per worker; this worker's id; all replicas in sync."""
        return InputContext(self._num_workers, self._rank, self._num_workers * len(self._devices))

    def _make_replica_input_contexts(self) -> list[InputContext]:
        """PER_REPLICA input (MirroredStrategy only): one pipeline per local replica."""
        count = len(self._devices)
        return [InputContext(count, k, self._num_workers * count) for k in range(count)]

    @property
    def check_mirrored_copies(self) -> bool:
        """Whether a ``run`` raises ``MirroredCopiesDifferError`` when it leaves a mirrored variable's copies
        different (see ``mirror_check``); from ``MIRRORLAB_CHECK_MIRRORS`` (on by default in ``SimCluster``)."""
        return self._check_mirrors

    @check_mirrored_copies.setter
    def check_mirrored_copies(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"strategy.extended.check_mirrored_copies = {value!r}: expected True or False. Fix: True "
                            "checks that mirrored variables' copies stay equal after each strategy.run, False does "
                            "not (TF's behaviour).")
        self._check_mirrors = value

    # -- variables ------------------------------------------------------------------------------

    def _create_variable(self, initial_value: Any = None, trainable: bool | None = None,
                         validate_shape: bool = True, caching_device: Any = None, name: str | None = None,
                         variable_def: Any = None, dtype: Any = None, import_scope: Any = None,
                         constraint: Any = None, synchronization: Any = VariableSynchronization.AUTO,
                         aggregation: Any = VariableAggregation.NONE, shape: Any = None) -> DistributedVariable:
        sync, agg, trainable = validate_synchronization_aggregation_trainable(
            synchronization, aggregation, trainable, name)
        if sync == VariableSynchronization.AUTO:
            sync = VariableSynchronization.ON_WRITE
        if sync == VariableSynchronization.NONE:
            raise ValueError("`NONE` variable synchronization mode is not supported with tf.distribute strategy. "
                             f"Please change the `synchronization` for variable: {name}")

        def create() -> DistributedVariable:
            value = _initial_array(initial_value, dtype, shape)
            if self._num_workers > 1:
                # Every worker starts from the chief's initial value (TF broadcasts it from the chief, before it
                # checks the aggregation).
                check_broadcastable(value, f"the initial value of variable {name!r}")
                with requesting(f"creation of variable {name!r}"):
                    value = self._group.broadcast([value], user_call_site())[0]
            if agg == VariableAggregation.MEAN and np.dtype(value.dtype).kind not in "fc":
                raise ValueError("creating distributed tf.Variable with aggregation=MEAN and a non-floating dtype "
                                 "is not supported, please use a different aggregation or dtype")
            cls = SyncOnReadVariable if sync == VariableSynchronization.ON_READ else MirroredVariable
            return cls(self._container(), value, name, trainable, sync, agg, constraint)

        frame = context.current_frame()
        if frame is None or frame.replica is None:
            return create()
        # In a replica function: one variable for all replicas, created once they all ask for it.
        request = SyncRequest(f"create_variable({name})", None, user_call_site(),
                              lambda requests: [create()] * len(requests))
        return self._pool.sync(frame.replica._local_id, request)

    def _note_unsynced_update(self, var: DistributedVariable, site: str) -> None:
        """Remember a replica-local update of an ON_WRITE variable with aggregation NONE (see ``run``)."""
        self._unsynced.setdefault(id(var), (var, site))

    def _one_step(self) -> "_OneStep":
        """``strategy.run``'s bookkeeping around one step, run per replica or stacked: count it and tell the runtime
        (fault hooks) before; after a step that returned, trace the replica-local updates."""
        return _OneStep(self)

    def _record_unsynced_updates(self) -> None:
        """After a ``run``: trace each unsynchronized variable's copies (digests) so diagnostics can flag
        mirrors that differ, on this worker or across workers; then check them if ``check_mirrored_copies`` (TF
        accepts this silently; else the log says it once per variable: Keras' BatchNormalization does it on purpose,
        every step)."""
        updated, self._unsynced = list(self._unsynced.values()), {}
        occurrences: dict[tuple[str, str], int] = {}
        for var, site in updated:
            copies = [np.asarray(to_host(c)) for c in var._components]
            differ = not all(_same_bytes(copies[0], c) for c in copies[1:])  # hash every copy only when they differ
            digests = [_digest(c) for c in copies] if differ else [_digest(copies[0])] * len(copies)
            if self._runtime.trace is not None:
                self._runtime.trace.add_note(TraceNote(
                    "unsynced_update", self._rank, self._runtime.now(), site,
                    {"variable": var.name, "step": self._step, "digests": digests,
                     "replicas": [self._rank * len(digests) + k for k in range(len(digests))]}))
            if self._check_mirrors and not copies_may_differ(var):
                # the same variable on every worker: its name, the update's site and how often the pair came before
                key = (self._step, var.name, site, occurrences.setdefault((var.name, site), 0))
                occurrences[(var.name, site)] += 1
                check_copies(var.name, site, self._step, copies, digests, self._rank, self._devices,
                             self._group.comm.names, lambda post, key=key: self._runtime.post_copies(key, post))
            if differ and id(var) not in self._warned_unsynced:  # warned once per variable
                self._warned_unsynced.add(id(var))
                if copies_may_differ(var):  # a layer's own state, such as moving statistics
                    log.warning("mirrors of %s differ after replica updates with aggregation NONE (%s): each replica "
                                "keeps its own copy, as in TF (Keras' BatchNormalization updates its moving "
                                "statistics per replica); predictions on different replicas may differ",
                                var.name, site)
                else:
                    log.warning("mirrors of %s differ after replica updates with aggregation NONE (%s); set "
                                "aggregation=SUM/MEAN or update it in cross-replica context", var.name, site)

    # -- collectives on local components ------------------------------------------------------------

    def _gather_leaves(self, by_leaf: list[list[Any]], axis: int, site: str, options: Options | None) -> list[Any]:
        check_gatherable(by_leaf)
        out: list[Any] = [None] * len(by_leaf)
        collective = []
        for i, leaf in enumerate(by_leaf):
            if self._int32_on_one_device and is_int32(leaf):
                out[i] = concat_on_one_device(leaf, axis)
            else:
                collective.append(i)
        for i, gathered in zip(collective, self._gather_collectively([by_leaf[i] for i in collective], axis, site,
                                                                     options)):
            out[i] = gathered
        return out

    def _gather_collectively(self, by_leaf: list[list[Any]], axis: int, site: str,
                             options: Options | None) -> list[Any]:
        if not by_leaf:
            return []
        moved = []
        for leaf in by_leaf:
            rank = leaf[0].ndim
            if axis < 0 and rank > 0:  # TF builds range(axis) when moving the axis to the front
                raise ValueError(f"Requires start <= limit when delta > 0: 0/{axis}: gather/all_gather take a "
                                 f"non-negative axis (TF 2.21 fails on negative ones). Fix: pass axis="
                                 f"{axis % rank if axis >= -rank else 0} for a value of rank {rank}.")
            if rank == 0 or not 0 <= axis < rank:
                raise ValueError(f"axis {axis} is out of range for a value of rank {rank} in gather/all_gather. "
                                 "Fix: gather values of rank >= 1 along an existing axis.")
            moved.append([_on_device(c, lambda c: array_module(c).moveaxis(c, axis, 0)) for c in leaf])
        gathered = self._group.all_gather(moved, site, options)
        return [frozen(_on_device(g, lambda g: array_module(g).moveaxis(g, 0, axis))) for g in gathered]

    def _components(self, value: Any) -> list[Any]:
        """The local per-replica arrays behind a leaf passed to reduce/gather."""
        if isinstance(value, DistributedVariable):
            return list(value._components)
        if isinstance(value, ReplicaValues):
            return [as_tensor(v) for v in value.values]
        return [as_tensor(value)] * len(self._devices)


class Strategy:
    """The methods shared by every strategy (TF's ``tf.distribute.Strategy``)."""

    _is_default = False
    _single_plain = False  # TF's StrategyBase defaults: one replica, plain variables, values handed back as given
    _converts_plain_nests = False  # TF's MWMS: a nest without distributed values is one tensor

    def _is_plain_nest(self, value: Any) -> bool:
        """True where TF converts a value given to a variable update to one tensor: a list, tuple or dict without
        distributed values, under MWMS (MirroredStrategy goes through it leaf by leaf)."""
        return self._converts_whole_nest(value) and not any(_is_distributed(leaf) for leaf in nest.flatten(value))

    def _converts_whole_nest(self, value: Any) -> bool:
        """True where TF's reduce (axis None) and gather convert ``value`` to one tensor: any list, tuple or dict under
        MWMS, whose collectives take one tensor (variables in it are read; PerReplica values cannot convert)."""
        return self._converts_plain_nests and nest.is_nested(value)

    def __init__(self, extended: StrategyExtended, cluster_resolver: ClusterResolver | None = None) -> None:
        self._extended = extended
        self._cluster_resolver = cluster_resolver

    @property
    def extended(self) -> StrategyExtended:
        return self._extended

    @property
    def num_replicas_in_sync(self) -> int:
        return self._extended._group.num_replicas

    @property
    def cluster_resolver(self) -> ClusterResolver | None:
        return self._cluster_resolver

    # -- contexts -------------------------------------------------------------------------------

    @contextmanager
    def scope(self) -> Iterator["Strategy"]:
        """Cross-replica context: variables created here are distributed."""
        self._require_cross_replica(CROSS_REPLICA_REQUIRED)
        with context.enter(self, None):
            yield self

    def _require_cross_replica(self, message: str) -> None:
        frame = context.current_frame()
        if frame is None:
            return
        if frame.strategy is not self and not frame.strategy._is_default:
            raise RuntimeError(f"Mixing different tf.distribute.Strategy objects: {self} is not {frame.strategy}")
        if frame.replica is not None:
            raise RuntimeError(message)

    def _default_replica_context(self) -> ReplicaContext:
        return ReplicaContext(self, 0)

    # -- run --------------------------------------------------------------------------------------

    def run(self, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None, options: Any = None) -> Any:
        """Call ``fn`` once per local replica with that replica's part of ``args``; returns PerReplica
        values (plain values when there is one local replica or every replica returned the same object). A function
        declared ``@batch_safe`` may run once for all local replicas, stacked (``distribute/batch_safe.py``)."""
        self._require_cross_replica(CROSS_REPLICA_REQUIRED)
        if not isinstance(args, (list, tuple)):
            raise ValueError(f"positional args must be a list or tuple, got {type(args)}")
        ext = self._extended
        kwargs = kwargs or {}
        if is_batch_safe(fn):
            stacked = run_batch_safe(self, fn, args, kwargs)
            if stacked is not NOT_STACKED:
                return stacked
        place = ext._placement.put

        def replica_fn(k: int, site: str) -> Callable[[], Any]:
            def call() -> Any:
                with context.enter(self, ReplicaContext(self, k, in_run=True)), calls_from(site):
                    replica_args = place(select_replica(k, tuple(args)), k) if args else ()
                    replica_kwargs = place(select_replica(k, kwargs), k) if kwargs else {}  # usually none
                    return fn(*replica_args, **replica_kwargs)
            return ext._placement.bind(k, call)

        with ext._one_step():
            site = user_call_site()  # (reported by replicas running only mirrorlab's code, such as Keras' steps)
            with context.enter(self, None):
                results = ext._pool.run([replica_fn(k, site) for k in range(ext._pool.size)])
        return regroup(results)

    # -- cross-replica reductions ---------------------------------------------------------------

    def reduce(self, reduce_op: ReduceOp | str, value: Any, axis: Any = None) -> Any:
        """Reduce per-replica ``value`` across all replicas of all workers (every worker gets the result).

        With ``axis`` each replica first sums along it, and MEAN divides by the total element count
        over all replicas, so uneven and empty partial batches give the true global mean. Plain
        (non-distributed) values follow TF: on one worker MEAN returns them unchanged and SUM over
        several replicas raises; across workers each worker's value is reduced once."""
        self._require_cross_replica(CROSS_REPLICA_REQUIRED)
        if not isinstance(reduce_op, (ReduceOp, str)):
            if axis is None:
                raise AssertionError(f"reduce_op must be a tf.distribute.ReduceOp or its name, got {reduce_op!r}")
            raise TypeError(f"Expected `reduce_op` to be a `tf.distribute.ReduceOp`, not: {reduce_op!r}")
        op = ReduceOp.coerce(reduce_op)
        if axis is not None:
            try:
                hash(axis)  # TF caches its per-axis reduce functions in a dict
            except TypeError as exc:
                raise TypeError(f"{exc}\nFix: pass `axis` as an int or a tuple of ints, e.g. axis="
                                f"{tuple(axis) if isinstance(axis, list) else 0}.") from None
        site = user_call_site()
        if self._single_plain and axis is None:
            return value  # TF's default strategy (and OneDeviceStrategy): the value exactly as given
        for leaf in nest.flatten(value) if self._extended._is_mirrored and len(self._extended._devices) > 1 else ():
            numbers = [c for c in leaf.values if is_python_number(c)] if isinstance(leaf, ReplicaValues) else []
            if numbers:  # (from a values function)
                raise AttributeError(f"'{type(numbers[0]).__name__}' object has no attribute 'device'")
        if axis is None and self._converts_whole_nest(value):
            with context.enter(self, None), requesting("reduce"):
                return self._reduce_leaves(op, [value], site, copies=True)[0]
        with context.enter(self, None), requesting("reduce"):
            if axis is not None:
                return self._reduce_along_axis(op, [self._one_tensor_per_replica(op, value, axis)], axis, site)[0]
            return nest.pack_sequence_as(value, self._reduce_leaves(op, nest.flatten(value), site, copies=True))

    def _one_tensor_per_replica(self, op: ReduceOp, value: Any, axis: Any) -> Any:
        """A list or tuple given to ``reduce`` with an ``axis`` as TF's reduce sees it: TF sums it along the axis
        inside ``run``, so each replica converts ITS components of the whole nest to one tensor (stacked); a dict
        cannot be converted, and MEAN, after the sum's own checks, asks the list for a shape and fails."""
        if not nest.is_nested(value) or _is_distributed(value):
            return value
        if _holds_mapping(value):
            raise TypeError(f"Failed to convert elements of {value!r} to Tensor. Consider casting elements to a "
                            "supported type.\nFix: reduce the dict's values one by one.")
        leaves = nest.flatten(value)
        comps = [self._extended._components(leaf) for leaf in leaves]
        dtypes = [comp[0].dtype for leaf, comp in zip(leaves, comps) if _is_distributed(leaf)]
        for dtype in dtypes[1:]:
            if dtype != dtypes[0]:
                raise TypeError(f"Cannot convert a list containing a tensor of dtype {tf_dtype(dtype)} to "
                                f"{tf_dtype(dtypes[0])}\nFix: cast the tensors to one dtype before reducing them "
                                "together, or reduce them one by one.")
        stacked = [_stacked(nest.pack_sequence_as(value, [c[r] for c in comps]), dtypes[0] if dtypes else None)
                   for r in range(len(self._extended._devices))]
        if op == ReduceOp.MEAN:
            for tensor in stacked:
                _normalize_axis(axis, tensor)
            raise AttributeError(f"'{type(value).__name__}' object has no attribute 'shape'\nFix: reduce one tensor "
                                 "(e.g. tf.stack the list), or use SUM.")
        return self._pack_local(stacked)

    def _reduce_leaves(self, op: ReduceOp, leaves: list[Any], site: str, copies: bool = False) -> list[Any]:
        """Each leaf reduced over all replicas. With ``copies`` (``reduce``'s results) a distributed variable that
        needs no reduction comes back as TF hands it: its first copy, a variable read when used (MEAN of a mirrored
        variable; MEAN of any on an MWMS of one worker with one device); otherwise values are arrays."""
        ext = self._extended
        single = ext._num_workers == 1
        out: list[Any] = [None] * len(leaves)
        per_replica, per_worker = [], []
        for i, leaf in enumerate(leaves):
            if _holds_slices(leaf):
                out[i] = self._reduce_slices(op, leaf, site)
            elif isinstance(leaf, (Mirrored, MirroredVariable)):
                if op == ReduceOp.SUM:
                    raise AssertionError("reduce(SUM) of a Mirrored value (or MirroredVariable) would add up "
                                         "identical copies; reduce the PerReplica values instead, or use MEAN.")
                out[i] = leaf.values[0] if copies and isinstance(leaf, MirroredVariable) else ext._components(leaf)[0]
            elif _is_distributed(leaf) and len(ext._devices) > 1:
                per_replica.append(i)
            else:
                # One replica's value as given (TF's MEAN hands a Python number back unconverted).
                lone_copy = copies and not ext._is_mirrored and isinstance(leaf, DistributedVariable)
                plain = leaf.values[0] if isinstance(leaf, ReplicaValues) or lone_copy else (
                    ext._components(leaf)[0] if _is_distributed(leaf) else leaf)
                if single:
                    out[i] = self._reduce_non_distributed(op, plain)
                else:
                    per_worker.append((i, _to_tensor(plain)))
        if per_replica:
            reduced = checked_all_reduce(ext, op, [ext._components(leaves[i]) for i in per_replica], site, None,
                                  addn=single)
            for i, r in zip(per_replica, reduced):
                out[i] = r
        if per_worker:
            per_worker_leaves = [[v] for _, v in per_worker]
            check_reducible(per_worker_leaves, addn=False)
            reduced = ext._group.all_reduce(op, per_worker_leaves, site, mean_count=ext._num_workers)
            for (i, _), r in zip(per_worker, reduced):
                out[i] = r
        return out

    def _reduce_slices(self, op: ReduceOp, value: Any, site: str) -> IndexedSlices:
        """IndexedSlices (per replica, or the same on every local replica) combined over all replicas."""
        local = len(self._extended._devices)
        parts = list(value.values) if isinstance(value, ReplicaValues) else [value] * local
        return reduce_slices(self, op, parts, site)

    def _reduce_non_distributed(self, op: ReduceOp, value: Any) -> Any:
        """TF's rule for a plain value (or an MWMS nest) on one worker: an all-zero array gives zeros (a Python zero
        fails reading its shape); MEAN returns the value as is; SUM too with one replica (as a tensor); otherwise SUM
        is ambiguous and raises."""
        if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic) and value == 0:
            raise AttributeError(f"'{type(value).__name__}' object has no attribute 'shape'\nFix: pass a tensor "
                                 "(e.g. tf.constant(0.0)) to reduce a plain zero.")
        if isinstance(value, (np.ndarray, np.generic)) or is_cupy(value):
            array = _to_tensor(value)
            if not bool(_on_device(array, lambda a: a.any())):
                return _on_device(array, lambda a: array_module(a).zeros(a.shape, a.dtype))
        if op == ReduceOp.MEAN:  # (a nest's one-replica PerReplica values come back as their component)
            return nest.map_structure(lambda v: v.values[0] if isinstance(v, ReplicaValues) else v, value)
        if value is None and self.num_replicas_in_sync > 1:
            raise ValueError(f"A non-DistributedValues value {value} cannot be reduced with the given reduce op {op}.")
        array = _to_tensor(value)
        if self.num_replicas_in_sync == 1:
            return array
        raise ValueError(f"A non-DistributedValues value {value} cannot be reduced with the given reduce op {op}.")

    def _reduce_along_axis(self, op: ReduceOp, leaves: list[Any], axis: Any, site: str) -> list[Any]:
        ext = self._extended
        numers, denoms = [], []
        for leaf in leaves:
            comps = ext._components(leaf)
            axes = _normalize_axis(axis, comps[0])
            xp = array_module(comps[0])
            numers.append([frozen(_on_device(c, lambda c: xp.sum(c, axis=axes, dtype=c.dtype))) for c in comps])
            denoms.append([np.asarray(int(np.prod([c.shape[a] for a in axes])), dtype=np.int64) for c in comps])
        total = self._reduce_leaves(ReduceOp.SUM, [self._pack_local(n) for n in numers], site)
        if op == ReduceOp.SUM:
            return total
        counts = self._reduce_leaves(ReduceOp.SUM, [self._pack_local(d) for d in denoms], site)
        with np.errstate(invalid="ignore", divide="ignore"):
            return [frozen(_truediv(as_tensor(t), as_tensor(c))) for t, c in zip(total, counts)]

    def _pack_local(self, components: list[Any]) -> Any:
        """Per-replica partial results as TF's ``run`` would return them (plain with one replica)."""
        return regroup(components) if len(components) > 1 else components[0]

    def gather(self, value: Any, axis: int) -> Any:
        """Concatenate per-replica ``value`` along ``axis`` over all replicas (uneven lengths allowed).

        A plain value is returned unchanged on one worker and gathered once per worker otherwise."""
        self._require_cross_replica(GATHER_CROSS_REPLICA_REQUIRED)
        ext = self._extended
        site = user_call_site()
        if self._converts_whole_nest(value):
            value = _to_tensor(value)
        leaves = nest.flatten(value)
        out: list[Any] = list(leaves)
        with context.enter(self, None):
            for i, leaf in enumerate(leaves):
                if _is_distributed(leaf):
                    if self.num_replicas_in_sync > 1:
                        out[i] = ext._gather_leaves([ext._components(leaf)], axis, site, None)[0]
                    else:
                        out[i] = ext._components(leaf)[0]
                elif ext._num_workers > 1:
                    out[i] = ext._gather_leaves([[as_tensor(leaf)]], axis, site, None)[0]
        return nest.pack_sequence_as(value, out)

    # -- input ------------------------------------------------------------------------------------

    def experimental_distribute_dataset(self, dataset: Any, options: Any = None) -> DistributedDataset:
        """Split ``dataset`` (batched by the GLOBAL batch size) across workers and replicas, as TF does."""
        return DistributedDataset.from_dataset(self, dataset, options)

    def distribute_datasets_from_function(self, dataset_fn: Callable[[InputContext], Any],
                                          options: Any = None) -> DistributedDataset:
        """``dataset_fn(InputContext)`` on each worker builds its own (per-replica batched) pipeline."""
        return DistributedDataset.from_function(self, dataset_fn, options)

    experimental_distribute_datasets_from_function = distribute_datasets_from_function  # TF's deprecated name

    # -- per-replica values ----------------------------------------------------------------------

    def experimental_local_results(self, value: Any) -> tuple:
        """The values of this worker's replicas, in local replica order: one structure per replica with
        each distributed leaf replaced by that replica's component; ``(value,)`` if nothing is distributed."""
        if isinstance(value, (ReplicaValues, DistributedVariable)):
            return tuple(value.values)
        if not any(_is_distributed(leaf) for leaf in nest.flatten(value)):  # a nest: one copy per local replica
            return tuple(value for _ in self._extended._devices) if nest.is_nested(value) else (value,)
        return tuple(nest.map_structure(lambda v, k=k: v.values[k] if _is_distributed(v) else v, value)
                     for k in range(len(self._extended._devices)))

    def experimental_distribute_values_from_function(self, value_fn: Callable[[ValueContext], Any]) -> Any:
        """``value_fn(ValueContext)`` once per local replica, as a PerReplica (nest of PerReplica); the
        default strategy returns the value itself."""
        ext = self._extended
        n_local = len(ext._devices)
        values = [ext._placement.put(value_fn(ValueContext(ext._rank * n_local + k, self.num_replicas_in_sync)), k)
                  for k in range(n_local)]
        return regroup(values, always_wrap=not self._single_plain)  # the default strategy hands the value back

    def __repr__(self) -> str:
        return f"<mirrorlab.{type(self).__name__} object at {id(self):#x}>"


def _is_distributed(value: Any) -> bool:
    return isinstance(value, (ReplicaValues, DistributedVariable))


def _holds_slices(value: Any) -> bool:
    """True for IndexedSlices and distributed values of them (sparse gradients)."""
    if isinstance(value, ReplicaValues):
        value = value.values[0]
    return isinstance(value, IndexedSlices)


def _holds_mapping(value: Any) -> bool:
    """Whether a nest has a dict anywhere (TF cannot convert it to one tensor)."""
    if isinstance(value, Mapping):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_mapping(v) for v in value)


def _stacked(value: Any, dtype: Any) -> Any:
    """A list or tuple holding tensors as one tensor of their ``dtype`` (TF's auto-packing: Python numbers take the
    tensors' dtype, the items of each level must have one shape); without tensors, as ``tf.constant`` converts it."""
    if dtype is None:
        return current_frontend().convert_to_tensor(value)
    if not isinstance(value, (list, tuple)):
        return current_frontend().convert_to_tensor(value, dtype)
    items = [_stacked(item, dtype) for item in value]
    if len({item.shape for item in items}) > 1:
        raise ValueError(f"Shapes must be equal rank and size to pack them into one tensor, got "
                         f"{[list(item.shape) for item in items]}.\nFix: give every item of the list the same shape.")
    return array_module(items[0]).stack(items)


def _to_tensor(value: Any) -> Any:
    """``value`` as one array, with TF's ValueError for a dict or None (``convert_to_tensor`` rejects them)."""
    if isinstance(value, Mapping) or value is None:
        raise ValueError(f"Attempt to convert a value ({value!r}) with an unsupported type ({type(value)}) to a "
                         "Tensor.\nFix: reduce or gather tensors (a dict's values one by one, e.g. "
                         "{k: strategy.reduce(op, v, axis=None) for k, v in d.items()}).")
    for leaf in nest.flatten(value) if nest.is_nested(value) else ():
        if isinstance(leaf, ReplicaValues):
            raise ValueError(f"Attempt to convert a value ({leaf!r}) with an unsupported type ({type(leaf)}) to a "
                             "Tensor.\nFix: under MultiWorkerMirroredStrategy reduce or gather each distributed "
                             "value on its own, e.g. [strategy.reduce(op, v, axis=None) for v in values].")
    return as_tensor(value)


def _normalize_axis(axis: Any, value: Any) -> tuple[int, ...]:
    """``axis`` (an int, or a tuple/list of ints) as non-negative dims of ``value``; TF's errors otherwise, in its
    order: the value's dtype, the axis' type, then its range."""
    if np.dtype(value.dtype).kind not in "iufc":
        raise TypeError(f"Value passed to parameter 'input' has DataType {np.dtype(value.dtype).name} not in list "
                        "of allowed values: float32, float64, int32, uint8, int16, int8, complex64, int64, "
                        "bfloat16, uint16, complex128, float16, uint32, uint64")
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)) or int(a) != a:
            raise TypeError(f"Value passed to parameter 'reduction_indices' has DataType "
                            f"{type(a).__name__} not in list of allowed values: int32, int64 (axis={axis!r})")
        axes.append(int(a))
    rank = value.ndim
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"Invalid reduction dimension {a} for input with {rank} dimensions. "
                             f"(axis={axis!r} for a value of shape {list(value.shape)}; reduce a scalar with "
                             "axis=None)")
    return tuple(a % rank for a in axes)


def _on_device(array: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn(array)`` with ``array``'s GPU current (CuPy); plain ``fn(array)`` for NumPy."""
    with device_of(array):
        return fn(array)


def _truediv(numer: Any, denom: Any) -> Any:
    """``numer / cast(denom, numer.dtype)`` like TF's truediv (integers divide to float32 or float64)."""
    dtype = truediv_dtype(numer.dtype)
    return numer.astype(dtype, copy=False) / like(denom, numer).astype(dtype)


class MultiWorkerMirroredStrategy(Strategy):
    """Synchronous data parallelism over all devices of all workers, like
    ``tf.distribute.MultiWorkerMirroredStrategy``. The cluster comes from ``TF_CONFIG`` (or the given
    resolver); without a cluster it runs locally on this machine's GPUs, or one CPU."""

    _converts_plain_nests = True

    def __init__(self, cluster_resolver: ClusterResolver | None = None,
                 communication_options: Options | None = None) -> None:
        if communication_options is None:
            communication_options = Options()
        if not isinstance(communication_options, Options):
            raise ValueError("communication_options must be an instance of "
                             "tf.distribute.experimental.CommunicationOptions")
        # Only a TF_CONFIG the strategy reads itself is diagnosed: a given resolver may override it.
        reading = tf_config_diagnosed() if cluster_resolver is None else nullcontext()
        if cluster_resolver is None:
            cluster_resolver = TFConfigClusterResolver()
        if not isinstance(cluster_resolver, ClusterResolver):
            raise ValueError("cluster_resolver must be an instance of "
                             "tf.distribute.cluster_resolver.ClusterResolver")
        env = current_environment()
        with reading:
            spec = roles.normalize_cluster_spec(cluster_resolver.cluster_spec())
            task_type, task_id = cluster_resolver.task_type, cluster_resolver.task_id
            multi_worker = bool(spec.as_dict()) and task_type != "evaluator"
            if multi_worker:
                roles.validate_cluster_spec(spec, task_type, task_id)
                rank = roles.id_in_cluster(spec, task_type, task_id)
        device_type, count = device_config.worker_device_type()  # also freezes this worker's device config
        if not multi_worker:
            devices = [f"/job:localhost/replica:0/task:0/device:{device_type}:{k}" for k in range(count)]
            extended = StrategyExtended(self, env.local_runtime(devices), communication_options, between_graph=True)
        else:
            names = _task_names(spec)
            runtime = env.cluster_runtime(spec, task_type, task_id, rank, names, cluster_resolver.rpc_layer)
            extended = StrategyExtended(
                self, runtime, communication_options, rank=rank, num_workers=len(names), task_type=task_type,
                task_id=task_id, is_chief=roles.is_chief(spec, task_type, task_id), between_graph=True)
        super().__init__(extended, cluster_resolver)
        if extended._num_workers > 1:
            # Like TF's startup, nobody proceeds until every worker has created its strategy.
            extended._group.barrier(user_call_site(), "strategy creation")


def _task_names(spec: Any) -> list[str]:
    """Task names of the collective group in rank order: the chief, then the workers."""
    jobs = spec.as_dict()
    names = [f"/job:chief/replica:0/task:{i}" for i in spec.task_indices("chief")] if "chief" in jobs else []
    if "worker" in jobs:
        names += [f"/job:worker/replica:0/task:{i}" for i in spec.task_indices("worker")]
    return names


class RunOptions(NamedTuple):
    """``tf.distribute.RunOptions``: hints for ``strategy.run`` that matter to TPUs and XLA only; accepted and kept."""

    experimental_enable_dynamic_batch_size: bool = True
    experimental_bucketizing_dynamic_shape: bool = False
    experimental_xla_options: Any = None


class ExperimentalMultiWorkerMirroredStrategy(MultiWorkerMirroredStrategy):
    """``tf.distribute.experimental.MultiWorkerMirroredStrategy``: the older signature, ``communication`` (a
    CollectiveCommunication or its name) first, no ``communication_options``."""

    def __init__(self, communication: CommunicationImplementation | str = CommunicationImplementation.AUTO,
                 cluster_resolver: ClusterResolver | None = None) -> None:
        super().__init__(cluster_resolver, Options(implementation=communication))


class MirroredStrategy(Strategy):
    """Synchronous data parallelism over several devices of one worker (``tf.distribute.MirroredStrategy``)."""

    def __init__(self, devices: list[str] | tuple[str, ...] | None = None, cross_device_ops: Any = None) -> None:
        check_cross_device_ops(cross_device_ops)
        env = current_environment()
        if not devices:  # None or empty: every logical GPU, else every logical CPU, as TF
            devices = device_config.mirrored_devices()
        if isinstance(devices, str):  # TF iterates the string and parses each character as a device
            char = next((c for c in devices if c != "/"), devices)
            raise ValueError(f"Unknown attribute '{char}' is encountered while parsing the device spec: '{char}'.\n"
                             f"Fix: pass a list of devices, e.g. MirroredStrategy([{devices!r}]).")
        devices = tuple(local_device(d) for d in devices)
        if len(set(devices)) != len(devices):
            raise AssertionError(f"No duplicates allowed in `devices` argument: {devices}")
        extended = StrategyExtended(self, env.local_runtime(devices), Options())
        extended._is_mirrored = True
        super().__init__(extended)


class _DefaultExtended(StrategyExtended):
    """The default strategy's ``extended``: TF's ``_DefaultDistributionExtended`` has no device lists."""

    _tf_single_name = "_DefaultDistributionExtended"

    @property
    def worker_devices(self) -> tuple[str, ...]:
        raise RuntimeError(_unsupported_by_default("worker_devices"))

    @property
    def parameter_devices(self) -> tuple[str, ...]:
        raise RuntimeError(_unsupported_by_default("parameter_devices"))

    def non_slot_devices(self, var_list: Sequence[Any]) -> Any:
        """TF's default answer: the variable with the smallest name (ValueError for an empty list)."""
        return min(var_list, key=lambda v: v.name)

    def update_non_slot(self, colocate_with: Any, fn: Callable[..., Any], args: Sequence[Any] = (),
                        kwargs: dict | None = None, group: bool = True) -> Any:
        """``fn(*args, **kwargs)`` once; ungrouped, each leaf of its result as a one-element tuple."""
        self._strategy()._require_cross_replica(CROSS_REPLICA_REQUIRED)
        result = fn(*args, **(kwargs or {}))
        return result if group else nest.map_structure(lambda leaf: (leaf,), result)

    def _broadcast_to(self, tensor: Any, destinations: Any) -> Any:
        """TF's default strategy does not broadcast (its NotImplementedError says "TODO")."""
        raise NotImplementedError("TODO\nFix: the default strategy cannot broadcast; call broadcast_to on the "
                                  "extended of a strategy you created (inside its scope).")


def _unsupported_by_default(method: str) -> str:
    """TF's RuntimeError text for a device query on the default strategy, with the fix."""
    return (f"{method}() method unsupported by default tf.distribute.Strategy.\nFix: ask a strategy you created "
            "(inside its scope, tf.distribute.get_strategy() returns it).")


class _DefaultStrategy(Strategy):
    """The strategy in effect outside any scope: one replica, plain variables."""

    _is_default = True
    _single_plain = True


class OneDeviceStrategy(Strategy):
    """``tf.distribute.OneDeviceStrategy(device)``: everything on one device, with a scope of its own, plain
    variables that remember it, and values handed back as given (TF's StrategyBase defaults)."""

    _single_plain = True

    def __init__(self, device: str) -> None:
        env = current_environment()
        extended = StrategyExtended(self, env.local_runtime([local_device(device)]), Options())
        super().__init__(extended)


_DEFAULT: list[_DefaultStrategy] = []


def default_strategy() -> Strategy:
    """The process-wide default strategy (created on first use)."""
    if not _DEFAULT:
        from ..runtime.local import LocalEnvironment

        runtime = LocalEnvironment().local_runtime(["/job:localhost/replica:0/task:0/device:CPU:0"])
        strategy = _DefaultStrategy.__new__(_DefaultStrategy)
        Strategy.__init__(strategy, _DefaultExtended(strategy, runtime, Options()))
        _DEFAULT.append(strategy)
    return _DEFAULT[0]
