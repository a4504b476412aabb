"""Distributed datasets: each worker reads its own stream, each replica takes one element per step.

Like TF, workers agree every step on whether *any* replica still has data (a SUM all-reduce of the
local count), so a worker whose shard ends early keeps stepping with empty batches and no collective
ever desyncs; when nobody has data, every worker stops together. A pipeline error on one worker aborts
the group, so the other workers learn why instead of hanging (TF: "Socket closed").
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import errors, nest
from ..aggregation import ReduceOp
from ..callsite import user_call_site
from ..frontend import current_frontend
from ..tensor import tensors_out
from . import context
from .input_context import InputContext
from .regroup import regroup
from .values import PerReplicaSpec, ReplicaValues

if TYPE_CHECKING:
    from .strategy import Strategy

__all__ = ["DistributedDataset", "DistributedIterator", "InputOptions", "InputReplicationMode"]

NEXT_IN_REPLICA = ("next(iterator) should be called from outside of replica_fn. e.g. "
                   "strategy.run(replica_fn, args=(next(iterator),))")


class InputReplicationMode:
    """TF's ``tf.distribute.InputReplicationMode``."""

    PER_WORKER = "PER_WORKER"
    PER_REPLICA = "PER_REPLICA"


class InputOptions(namedtuple("InputOptions", ["experimental_fetch_to_device", "experimental_replication_mode",
                                                "experimental_place_dataset_on_device",
                                                "experimental_per_replica_buffer_size"])):
    """TF's ``tf.distribute.InputOptions`` (a namedtuple; the replication mode decides how input is split,
    the placement fields are checked as TF checks them)."""

    def __new__(cls, experimental_fetch_to_device: bool | None = None,
                experimental_replication_mode: str = InputReplicationMode.PER_WORKER,
                experimental_place_dataset_on_device: bool = False,
                experimental_per_replica_buffer_size: int = 1) -> "InputOptions":
        fetch = True if experimental_fetch_to_device is None else experimental_fetch_to_device
        return super().__new__(cls, fetch, experimental_replication_mode, experimental_place_dataset_on_device,
                               experimental_per_replica_buffer_size)


def _check_placement(options: InputOptions | None) -> None:
    """TF's refusals of dataset placements that contradict the replication mode (from_function only)."""
    if options is None or not options.experimental_place_dataset_on_device:
        return
    if options.experimental_replication_mode != InputReplicationMode.PER_REPLICA:
        raise ValueError("When `experimental_place_dataset_on_device` is set for dataset placement, you must also "
                         "specify `PER_REPLICA` for the replication mode")
    if options.experimental_fetch_to_device:
        raise ValueError("`experimental_place_dataset_on_device` can not be set to True when "
                         "experimental_fetch_to_device is True and replication mode is set to `PER_REPLICA`")


def _per_replica(strategy: Strategy, options: InputOptions | None, from_function: bool) -> bool:
    """Whether the input is replicated per replica; TF's refusals where that mode does not exist."""
    if from_function:
        _check_placement(options)
    if options is None or options.experimental_replication_mode != InputReplicationMode.PER_REPLICA:
        return False
    if not strategy.extended._is_mirrored:
        raise NotImplementedError("InputReplicationMode.PER_REPLICA is only supported in "
                                  "`distribute_datasets_from_function` of tf.distribute.MirroredStrategy")
    if not from_function:
        raise NotImplementedError("InputReplicationMode.PER_REPLICA is only supported in "
                                  "`distribute_datasets_from_function`.")
    return True


