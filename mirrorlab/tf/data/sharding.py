"""Per-worker input pipelines, exactly as TF 2.21 builds them for ``experimental_distribute_dataset``.

1. Rebatch: with a static global batch size G, each worker's stream is re-split into TF's
   ``batch_sizes_for_worker`` sizes (RebatchDatasetV2); otherwise the legacy ceil split is used.
2. Auto-shard by policy: OFF (nothing), FILE (shard the file list under every reader; a source that
   is not a file reader, or an op TF's walk does not pass, cannot be sharded; ``assert_cardinality`` is dropped;
   under a flat_map, an inner flat_map over tensor slices has its output sharded), DATA (legacy ceil split of each
   global batch, then keep every W-th piece), AUTO (FILE for file readers, else DATA with TF's warning), HINT. An explicit FILE policy
   on a source that is not a file reader raises NotFoundError right away, as TF does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import errors, nest
from .cardinality import AssertCardinalityDataset
from ...distribute.batch_split import batch_sizes_for_worker
from .batching import LegacyRebatchDataset, NotBatchedError, RebatchDataset, compute_batch_size
from .dataset import Dataset, PassThroughDataset, PrefetchDataset, ShardDataset, UnaryDataset, UnknownSpecError
from .shuffling import ShuffleDataset
from .options import SHARD_HINT, AutoShardPolicy
from .sources import FlatMapDataset, ReaderDataset, SourceDataset, TensorDataset, TensorSliceDataset

__all__ = ["worker_pipeline", "auto_shard", "DeclaredShapeError"]

log = logging.getLogger("mirrorlab")


def _transform(node: Dataset, visit: Callable[[Dataset], Dataset | None]) -> Dataset:
    """Rebuild the graph bottom-up, replacing the nodes for which ``visit`` returns a new node."""
    replaced = visit(node)
    if replaced is not None:
        return replaced
    inputs = tuple(_transform(child, visit) for child in node._inputs)
    if all(a is b for a, b in zip(inputs, node._inputs)):
        return node
    return node._replace_inputs(inputs)


def _shard_file_names(names: Dataset, num_workers: int, index: int) -> Dataset:
    """Shard the file-name dataset, moving an upstream shuffle after the shard (as TF does)."""
    if isinstance(names, ShuffleDataset):
        return names._replace_inputs((_shard_file_names(names._inputs[0], num_workers, index),))
    return ShardDataset(names, num_workers, index, require_non_empty=True)


def _flat_map_of_slices(node: Dataset) -> Dataset | None:
    """The first flat_map/interleave over tensor slices (a reader of a list of files is one) found walking up from
    ``node`` through ops that pass elements on one by one, as TF's ``FindFuncAndTensorSliceDataset``; None if an op on
    the way is of another kind."""
    while True:
        if isinstance(node, (ReaderDataset, FlatMapDataset)):
            return node if isinstance(node._inputs[0], (TensorSliceDataset, TensorDataset)) else None
        if not isinstance(node, UnaryDataset) or node._stops_file_sharding or isinstance(
                node, AssertCardinalityDataset):
            return None
        node = node._inputs[0]


def _shard_after(dataset: Dataset, node: Dataset, num_workers: int, index: int) -> Dataset:
    """``dataset`` with its elements sharded right after ``node`` (a node upstream of it)."""
    return _transform(dataset, lambda n: ShardDataset(n, num_workers, index, require_non_empty=True)
                      if n is node else None)


def shard_by_file(dataset: Dataset, num_workers: int, index: int) -> Dataset:
    """Shard the input of every file reader; raises NotFoundError if a source is not a file reader. Under a
    flat_map/interleave, a flat_map over tensor slices (a reader of a list of files among them) found through ops
    that pass elements on has its *output* sharded instead, element by element (TF's rule for
    ``Placeholder -> TensorSliceDataset -> FlatMapDataset -> ... -> InterleaveDataset``)."""
    def visit(node: Dataset) -> Dataset | None:
        if isinstance(node, FlatMapDataset):
            found = _flat_map_of_slices(node._inputs[0])
            if found is not None:
                return _shard_after(node, found, num_workers, index)
        if isinstance(node, ReaderDataset) or (isinstance(node, FlatMapDataset) and node.reads_files()):
            return node._replace_inputs((_shard_file_names(node._inputs[0], num_workers, index),))
        if isinstance(node, AssertCardinalityDataset):  # TF drops it: a worker reads only its files' elements
            return _transform(node._inputs[0], visit)
        if isinstance(node, SourceDataset):
            raise errors.NotFoundError(f"Found an unshardable source dataset: {node.describe()}")
        if node._stops_file_sharding:
            raise errors.NotFoundError(
                f"Did not find a shardable source, walked to a node which is not a dataset: {type(node).__name__}. "
                "Consider either turning off auto-sharding or switching the auto_shard_policy to DATA to shard this "
                "dataset. You can do this by creating a new `tf.data.Options()` object then setting `options."
                "experimental_distribute.auto_shard_policy = AutoShardPolicy.DATA` before applying the options "
                "object to the dataset via `dataset.with_options(options)`.")
        return None

    return _transform(dataset, visit)


class DeclaredShapeError(errors.InvalidArgumentError):
    """An element does not have the shape its pipeline declares, which TF's iterator checks when it hands the element
    out (``optional()``: the text of the check of ``get_next_as_optional``)."""

    def __init__(self, component: int, expected: str, actual: str) -> None:
        super().__init__(f"Incompatible shapes at component {component}: expected {expected} but got {actual}. "
                         "[Op:IteratorGetNext] name: ")
        self.details = (component, expected, actual)

    def optional(self) -> errors.InvalidArgumentError:
        """The same mismatch as TF's IteratorGetNextAsOptional reports it."""
        component, expected, actual = self.details
        return errors.InvalidArgumentError(
            f"The given optional does not match the expected shape for component {component}. Expected: {expected}. "
            f"Actual: {actual}. [Op:IteratorGetNextAsOptional] name: ")


