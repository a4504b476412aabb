"""Batching and TF's two rebatching rules (used to split global batches across replicas).

* ``RebatchDataset`` (TF's RebatchDatasetV2): ``unbatch().batch(sizes cycled)``, crossing input batch
  boundaries; a desired size of 0 yields an empty batch; used for OFF/FILE sharding.
* ``LegacyRebatchDataset``: every input batch of size b is cut into N slices of ``ceil(b / N)``;
  slices past the end are empty elements; used for DATA sharding and unknown batch sizes.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import errors, nest
from ...distribute.batch_split import legacy_slices
from .dataset import (UNKNOWN_CARDINALITY, CacheDataset, Dataset, DatasetSpec, FilterDataset, MapDataset,
                      PassThroughDataset, RepeatDataset, ShardDataset, SkipDataset, TakeDataset, TensorSpec,
                      UnaryDataset, UnknownSpecError, cdiv, cmod, counted, pipeline_options)
from .cardinality import AssertCardinalityDataset
from .combining import ConcatenateDataset, ZipDataset
from .failures import Failed, attempt, elements
from .shuffling import ShuffleDataset
from .sources import ElementsDataset
from .tensors import canonical

__all__ = ["BatchDataset", "UnbatchDataset", "RebatchDataset", "LegacyRebatchDataset", "WindowDataset",
           "compute_batch_size", "empty_batch", "NotBatchedError"]


def stack(elements: list[Any]) -> Any:
    """Stack a list of same-structured elements along a new first axis (TF's batch kernel)."""
    flat = [nest.flatten(e) for e in elements]
    out = []
    for c in range(len(flat[0])):
        parts = [f[c] for f in flat]
        for i, p in enumerate(parts[1:], start=1):
            if p.shape != parts[0].shape:
                raise errors.InvalidArgumentError(
                    f"Cannot batch tensors with different shapes in component {c}. First element had shape "
                    f"{_dims(parts[0].shape)} and element {i} had shape {_dims(p.shape)}.")
        out.append(canonical(np.stack(parts)))
    return nest.pack_sequence_as(elements[0], out)


def _dims(shape: tuple) -> str:
    """A shape as TF's TensorShape prints it: ``[2,3]``."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def empty_batch(spec: Any) -> Any:
    """An element whose components have batch dimension 0 (unknown dims become 0, as in TF)."""
    return nest.map_structure(
        lambda s: np.zeros((0,) + tuple(0 if d is None else d for d in s.shape[1:]), dtype=s.dtype), spec)


def _batch_spec(spec: Any, size: int | None) -> Any:
    return nest.map_structure(lambda s: TensorSpec((size, *s.shape), s.dtype), spec)


def _unbatched_spec(spec: Any) -> Any:
    def drop(s: TensorSpec) -> TensorSpec:
        if not s.shape:
            raise ValueError("Cannot unbatch or rebatch an input with scalar components: every component needs a "
                             "batch dimension. Perhaps your input dataset is not batched?")
        return TensorSpec(s.shape[1:], s.dtype)
    return nest.map_structure(drop, spec)


def _fit_map_and_batch(first: Any, element: Any) -> Any:
    """``element`` as TF's fused MapAndBatch kernel copies it into a batch allocated from ``first``: every component
    must have as many values as ``first``'s (else TF's error, even in a batch that is dropped later); one of another
    shape with as many values is taken in ``first``'s shape (the kernel copies values, not shapes)."""
    def fit(start: Any, value: Any) -> Any:
        if np.size(value) != np.size(start):
            raise errors.InvalidArgumentError(
                f"Cannot add tensor to the batch: number of elements does not match. Shapes are: [tensor]: "
                f"{_dims(np.shape(value))}, [batch]: {_dims(np.shape(start))}")
        return np.reshape(value, np.shape(start))
    return nest.map_structure(fit, first, element, check_types=False)