class DistributedDataset:
    """What ``experimental_distribute_dataset`` / ``distribute_datasets_from_function`` return."""

    def __init__(self, strategy: Strategy, streams: list[Any], original: Any, from_dataset: bool) -> None:
        self._strategy = strategy
        self._from_dataset = from_dataset
        self._streams = streams  # one for the whole worker (replicas take turns), or one per local replica
        self._original = original
        self._partial = _handles_partial_batches(strategy, original)

    @classmethod
    def from_dataset(cls, strategy: Strategy, dataset: Any, options: InputOptions | None) -> DistributedDataset:
        _per_replica(strategy, options, from_function=False)
        if isinstance(dataset, DistributedDataset):  # TF fails reading its graph handle
            raise AttributeError("'DistributedDataset' object has no attribute '_variant_tensor'\nFix: distribute the "
                                 "original dataset once; a distributed dataset is distributed already.")
        frontend = current_frontend()
        if not frontend.is_dataset(dataset):
            raise TypeError(f"experimental_distribute_dataset expects a mirrorlab.tf.data.Dataset, got "
                            f"{type(dataset).__name__}")
        ext = strategy.extended
        stream = frontend.worker_pipeline(dataset, ext._num_workers, ext._rank, len(ext._devices))
        return cls(strategy, [stream], dataset, from_dataset=True)

    @classmethod
    def from_function(cls, strategy: Strategy, dataset_fn: Callable[[InputContext], Any],
                      options: InputOptions | None) -> DistributedDataset:
        ext = strategy.extended
        contexts = (ext._make_replica_input_contexts() if _per_replica(strategy, options, from_function=True)
                    else [ext._make_input_context()])
        datasets = [dataset_fn(ctx) for ctx in contexts]
        for dataset in datasets:
            if not current_frontend().is_dataset(dataset):
                raise AttributeError(f"'{type(dataset).__name__}' object has no attribute 'element_spec'\nFix: "
                                     "dataset_fn must return a mirrorlab.tf.data.Dataset (e.g. Dataset.from_tensor_slices"
                                     "(values).batch(ctx.get_per_replica_batch_size(global_batch))).")
        return cls(strategy, datasets, datasets[0], from_dataset=False)

    def __iter__(self) -> DistributedIterator:
        return DistributedIterator(self)

    @property
    def element_spec(self) -> Any:
        """Each replica's element spec, wrapped in PerReplicaSpec when the worker has several replicas (as
        TF): the input's spec (``distribute_datasets_from_function``), or its static global batch split evenly
        over the replicas (else unknown). Workers that can get partial batches have an unknown batch size."""
        ext = self._strategy.extended
        replicas = self._strategy.num_replicas_in_sync
        dynamic = self._partial and ext._num_workers > 1

        frontend = current_frontend()

        def replica_spec(spec: Any) -> Any:
            if not frontend.is_spec(spec) or not spec.shape:
                return spec
            batch = spec.shape[0]
            if self._from_dataset and batch is not None:
                batch = batch // replicas if batch % replicas == 0 else None
            return frontend.spec((None if dynamic else batch, *spec.shape[1:]), spec.dtype)

        spec = nest.map_structure(replica_spec, self._original.element_spec)
        count = len(ext._devices)
        return nest.map_structure(lambda s: PerReplicaSpec(*[s] * count), spec) if _always_wrap(ext) else spec

    @property
    def cardinality(self) -> np.int64:
        """Steps per pass, a property as in TF (-1 infinite, -2 unknown); the input dataset's count."""
        return np.int64(self._original._cardinality())

    def reduce(self, initial_state: Any, reduce_fn: Callable[[Any, Any], Any]) -> Any:
        """``reduce_fn(state, per-replica element)`` folded over one pass, from ``initial_state`` (TF's loop)."""
        state = initial_state
        for element in self:
            state = reduce_fn(state, element)
        return state


def dummy_batch(spec: Any) -> Any:
    """What a replica without data gets (TF's dummy tensors): zeros with the unknown dimensions 0, and the first
    one 0 too when the shape is fully known (TF takes it as the batch dimension); a known first dimension of a
    shape with unknown ones stays."""
    def dummy(s: Any) -> np.ndarray:
        dims = [0 if d is None else d for d in s.shape]
        if dims and None not in s.shape:
            dims[0] = 0
        return np.zeros(dims, s.dtype)
    return nest.map_structure(dummy, spec)


def _always_wrap(ext: Any) -> bool:
    """TF's ``_always_wrap``: elements (and specs) are per-replica on several workers or several local replicas;
    only a single-device, single-worker strategy hands out plain values."""
    return ext._num_workers > 1 or len(ext._devices) > 1


def _is_static(spec: Any) -> bool:
    """Whether every component's shape is fully known."""
    return all(s.shape is not None and None not in s.shape for s in nest.flatten(spec))


def _handles_partial_batches(strategy: Strategy, dataset: Any) -> bool:
    """TF's ``_enable_get_next_as_optional``: replicas without data get empty batches (and workers agree on
    the end) unless the input is infinite; with one worker only when its element shapes are not static (with
    static shapes the first replica to run out ends the pass)."""
    frontend = current_frontend()
    if dataset._cardinality() == frontend.infinite_cardinality:
        return False
    if strategy.extended._num_workers > 1:
        return True
    try:
        return not _is_static(dataset.element_spec)
    except frontend.unknown_spec_error:
        return True