def _shape_text(dims: tuple) -> str:
    """A shape as TF prints a partial shape: ``[5,?]``."""
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


class DeclaredShapesDataset(UnaryDataset):
    """Its input's elements, checked against the spec a rewritten node declared: TF's DATA sharding turns a final
    RebatchDatasetV2 (a user's ``rebatch`` too) into a legacy rebatch whose slices need not have the static batch
    size the V2 rebatch promised, and the iterator then refuses them."""

    def __init__(self, input_dataset: Dataset, declared: Any) -> None:
        super().__init__(input_dataset)
        self.declared = declared

    def _iterate(self) -> Iterator[Any]:
        specs = nest.flatten(self.declared)
        fitting: set[tuple[int, tuple]] = set()  # (component, shape) pairs already checked (most elements repeat one)
        for element in self._input:
            for k, (spec, value) in enumerate(zip(specs, nest.flatten(element), strict=True)):
                actual = tuple(np.shape(value))
                if (k, actual) in fitting:
                    continue
                if len(actual) != len(spec.shape) or any(d is not None and d != a for d, a in zip(spec.shape, actual)):
                    raise DeclaredShapeError(k, _shape_text(spec.shape), _shape_text(actual))
                fitting.add((k, actual))
            yield element

    @property
    def element_spec(self) -> Any:
        return self.declared


def _legacy(rebatch: RebatchDataset, num_replicas: int) -> Dataset:
    """The legacy rebatch DATA sharding puts in place of ``rebatch``, checked against a static batch size that
    ``rebatch`` declared."""
    legacy = LegacyRebatchDataset(rebatch._inputs[0], num_replicas)
    try:
        declared = rebatch.element_spec
    except UnknownSpecError:
        return legacy
    static = any(s.shape and s.shape[0] is not None for s in nest.flatten(declared))
    return DeclaredShapesDataset(legacy, declared) if static else legacy


def shard_by_data(dataset: Dataset, num_workers: int, index: int, num_replicas: int) -> Dataset:
    """Keep every ``num_workers``-th element (sub-batch) from ``index``, switching a V2 rebatch to the
    legacy ceil split first; the shard goes below any trailing prefetch/options nodes."""
    trailing: list[Dataset] = []
    node = dataset
    while isinstance(node, PassThroughDataset):
        trailing.append(node)
        node = node._inputs[0]
    if isinstance(node, RebatchDataset):
        node = _legacy(node, num_replicas)
    node = ShardDataset(node, num_workers, index)
    for wrapper in reversed(trailing):
        node = wrapper._replace_inputs((node,))
    return node


def shard_by_hint(dataset: Dataset, num_workers: int, index: int) -> Dataset:
    def visit(node: Dataset) -> Dataset | None:
        if isinstance(node, ShardDataset) and node.num_shards == SHARD_HINT:
            return ShardDataset(_transform(node._inputs[0], visit), num_workers, index)
        return None

    return _transform(dataset, visit)


def auto_shard(dataset: Dataset, num_workers: int, index: int, num_replicas: int) -> Dataset:
    """Apply the dataset's auto-shard policy for worker ``index`` of ``num_workers``."""
    policy = dataset.options().experimental_distribute.auto_shard_policy
    if policy == AutoShardPolicy.OFF or (policy == AutoShardPolicy.FILE and num_workers == 1 and index == 0):
        return dataset
    if policy == AutoShardPolicy.HINT:
        return shard_by_hint(dataset, num_workers, index)
    if policy in (AutoShardPolicy.FILE, AutoShardPolicy.AUTO):
        try:
            return shard_by_file(dataset, num_workers, index)
        except errors.NotFoundError as exc:
            if policy == AutoShardPolicy.FILE:
                raise  # TF reports it from experimental_distribute_dataset itself
            if num_workers > 1:  # TF logs the fallback only where there is more than one worker to shard for
                log.warning("AUTO sharding policy will apply DATA sharding policy as it failed to apply FILE sharding "
                            "policy because of the following reason: %s", exc.message)
    return shard_by_data(dataset, num_workers, index, num_replicas)


def worker_pipeline(dataset: Dataset, num_workers: int, index: int, replicas_per_worker: int) -> Dataset:
    """The stream worker ``index`` reads: rebatched per replica, then auto-sharded; each step the worker
    takes ``replicas_per_worker`` consecutive elements."""
    num_replicas = num_workers * replicas_per_worker
    if num_replicas > 1:
        try:
            batch_size = compute_batch_size(dataset)
        except NotBatchedError as exc:
            raise ValueError(f"Call the `batch` method on the input Dataset in order to be able to split your input "
                             f"across {num_replicas} replicas.\n Please see the tf.distribute.Strategy guide. "
                             f"{exc}") from None
        if batch_size != -1:
            sizes = batch_sizes_for_worker(batch_size, num_workers, replicas_per_worker, index)
            dataset = RebatchDataset(dataset, sizes, drop_remainder=False)
        else:
            dataset = LegacyRebatchDataset(dataset, num_replicas)
        dataset = PrefetchDataset(dataset, replicas_per_worker)
    return auto_shard(dataset, num_workers, index, num_replicas)