class BatchDataset(UnaryDataset):
    """``batch``: consecutive elements stacked (``_combine`` makes one batch of a list of elements). After a map, TF's
    default map_and_batch_fusion makes it the fused kernel's batch (``_fit_map_and_batch``)."""

    _fuses_map = True  # padded_batch has no fused kernel

    def __init__(self, input_dataset: Dataset, batch_size: int, drop_remainder: bool) -> None:
        super().__init__(input_dataset)
        if batch_size <= 0:
            raise errors.InvalidArgumentError(f"Batch size must be greater than zero.\n(got {batch_size}) Fix: "
                                              "pass a positive batch_size.")
        self.batch_size = batch_size
        self.drop_remainder = drop_remainder

    def _combine(self, elements: list[Any]) -> Any:
        return stack(elements)

    def _iterate(self) -> Iterator[Any]:
        """With failures carried (failures.py): TF's batch drops the elements read so far and passes the failure
        on; the fused kernel reads the whole batch and fails it."""
        fused = self._fused_with_map()
        pending: list[Any] = []
        failure, taken = None, 0
        for element in elements(self._input):
            if type(element) is Failed and not fused:
                pending, taken = [], 0
                yield element
                continue
            taken += 1
            if failure is None:
                if fused and pending and type(element) is not Failed:
                    element = attempt(_fit_map_and_batch, pending[0], element)
                if type(element) is Failed:
                    failure = element
                else:
                    pending.append(element)
            if taken == self.batch_size:
                yield failure if failure is not None else attempt(self._combine, pending)
                pending, failure, taken = [], None, 0
        if taken and not self.drop_remainder:
            yield failure if failure is not None else attempt(self._combine, pending)

    def _fused_with_map(self) -> bool:
        """Whether TF fuses this batch with the map before it (map_and_batch_fusion, after noop_elimination has
        dropped identity maps)."""
        optimization = pipeline_options().experimental_optimization
        if not (self._fuses_map and optimization.enabled("map_and_batch_fusion")):
            return False
        node = self._input
        while isinstance(node, MapDataset) and optimization.enabled("noop_elimination") and node._is_noop():
            node = node._inputs[0]
        return isinstance(node, MapDataset)

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        if not counted(n):
            return n
        partial = 0 if self.drop_remainder or cmod(n, self.batch_size) == 0 else 1
        return cdiv(n, self.batch_size) + partial

    @property
    def element_spec(self) -> Any:
        return _batch_spec(self._input.element_spec, self.batch_size if self.drop_remainder else None)


def _rows(element: Any) -> int:
    """The number of rows of every component of ``element`` (TF's unbatch and rebatch kernels refuse differing ones)."""
    sizes = [int(np.shape(c)[0]) for c in nest.flatten(element)]
    if len(set(sizes)) > 1:
        other = next(k for k, size in enumerate(sizes) if size != sizes[0])
        raise errors.InvalidArgumentError(
            f"Input element must have the same batch size in each component. Component 0 had size {sizes[0]} but "
            f"component {other} had size, {sizes[other]}.")
    return sizes[0] if sizes else 0


def _slice(element: Any, start: int, stop: int) -> Any:
    return nest.map_structure(lambda c: c[start:stop], element)


def _concat(pieces: list[Any]) -> Any:
    """The slices of one rebatched batch joined along the batch axis; TF's error when a slice's other dimensions
    are not those of the first (the kernel copies every slice into a batch shaped after the first)."""
    if len(pieces) == 1:
        return pieces[0]

    def join(*parts: Any) -> Any:
        batch = (sum(int(np.shape(p)[0]) for p in parts), *np.shape(parts[0])[1:])
        for part in parts[1:]:
            if np.shape(part)[1:] != batch[1:]:
                raise errors.FailedPreconditionError(
                    "MaybeMoveContiguousSlices cannot perform copy: source and dst shapes arenot compatible. Source "
                    f"shape: {_dims(np.shape(part))}, dst shape: {_dims(batch)}")
        return np.concatenate(parts, axis=0)
    return nest.map_structure(join, *pieces)


class UnbatchDataset(UnaryDataset):
    """``unbatch``: the rows of every element (every component needs the same first dimension)."""

    def __init__(self, input_dataset: Dataset) -> None:
        super().__init__(input_dataset)
        try:
            specs = nest.flatten(input_dataset.element_spec)
        except UnknownSpecError:
            specs = []
        if any(s.shape == () for s in specs):
            raise ValueError("Cannot unbatch an input with scalar components.\nFix: unbatch splits the first "
                             "dimension of every component; batch the dataset (or drop the unbatch) first.")

    def _iterate(self) -> Iterator[Any]:
        for element in elements(self._input):
            if type(element) is Failed:
                yield element
                continue
            rows = attempt(_rows, element)
            if type(rows) is Failed:
                yield rows
                continue
            for i in range(rows):
                yield nest.map_structure(lambda c: canonical(c[i]), element)

    def _cardinality(self) -> int:
        """TF's: the input's count times its static batch size, when every component has the same one."""
        n = self._input._cardinality()
        if not counted(n):
            return n
        try:
            firsts = {s.shape[0] if s.shape else None for s in nest.flatten(self._input.element_spec)}
        except UnknownSpecError:
            return UNKNOWN_CARDINALITY
        size = firsts.pop() if len(firsts) == 1 else None
        return n * size if size else UNKNOWN_CARDINALITY  # TF: only a known, positive batch size counts

    @property
    def element_spec(self) -> Any:
        return _unbatched_spec(self._input.element_spec)


def rebatch_sizes(batch_size: Any) -> list[int]:
    """``Dataset.rebatch``'s ``batch_size`` as a list of sizes, refused as TF converts it to an int64 scalar or
    vector: Python floats and strings (TypeError), None and higher ranks (ValueError)."""
    if batch_size is None:
        raise ValueError("Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a "
                         "Tensor.")
    if isinstance(batch_size, np.ndarray) and batch_size.dtype.kind in "iubf":
        sizes = batch_size.astype(np.int64)
    else:
        sizes = np.asarray(batch_size, dtype=object)
        if not all(isinstance(v, (int, np.integer)) for v in sizes.ravel()):
            shown = repr(batch_size) if isinstance(batch_size, str) else str(batch_size)
            raise TypeError(f"Cannot convert {shown} to EagerTensor of dtype int64")
    if sizes.ndim > 1:
        raise ValueError(f"Invalid `batch_sizes`. Expected `batch_sizes` to be a scalar or a vector. Received "
                         f"`batch_sizes` of rank {sizes.ndim}.")
    return [int(v) for v in sizes.ravel()]


class RebatchDataset(UnaryDataset):
    """TF's RebatchDatasetV2 kernel: cycle through ``batch_sizes``, slicing across input batches."""

    @classmethod
    def from_user(cls, input_dataset: Dataset, batch_size: Any, drop_remainder: bool) -> "RebatchDataset":
        """``Dataset.rebatch``: TF's checks of the sizes and of the input, made when the dataset is built. Without
        ``drop_remainder`` one repeated size makes TF infer a static batch size from the input first (its own
        errors for scalars and differing batch dimensions). TF accepts negative sizes and then hangs in the
        kernel; mirrorlab refuses them here."""
        sizes = rebatch_sizes(batch_size)
        if not sizes:
            raise errors.InvalidArgumentError("batch_sizes must be non-empty and non-negative, got []")
        try:
            specs = nest.flatten(input_dataset.element_spec)
        except UnknownSpecError:
            specs = []
        scalars = any(s.shape == () for s in specs)
        if not drop_remainder and len(set(sizes)) == 1:
            if scalars:
                raise ValueError("Invalid `batch_sizes`. Expected dataset with rank of >= 1 but found a dataset with "
                                 "scalar elements. Fix the issue by adding the `batch` transformation to the dataset.")
            known = [s.shape[0] for s in specs if s.shape and s.shape[0] is not None]
            if len(set(known)) > 1:
                raise ValueError(f"Invalid `input_dataset.` The batch dimension of component 0 is {known[0]}, while "
                                 f"the batch dimension of component i is {np.array(known)}.")
        elif scalars:
            raise ValueError("Unbatching a tensor is only supported for rank >= 1")
        if drop_remainder and len(set(sizes)) == 1 and sizes[0] < 0:
            raise ValueError(f"Dimension {sizes[0]} must be >= 0")
        return cls(input_dataset, sizes, drop_remainder)

    def __init__(self, input_dataset: Dataset, batch_sizes: list[int], drop_remainder: bool) -> None:
        super().__init__(input_dataset)
        if not batch_sizes or any(b < 0 for b in batch_sizes):
            raise errors.InvalidArgumentError(f"batch_sizes must be non-empty and non-negative, got {batch_sizes}")
        self.batch_sizes = list(batch_sizes)
        self.drop_remainder = drop_remainder
        # Empty batches need the element type before any data is read. It comes from the input as built
        # here: graph rewrites (auto-sharding) keep this reference, and a worker's shard may be empty.
        self._spec_source = input_dataset

    def _iterate(self) -> Iterator[Any]:
        inputs = elements(self._input)
        current, offset, rows = None, 0, 0
        empty_spec = None  # read once: the input's spec may come from peeking at its first element
        end_of_input = False
        index = 0
        while not end_of_input or current is not None:
            desired = self.batch_sizes[index]
            pieces, size = [], 0
            while size < desired:
                if current is None:
                    current = next(inputs, None)
                    if current is not None and type(current) is not Failed:
                        rows = attempt(_rows, current)
                        if type(rows) is Failed:  # an element TF cannot rebatch fails like one that failed upstream
                            current = rows
                    if type(current) is Failed:  # passed on, the batch being built dropped (as TF's)
                        yield current
                        current, pieces, size = None, [], 0
                        continue
                    if current is None:
                        end_of_input = True
                        break
                    offset = 0
                take = min(desired - size, rows - offset)
                pieces.append(_slice(current, offset, offset + take))
                size += take
                offset += take
                if offset == rows:
                    current = None
            if size == 0 and desired > 0:
                return
            if size < desired and self.drop_remainder:
                return
            index = (index + 1) % len(self.batch_sizes)
            if size == 0:  # TF fills a size-0 batch from the static shapes (unknown dims become 0)
                if empty_spec is None:
                    empty_spec = self._spec_source.element_spec
                yield empty_batch(empty_spec)
            else:
                yield _concat(pieces)

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    @property
    def element_spec(self) -> Any:
        input_spec = self._input.element_spec
        return _batch_spec(_unbatched_spec(input_spec), self._static_size(input_spec))

    def _static_size(self, input_spec: Any) -> int | None:
        """The batch size every output has, as TF infers it: one size repeated, and either dropping the remainder
        or a first known input batch dimension that it divides (0 divides everything here, as in TF)."""
        if len(set(self.batch_sizes)) != 1:
            return None
        size = self.batch_sizes[0]
        if self.drop_remainder:
            return size
        known = [s.shape[0] for s in nest.flatten(input_spec) if s.shape and s.shape[0] is not None]
        return size if known and (size == 0 or known[0] % size == 0) else None


class LegacyRebatchDataset(UnaryDataset):
    """TF's legacy RebatchDataset: each input batch becomes ``num_replicas`` slices of ``ceil(b / N)``."""

    def __init__(self, input_dataset: Dataset, num_replicas: int) -> None:
        super().__init__(input_dataset)
        self.num_replicas = num_replicas

    def _iterate(self) -> Iterator[Any]:
        for element in elements(self._input):
            if type(element) is Failed:
                yield element
                continue
            if any(np.ndim(c) == 0 for c in nest.flatten(element)):
                raise errors.InvalidArgumentError(
                    "Cannot rebatch dataset: All components must have at least one dimension. Perhaps your input "
                    f"dataset is not batched? Component shapes: {[list(np.shape(c)) for c in nest.flatten(element)]}")
            for start, stop in legacy_slices(_rows(element), self.num_replicas):
                yield _slice(element, start, stop)

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        return n * self.num_replicas if n >= 0 else n

    @property
    def element_spec(self) -> Any:
        return _batch_spec(_unbatched_spec(self._input.element_spec), None)


class NotBatchedError(ValueError):
    """The pipeline has no ``batch`` to split across replicas."""


_PRESERVES_BATCH = (FilterDataset, RepeatDataset, ShuffleDataset, TakeDataset, SkipDataset, ShardDataset,
                    PassThroughDataset, CacheDataset, AssertCardinalityDataset)
_COMBINES_BATCHES = (ZipDataset, ConcatenateDataset)  # a batch size when all their inputs have the same one


def compute_batch_size(dataset: Dataset) -> int:
    """The global batch size as TF's ``compute_batch_size`` finds it: the static first dimension shared by
    every component of the element spec if there is one (``batch(G, drop_remainder=True)``, a fixed-size
    element); else by walking up through ops that keep the batch intact to a ``batch``; -1 when an op on
    the way may change it (e.g. ``map``)."""
    try:
        specs = nest.flatten(dataset.element_spec)
    except UnknownSpecError:  # an empty pipeline: only the graph can tell
        specs = []
    firsts = set()
    for spec in specs:
        if not spec.shape:  # TF 2.21 indexes dims[0] of the scalar's static shape
            raise IndexError("list index out of range\n(TF 2.21's compute_batch_size fails this way on a dataset "
                             "whose elements have a scalar component: there is no batch dimension to split.) Fix: "
                             "call `.batch(global_batch_size)` on the dataset before distributing it.")
        firsts.add(spec.shape[0])
    if len(firsts) == 1 and None not in firsts:
        return firsts.pop()
    return _walked_batch_size(dataset)


def _walked_batch_size(node: Dataset) -> int:
    """The batch size found walking up from ``node`` (see ``compute_batch_size``)."""
    while isinstance(node, _PRESERVES_BATCH):
        node = node._inputs[0]
    if isinstance(node, BatchDataset):
        return node.batch_size
    if isinstance(node, _COMBINES_BATCHES):
        sizes = {_walked_batch_size(child) for child in node._inputs}
        return sizes.pop() if len(sizes) == 1 else -1
    if not node._inputs:
        raise NotBatchedError("without encountering a batch transformation")
    return -1


class _Window(ElementsDataset):
    """One component of one window: its values, typed by the window input's spec of that component (read only when
    asked, as reading a spec may peek at the input)."""

    def __init__(self, values: list[Any], spec: Callable[[], Any]) -> None:
        super().__init__(values, None)
        self._spec = spec

    @property
    def element_spec(self) -> Any:
        return self._spec()


class WindowDataset(UnaryDataset):
    """``window``: every ``shift`` elements, a window of ``size`` elements taken every ``stride``, as a
    nest of datasets (one per component); elements are read as the windows need them."""

    def __init__(self, input_dataset: Dataset, size: int, shift: int, stride: int, drop_remainder: bool) -> None:
        super().__init__(input_dataset)
        for name, value in (("size", size), ("shift", shift), ("stride", stride)):
            if value <= 0:
                raise errors.InvalidArgumentError(f"Window {name} must be greater than zero, but got {value}.")
        self.size, self.shift, self.stride = size, shift, stride
        self.drop_remainder = drop_remainder

    @property
    def element_spec(self) -> Any:
        return nest.map_structure(DatasetSpec, self._input.element_spec)

    def _iterate(self) -> Iterator[Any]:
        """Each window is a nest of datasets of the window's components, typed by the input's element spec (as TF's:
        its unknown dimensions stay unknown, and components of other shapes fail only when they are batched)."""
        specs = functools.cache(lambda: nest.flatten(self._input.element_spec))  # read once, when first asked

        inputs, buffer, first, start, ended = elements(self._input), deque(), 0, 0, False
        while True:
            last = start + (self.size - 1) * self.stride
            while not ended and first + len(buffer) <= last:
                value = next(inputs, _END)
                ended = value is _END
                if not ended:
                    buffer.append(value)
            items = [buffer[i - first] for i in range(start, last + 1, self.stride) if i - first < len(buffer)]
            if not items or (self.drop_remainder and len(items) < self.size):
                return
            failure = next((item for item in items if type(item) is Failed), None)  # TF fails the whole window
            if failure is not None:
                yield failure
            else:
                columns = zip(*(nest.flatten(item) for item in items))
                yield nest.pack_sequence_as(items[0], [_Window(list(column), lambda k=k: specs()[k])
                                                       for k, column in enumerate(columns)])
            start += self.shift
            while buffer and first < start:
                buffer.popleft()
                first += 1

    def _cardinality(self) -> int:
        """TF's count: every ``shift``-th start, or only those with a whole window when dropping."""
        n = self._input._cardinality()
        if not counted(n):
            return n
        if self.drop_remainder:
            rest = n - ((self.size - 1) * self.stride + 1)
            return 0 if rest < 0 else rest // self.shift + 1
        return cdiv(n, self.shift) + (0 if cmod(n, self.shift) == 0 else 1)


_END = object()