class DistributedIterator:
    """Yields, per step, one element per local replica (PerReplica; plain with one replica)."""

    def __init__(self, dataset: DistributedDataset) -> None:
        self._dataset = dataset
        self._strategy = dataset._strategy
        self._streams: list[Iterator[Any]] = [iter(stream) for stream in dataset._streams]
        self._spec: Any = None
        self._done = False
        # TF agrees on "has data" across workers every step when it handles partial batches.
        self._agree = dataset._partial and self._strategy.extended._num_workers > 1

    def __iter__(self) -> DistributedIterator:
        return self

    def get_next(self) -> Any:
        """The next step's values; at the end ``OutOfRangeError`` (``next()`` raises StopIteration), as TF."""
        try:
            return self.__next__()
        except StopIteration:
            raise errors.OutOfRangeError("End of sequence [Op:IteratorGetNext] name: \nFix: iterate with `for` or "
                                         "`get_next_as_optional()` to stop at the end of the data.") from None

    def __next__(self) -> Any:
        return self._step(self._dataset._partial)

    def _step(self, partial: bool) -> Any:
        """One step's values; ``partial``: replicas without data get dummy batches (else the first replica to run
        out ends the pass)."""
        frame = context.current_frame()
        if frame is not None and frame.replica is not None:
            raise ValueError(NEXT_IN_REPLICA)
        if self._done:
            raise StopIteration
        ext = self._strategy.extended
        local = [self._pull(ext, self._streams[k % len(self._streams)], partial) for k in range(len(ext._devices))]
        have = sum(v is not None for v in local)
        if not partial and have < len(local):
            self._done = True
            raise StopIteration
        if self._agree:
            counts = ext._group.all_reduce(ReduceOp.SUM, [[np.asarray(have, np.int64)]], user_call_site())
            have_any = int(counts[0]) > 0
        else:
            have_any = have > 0
        if not have_any:
            self._done = True
            raise StopIteration
        filled = [v if v is not None else dummy_batch(self._element_spec()) for v in local]
        # each on its replica's GPU, as tensors (an empty or dummy batch too, as TF's)
        return regroup([tensors_out(ext._placement.put(v, k)) for k, v in enumerate(filled)],
                       always_wrap=_always_wrap(ext))

    def _pull(self, ext: Any, stream: Iterator[Any], partial: bool) -> Any:
        """The next element of ``stream`` (None at its end). A pipeline error on a multi-worker cluster aborts the
        group, telling the other workers (which wait in this step's collectives) why; one worker alone just raises
        it, and its strategy stays usable, as TF's does (a shape the iterator declared and the element breaks is
        reported as an optional's when partial batches are handled: TF reads optionals then)."""
        try:
            element = next(stream, None)
        except errors.OpError as exc:
            if isinstance(exc, current_frontend().declared_shape_error):  # reported by the iterator: as an optional's when TF uses them
                exc = exc.optional() if partial else errors.InvalidArgumentError(exc.message)
            self._tell_peers(ext, f"{exc.message}\n(raised by the input pipeline of worker {ext._rank}, "
                                  f"{ext._group.comm.names[ext._rank]})")
            raise exc from None
        except Exception as exc:
            self._tell_peers(ext, f"the input pipeline of worker {ext._rank} ({ext._group.comm.names[ext._rank]}) "
                                  f"raised {type(exc).__name__}: {exc}")
            raise
        return element

    @staticmethod
    def _tell_peers(ext: Any, message: str) -> None:
        """Abort the group with ``message``: the peers, waiting in a collective, get it as TF's UnavailableError
        (TF's peers learn only that the collective was aborted; mirrorlab says by what)."""
        if ext._num_workers > 1:
            ext._group.comm.fail(errors.UnavailableError(message))

    def _element_spec(self) -> Any:
        """The spec of what a replica gets: its worker's stream (after TF's per-replica rebatch)."""
        if self._spec is None:
            self._spec = self._dataset._streams[0].element_spec
        return self._spec

    def get_next_as_optional(self) -> Any:
        """The next per-replica value wrapped in an ``Optional`` (empty at the end instead of raising). As TF 2.21,
        this always hands out partial batches (replicas without data get dummy batches) whatever ``next()`` does,
        except for an infinite input (``get_next``'s value, never empty) and, on one worker, an input of
        cardinality 0 (empty at once)."""
        frontend = current_frontend()
        cardinality = self._dataset._original._cardinality()
        if cardinality == frontend.infinite_cardinality:
            value = self.get_next()
        elif cardinality == 0 and self._strategy.extended._num_workers == 1:
            return frontend.optional(None, self.element_spec, False)
        else:
            try:
                value = self._step(partial=True)
            except StopIteration:
                return frontend.optional(None, self.element_spec, False)
        return frontend.optional(value, nest.map_structure(self._value_spec, value), True)

    def _value_spec(self, value: Any) -> Any:
        """The spec of one leaf of a step's value, from its arrays (TF's ``Optional.from_value``)."""
        spec_of = current_frontend().spec_of
        if isinstance(value, ReplicaValues):
            return PerReplicaSpec(*[spec_of(v) for v in self._strategy.experimental_local_results(value)])
        return spec_of(value)

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec
