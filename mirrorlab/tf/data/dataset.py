"""``Dataset``: a lazy, streaming input pipeline in the style of ``tf.data``.

A dataset is a small graph of nodes (sources and transformations). Iterating it streams elements
(nests of NumPy arrays) without materialising the input; the graph stays inspectable so that
distribution can rewrite it exactly as TF's auto-sharding does (shard the file list, or the
elements, and rebatch per replica).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import contextvars
import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import errors, nest
from ..dtypes import as_dtype
from ..tensor_shape import TensorShape
from ...tensor import tensor_view, tensors_out
from .failures import Failed, attempt, carried, carrying, elements, ending, raising
from .optional import Optional
from .options import SHARD_HINT, Options
from .tensors import STRING, call, int64_arg, numpy_value, to_element

__all__ = ["Dataset", "DatasetSpec", "TensorSpec", "agreed_specs", "ones_where_unknown", "UnknownSpecError",
           "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "AUTOTUNE", "cdiv", "cmod", "counted"]

log = logging.getLogger("mirrorlab")

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
AUTOTUNE = -1


def counted(n: int) -> bool:
    """Whether TF computes with the cardinality ``n`` as a count: anything but INFINITE and UNKNOWN (``take(-5)``
    has cardinality -5, and every op downstream then does its arithmetic on -5)."""
    return n not in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY)


def cdiv(a: int, b: int) -> int:
    """``a / b`` as C++ divides integers (toward zero), the arithmetic of TF's cardinalities."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def cmod(a: int, b: int) -> int:
    """``a % b`` as C++ (the sign of ``a``)."""
    return a - b * cdiv(a, b)


FUSED_REPEAT_ZERO = ("count must be greater than zero or equal to -1.\n(TF fuses `shuffle(...).repeat(count)` into one "
                     "op that rejects a count of 0 or below -1 when the pipeline's iterator is created.) Fix: drop a "
                     "repeat(0), write repeat() to repeat forever, or set "
                     "options.experimental_optimization.shuffle_and_repeat_fusion = False.")


class UnknownSpecError(ValueError):
    """The element spec depends on data and the dataset has none."""


class TensorSpec:
    """Shape (None for unknown dims; None for an unknown rank) and dtype of one component of an element;
    strings have TF's ``tf.string.as_numpy_dtype``, ``object``."""

    def __init__(self, shape: Any, dtype: Any = np.float32, name: str | None = None) -> None:
        if isinstance(shape, TensorShape):
            shape = shape.dims
        self.shape = None if shape is None else tuple(None if d is None else int(d) for d in shape)
        self.dtype = as_dtype(dtype)
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self) -> str:
        """TF's text: ``TensorSpec(shape=(None, 3), dtype=tf.float32, name=None)``."""
        shape = "<unknown>" if self.shape is None else repr(self.shape)
        dtype = "string" if self.dtype == STRING else self.dtype.name
        return f"TensorSpec(shape={shape}, dtype=tf.{dtype}, name={self.name!r})"

    @staticmethod
    def of(array: Any) -> "TensorSpec":
        """The spec of one array."""
        return TensorSpec(array.shape, array.dtype)


class DatasetSpec:
    """The spec of an element that is itself a dataset (``window``'s elements): the spec of its elements."""

    def __init__(self, element_spec: Any, dataset_shape: Any = ()) -> None:
        self.element_spec = element_spec
        self.shape = TensorShape(dataset_shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetSpec) and (self.element_spec, self.shape) == (other.element_spec, other.shape)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        """TF's text: ``DatasetSpec(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorShape([]))``."""
        return f"DatasetSpec({self.element_spec!r}, {self.shape!r})"


def merged_spec(x: TensorSpec, y: TensorSpec) -> TensorSpec:
    """The spec of elements of either spec (same dtype): differing dimensions unknown, differing ranks an unknown
    rank (TF's ``most_specific_common_supertype``)."""
    if x.shape is None or y.shape is None or len(x.shape) != len(y.shape):
        return TensorSpec(None, x.dtype)
    return TensorSpec(tuple(d if d == e else None for d, e in zip(x.shape, y.shape)), x.dtype)


def merged_element_specs(a: Any, b: Any, check_types: bool = True) -> Any:
    """Two element specs of one structure and dtypes merged component by component (``merged_spec``); TypeError or
    ValueError where they differ."""
    nest.assert_same_structure(a, b, check_types=check_types)
    if any(x.dtype != y.dtype for x, y in zip(nest.flatten(a), nest.flatten(b))):
        raise TypeError("the element specs' dtypes differ")
    return nest.map_structure(merged_spec, a, b, check_types=check_types)


def _check_predicate(input_dataset: "Dataset", predicate: Callable) -> None:
    """TF traces a predicate when the dataset is built and refuses one that does not return a scalar bool;
    mirrorlab tries it on the input's first element (errors the element causes are left to iteration)."""
    try:
        first = input_dataset._peek()
        result = None if first is None else np.asarray(call(predicate, first))
    except Exception:
        return
    if result is not None and (result.shape != () or result.dtype != np.bool_):
        spec = TensorSpec((None,) * result.ndim if result.ndim else (), result.dtype)
        raise ValueError(f"Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor, but its return "
                         f"type is {spec}.\nFix: return a single boolean, e.g. `lambda x: x > 0`, or "
                         "`tf.reduce_all(...)` of a vector.")


class Dataset(ABC):
    """Base of every dataset node; ``_inputs`` are the upstream datasets."""

    _inputs: tuple["Dataset", ...] = ()
    _options: Options | None = None

    # -- to be provided by nodes -----------------------------------------------------------------

    @abstractmethod
    def _iterate(self) -> Iterator[Any]:
        """Implemented by subclasses."""

    def _replace_inputs(self, inputs: tuple["Dataset", ...]) -> "Dataset":
        """A copy of this node reading from ``inputs`` (graph rewrites use it)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._inputs = tuple(inputs)
        return clone

    def cardinality(self) -> Any:
        """The number of elements as TF's scalar int64 tensor (INFINITE_CARDINALITY, -1, or UNKNOWN_CARDINALITY, -2,
        when it cannot say), so ``ds.cardinality().numpy()`` works as in TF."""
        return tensor_view(np.int64(self._cardinality()))

    def _cardinality(self) -> int:
        """Number of elements, or INFINITE_CARDINALITY / UNKNOWN_CARDINALITY (each dataset type says)."""
        return UNKNOWN_CARDINALITY

    @property
    def element_spec(self) -> Any:
        """A nest of ``TensorSpec`` (taken from the first element when it cannot be known statically)."""
        return self._peek_spec()

    def _spec_or_traced(self, trace: Callable[[Any], Any]) -> Any:
        """The spec of the first element; with no data, ``trace`` of zeros of the input's type (as TF traces a
        function on the input's spec)."""
        try:
            return self._peek_spec()
        except (UnknownSpecError, errors.OpError):  # no data, or reading it fails (TF would only trace)
            return self._only_traced(trace)

    def _only_traced(self, trace: Callable[[Any], Any], input_spec: Any = None) -> Any:
        """``trace`` of zeros of the input's type; UnknownSpecError if it raises."""
        traced = self._traced(trace, input_spec)
        if traced is None:
            raise UnknownSpecError("cannot infer the element_spec of an empty dataset whose element type "
                                   "depends on a function that fails on zeros of its input's type") from None
        return traced

    def _traced(self, trace: Callable[[Any], Any], input_spec: Any = None) -> Any:
        """``trace`` of zeros of ``input_spec`` (by default the input's; unknown dimensions 0), or None if it
        raises."""
        try:
            spec = self._inputs[0].element_spec if input_spec is None else input_spec
            return trace(nest.map_structure(_zeros_of, spec))
        except Exception:
            return None

    def _peek_spec(self) -> Any:
        """The spec of this dataset's first element."""
        first = self._peek()
        if first is None:
            raise UnknownSpecError("cannot infer the element_spec of an empty dataset whose element type depends "
                                   "on a map function; give the pipeline at least one element")
        return nest.map_structure(TensorSpec.of, first)

    # -- iteration ---------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        if _PIPELINE_OPTIONS.get() is not None:  # an input of a pipeline being iterated
            return raising(self._stream()) if carrying() else self._iterate()
        return _PipelineIterator(self, self.options())

    # TF's FILE auto-sharding walks up from the end only through the ops it knows keep the reader's elements whole
    # (map, batch, shuffle, ...); at any other op (scan, unique, ignore_errors, ...) it gives up, so AUTO shards DATA
    _stops_file_sharding = False

    def _stream(self) -> Iterator[Any]:
        """This node's output while failures are carried (failures.py): elements and ``Failed`` ones; an error it
        raises itself ends it, as the last of them."""
        return ending(self._iterate())

    def _check_rewritten(self, options: Options) -> None:
        """Raise the error TF's optimized graph raises when it is instantiated (as an iterator is created)."""

    def _is_noop(self) -> bool:
        """Whether TF's noop_elimination removes this node (it passes every element through unchanged)."""
        return False

    def _initialize_iterators(self) -> None:
        """What creating an iterator does besides reading (TF creates the input iterators at once; a
        shuffle draws its seeds then): used where TF creates an iterator that is never read."""
        for child in self._inputs:
            child._initialize_iterators()

    def _peek(self) -> Any:
        """The first element (None if there is none), read without advancing any shuffle's seeds."""
        from .shuffling import peeking

        with peeking():
            return next(iter(self), None)

    def as_numpy_iterator(self) -> Iterator[Any]:
        """The elements as TF's ``.numpy()`` gives them: NumPy scalars (``bytes`` for strings) at rank 0."""
        return (nest.map_structure(numpy_value, value) for value in self)

    def __len__(self) -> int:
        """The cardinality; TF's TypeError when it is infinite or unknown."""
        n = self._cardinality()
        if n == INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if n == UNKNOWN_CARDINALITY:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self) -> bool:
        return True  # as TF: a dataset is true even when empty (``__len__`` would say otherwise or raise)

    def options(self) -> Options:
        """The options in effect: those set on this dataset or any upstream one."""
        merged = Options()
        for node in self._walk():
            if node._options is not None:
                merged = node._options.merge(merged)
        return merged

    def _walk(self) -> Iterator["Dataset"]:
        """This node and every node upstream of it."""
        yield self
        for child in self._inputs:
            yield from child._walk()

    # -- sources -------------------------------------------------------------------------------------

    @staticmethod
    def range(*args: int, output_type: Any = np.int64, name: Any = None) -> "Dataset":
        """``range(stop)``, ``range(start, stop[, step])`` as scalars of ``output_type`` (int64)."""
        from .sources import RangeDataset

        if not 1 <= len(args) <= 3:
            raise ValueError(f"Invalid `args`. The length of `args` should be between 1 and 3 but was {len(args)}.")
        bounds = [int64_arg(a) for a in args]
        if len(bounds) == 3 and bounds[2] == 0:
            raise errors.InvalidArgumentError("step must be a non-zero integer.")
        return RangeDataset(range(*bounds), output_type)

    @staticmethod
    def counter(start: int = 0, step: int = 1, dtype: Any = np.int64, name: Any = None) -> "Dataset":
        """``start, start + step, ...`` forever (TF builds it as a scan over an endless repeat)."""
        first = np.asarray(start, dtype=dtype)
        delta = first.dtype.type(step)
        return Dataset.from_tensors(np.int64(0)).repeat().scan(first, lambda state, _: (state + delta, state))

    @staticmethod
    def random(seed: int | None = None, rerandomize_each_iteration: bool | None = None, name: Any = None) -> "Dataset":
        """Endless int64 scalars in [0, 2**32), TF's Philox samples for ``seed`` (new ones per iteration when
        ``rerandomize_each_iteration``)."""
        from .sampling import RandomDataset

        return RandomDataset(seed, rerandomize_each_iteration)

    @staticmethod
    def sample_from_datasets(datasets: list["Dataset"], weights: Any = None, seed: int | None = None,
                             stop_on_empty_dataset: bool = False,
                             rerandomize_each_iteration: bool | None = None) -> "Dataset":
        """Elements drawn at random from ``datasets`` with probabilities ``weights``, in TF's seeded order."""
        from .sampling import sample_from_datasets

        return sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset, rerandomize_each_iteration)

    @staticmethod
    def choose_from_datasets(datasets: list["Dataset"], choice_dataset: "Dataset",
                             stop_on_empty_dataset: bool = True) -> "Dataset":
        """Each element from ``datasets[choice]`` for the int64 choices of ``choice_dataset``."""
        from .combining import ChooseDataset

        return ChooseDataset(list(datasets), choice_dataset, bool(stop_on_empty_dataset))

    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        """One element per index of the first dimension of every component of ``tensors``."""
        from .sources import TensorSliceDataset

        return TensorSliceDataset(tensors)

    @staticmethod
    def from_tensors(tensors: Any) -> "Dataset":
        """A single element: ``tensors`` itself."""
        from .sources import TensorDataset

        return TensorDataset(tensors)

    @staticmethod
    def zip(*args: Any, datasets: Any = None, name: Any = None) -> "Dataset":
        """Elements of several datasets side by side (a nest of datasets -> a dataset of nests)."""
        from .combining import zip_datasets

        return zip_datasets(*args, datasets=datasets)

    @staticmethod
    def from_generator(generator: Callable[..., Any], output_types: Any = None, output_shapes: Any = None,
                       args: tuple | None = None, output_signature: Any = None, name: Any = None) -> "Dataset":
        """Elements of ``generator(*args)`` (called anew for every iteration), typed by ``output_signature``
        (a nest of TensorSpec) or by ``output_types`` and ``output_shapes``."""
        from .combining import GeneratorDataset, signature_from_types

        if output_signature is None:
            if output_types is None:
                raise TypeError("The `output_types` argument can not be None if `output_signature` is None.")
            output_signature = signature_from_types(output_types, output_shapes)
        elif output_types is not None or output_shapes is not None:
            raise TypeError("`output_types` and `output_shapes` cannot be used together with `output_signature`.")
        return GeneratorDataset(generator, output_signature, tuple(args or ()))

    @staticmethod
    def list_files(file_pattern: str | list[str], shuffle: bool | None = None, seed: int | None = None) -> "Dataset":
        """File names matching the glob pattern(s), sorted, then shuffled unless ``shuffle=False``."""
        from .sources import list_files

        return list_files(file_pattern, shuffle, seed)

    # -- transformations ---------------------------------------------------------------------------------

    def batch(self, batch_size: int, drop_remainder: bool = False, num_parallel_calls: Any = None,
              deterministic: Any = None, name: Any = None) -> "Dataset":
        """Stack ``batch_size`` consecutive elements; the last batch may be short unless ``drop_remainder``."""
        from .batching import BatchDataset

        return BatchDataset(self, int64_arg(batch_size), bool(drop_remainder))

    def padded_batch(self, batch_size: int, padded_shapes: Any = None, padding_values: Any = None,
                     drop_remainder: bool = False, name: Any = None) -> "Dataset":
        """Batch elements of different shapes, padding each dimension to ``padded_shapes`` (None or -1: the
        longest in the batch) with ``padding_values`` (0, False or b'' by default)."""
        from .padding import PaddedBatchDataset

        return PaddedBatchDataset(self, int64_arg(batch_size), padded_shapes, padding_values, bool(drop_remainder))

    def unbatch(self, name: Any = None) -> "Dataset":
        from .batching import UnbatchDataset

        return UnbatchDataset(self)

    def rebatch(self, batch_size: int | list[int], drop_remainder: bool = False, name: Any = None) -> "Dataset":
        """Re-split the stream of batches into batches of the given size(s), cycling through a list."""
        from .batching import RebatchDataset

        return RebatchDataset.from_user(self, batch_size, bool(drop_remainder))

    def map(self, map_func: Callable, num_parallel_calls: Any = None, deterministic: Any = None,
            name: Any = None) -> "Dataset":
        """``map_func`` of every element (a tuple element is unpacked into arguments; a returned list
        becomes a tuple, as in TF)."""
        return MapDataset(self, map_func)

    def filter(self, predicate: Callable, name: Any = None) -> "Dataset":
        """The elements for which ``predicate`` returns a scalar True."""
        _check_predicate(self, predicate)
        return FilterDataset(self, predicate)

    def take_while(self, predicate: Callable, name: Any = None) -> "Dataset":
        """The elements up to the first for which ``predicate`` is False."""
        from .folding import TakeWhileDataset

        _check_predicate(self, predicate)
        return TakeWhileDataset(self, predicate)

    def scan(self, initial_state: Any, scan_func: Callable, name: Any = None) -> "Dataset":
        """``scan_func(state, element) -> (new_state, output)`` over the elements; yields the outputs."""
        from .folding import ScanDataset

        return ScanDataset(self, initial_state, scan_func)

    def unique(self, name: Any = None) -> "Dataset":
        """The first occurrence of every element (int32, int64 or string scalars)."""
        from .folding import UniqueDataset

        return UniqueDataset(self)

    def window(self, size: int, shift: int | None = None, stride: int = 1, drop_remainder: bool = False,
               name: Any = None) -> "Dataset":
        """Windows of ``size`` elements (every ``stride``-th), one every ``shift`` elements; each window is a
        dataset per component, in the element's structure."""
        from .batching import WindowDataset

        size = int64_arg(size)
        return WindowDataset(self, size, size if shift is None else int64_arg(shift), int64_arg(stride),
                             bool(drop_remainder))

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        """``transformation_func(self)``, which must return a dataset."""
        result = transformation_func(self)
        if not isinstance(result, Dataset):
            raise TypeError(f"`transformation_func` must return a `tf.data.Dataset` object. Got "
                            f"{type(result).__name__}.")
        return result

    def get_single_element(self, name: Any = None) -> Any:
        """The only element; TF's InvalidArgumentError when there is none or more than one."""
        iterator = iter(self)
        first = next(iterator, _NONE)
        if first is _NONE:
            raise errors.InvalidArgumentError("Dataset was empty. [Op:DatasetToSingleElement] name: \nFix: "
                                              "get_single_element needs a dataset of exactly one element.")
        if next(iterator, _NONE) is not _NONE:
            raise errors.InvalidArgumentError("Dataset had more than one element. [Op:DatasetToSingleElement] "
                                              "name: \nFix: take(1) first, or use reduce() to combine elements.")
        return first

    def reduce(self, initial_state: Any, reduce_func: Callable, name: Any = None) -> Any:
        """The final state of ``reduce_func(state, element)`` folded over every element."""
        from .folding import reduce_dataset

        return reduce_dataset(self, initial_state, reduce_func)

    def group_by_window(self, key_func: Callable, reduce_func: Callable, window_size: int | None = None,
                        window_size_func: Callable | None = None, name: Any = None) -> "Dataset":
        """Group elements by the int64 ``key_func`` and hand each full window of a key (``window_size`` or
        ``window_size_func(key)`` elements) to ``reduce_func(key, window_dataset)``; leftovers at the end, by key."""
        from .grouping import BOTH_OR_NEITHER, GroupByWindowDataset

        if (window_size is None) == (window_size_func is None):
            raise ValueError(BOTH_OR_NEITHER)
        if window_size_func is None:
            window_size_func = lambda key: np.int64(window_size)  # noqa: E731
        return GroupByWindowDataset(self, key_func, reduce_func, window_size_func)

    def bucket_by_sequence_length(self, element_length_func: Callable, bucket_boundaries: list[int],
                                  bucket_batch_sizes: list[int], padded_shapes: Any = None,
                                  padding_values: Any = None, pad_to_bucket_boundary: bool = False,
                                  no_padding: bool = False, drop_remainder: bool = False,
                                  name: Any = None) -> "Dataset":
        """Batch elements of similar length together: one (padded) batch size per length bucket."""
        from .grouping import bucket_by_sequence_length

        return bucket_by_sequence_length(self, element_length_func, bucket_boundaries, bucket_batch_sizes,
                                         padded_shapes, padding_values, pad_to_bucket_boundary, no_padding,
                                         drop_remainder)

    def flat_map(self, map_func: Callable, name: Any = None) -> "Dataset":
        """Concatenate the datasets ``map_func`` returns for each element."""
        from .sources import FlatMapDataset

        return FlatMapDataset(self, map_func, cycle_length=1, block_length=1)

    def interleave(self, map_func: Callable, cycle_length: int | None = None, block_length: int = 1,
                   num_parallel_calls: Any = None, deterministic: Any = None, name: Any = None) -> "Dataset":
        """Alternate between ``cycle_length`` of the datasets ``map_func`` returns, ``block_length`` at a time."""
        from .sources import FlatMapDataset

        return FlatMapDataset(self, map_func, cycle_length=AUTOTUNE if cycle_length is None else cycle_length,
                              block_length=block_length)

    def shuffle(self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True,
                name: Any = None) -> "Dataset":
        """Sample uniformly from a buffer of ``buffer_size`` elements: TF's order for a given seed."""
        from .shuffling import ShuffleDataset

        return ShuffleDataset(self, int64_arg(buffer_size), seed, bool(reshuffle_each_iteration))

    def repeat(self, count: int | None = None, name: Any = None) -> "Dataset":
        """The input ``count`` times (None or negative: forever)."""
        return RepeatDataset(self, None if count is None else int64_arg(count))

    def concatenate(self, dataset: "Dataset", name: Any = None) -> "Dataset":
        """This dataset's elements, then ``dataset``'s (same structure and dtypes)."""
        from .combining import ConcatenateDataset

        return ConcatenateDataset(self, dataset)

    def enumerate(self, start: int = 0, name: Any = None) -> "Dataset":
        """``(index, element)`` pairs, the index an int64 counting from ``start``."""
        from .combining import zip_datasets

        return zip_datasets((Dataset.range(int(start), 2**63 - 1), self))

    def take(self, count: int, name: Any = None) -> "Dataset":
        """The first ``count`` elements (negative: all)."""
        return TakeDataset(self, int64_arg(count))

    def skip(self, count: int, name: Any = None) -> "Dataset":
        """All but the first ``count`` elements (negative: none)."""
        return SkipDataset(self, int64_arg(count))

    def shard(self, num_shards: int, index: int, name: Any = None) -> "Dataset":
        """Every ``num_shards``-th element starting at ``index``."""
        return ShardDataset(self, int64_arg(num_shards), int64_arg(index))

    def prefetch(self, buffer_size: int, name: Any = None) -> "Dataset":
        """Kept for TF compatibility; mirrorlab's pipelines produce elements on demand."""
        return PrefetchDataset(self, int64_arg(buffer_size))

    def save(self, path: str, compression: str | None = None, shard_func: Callable | None = None,
             checkpoint_args: Any = None) -> None:
        """Write every element under the directory ``path`` (mirrorlab's npz layout, see saving.py), each in the
        shard ``shard_func(element)`` picks (one shard by default); ``Dataset.load`` reads it back."""
        from .saving import save_dataset

        save_dataset(self, path, compression, shard_func, checkpoint_args)

    @staticmethod
    def load(path: str, element_spec: Any = None, compression: str | None = None,
             reader_func: Callable | None = None) -> "Dataset":
        """The dataset ``save`` wrote at ``path``; ``reader_func`` maps the dataset of its shards (datasets) to the
        result (by default they are interleaved, one cycle per CPU, as TF's)."""
        from .saving import load_dataset

        return load_dataset(path, element_spec, compression, reader_func)

    def ignore_errors(self, log_warning: bool = False, name: Any = None) -> "Dataset":
        """The elements whose computation does not raise a TF runtime error (``errors.OpError``); the failed ones
        are dropped, each logged as a warning with ``log_warning``. Upstream ops go on after a failure as TF's do."""
        return IgnoreErrorsDataset(self, bool(log_warning))

    def snapshot(self, path: str, compression: str | None = "AUTO", reader_func: Callable | None = None,
                 shard_func: Callable | None = None, name: Any = None) -> "Dataset":
        """The elements of the first pass that reaches the end, kept under ``path`` and read back by every later
        pass, in this process or the next (TF's ``snapshot``; see snapshot.py)."""
        from .snapshot import SnapshotDataset

        return SnapshotDataset(self, path, compression, reader_func, shard_func)

    def cache(self, filename: str = "", name: Any = None) -> "Dataset":
        """Keep the elements of the first complete iteration and replay them on every later one (TF's
        in-memory cache; with a ``filename`` TF keeps them in files instead, which mirrorlab does not)."""
        return CacheDataset(self)

    def with_options(self, options: Options, name: Any = None) -> "Dataset":
        """This dataset with ``options`` (e.g. the auto-shard policy) applied."""
        if not isinstance(options, Options):
            raise TypeError(f"with_options expects mirrorlab.data.Options, got {type(options).__name__}")
        node = PassThroughDataset(self, "options")
        node._options = options
        return node


_NONE = object()
_END = object()

_PIPELINE_OPTIONS: contextvars.ContextVar[Options | None] = contextvars.ContextVar("mirrorlab_pipeline_options",
                                                                                default=None)


def pipeline_options() -> Options:
    """The options of the pipeline whose iterator is running (TF applies them to the whole graph)."""
    return _PIPELINE_OPTIONS.get() or Options()


class _PipelineIterator:
    """The iterator of a whole pipeline: its nodes see the pipeline's options while producing an element.

    TF builds the whole iterator tree when the iterator is created (every shuffle on it draws its seeds then, even if
    the iterator is never read), and prefetches: so the first element is read at creation too (later ones as they are
    asked for). An error reading it is raised by the first ``next``, where TF reports it."""

    def __init__(self, dataset: Dataset, options: Options) -> None:
        self._options = options
        self._dataset = dataset
        token = _PIPELINE_OPTIONS.set(options)
        try:
            for node in dataset._walk():
                node._check_rewritten(options)
            self._elements = dataset._iterate()
            self._ahead: tuple[bool, Any] | None = self._read()
        finally:
            _PIPELINE_OPTIONS.reset(token)

    def _read(self) -> tuple[bool, Any]:
        try:
            return True, next(self._elements)
        except StopIteration:
            return True, _END
        except Exception as exc:  # raised where TF raises it: by the next get_next
            return False, exc

    def __iter__(self) -> "_PipelineIterator":
        return self

    @property
    def element_spec(self) -> Any:
        """The dataset's element spec."""
        return self._dataset.element_spec

    def get_next(self) -> Any:
        """The next element; TF's OutOfRangeError at the end."""
        try:
            return next(self)
        except StopIteration:
            raise errors.OutOfRangeError("End of sequence [Op:IteratorGetNext] name: \nFix: iterate with a for "
                                         "loop, or use get_next_as_optional() to test for the end.") from None

    def get_next_as_optional(self) -> Any:
        """The next element as an ``Optional`` (without a value at the end)."""
        try:
            return Optional(next(self), self.element_spec)
        except StopIteration:
            return Optional(None, self.element_spec, False)

    def __next__(self) -> Any:
        if self._ahead is not None:  # the element read at creation; later ones are read when asked
            (ok, value), self._ahead = self._ahead, None
            if value is _END:
                raise StopIteration
            if not ok:
                raise value
            return tensors_out(value)
        token = _PIPELINE_OPTIONS.set(self._options)
        try:
            return tensors_out(next(self._elements))
        finally:
            _PIPELINE_OPTIONS.reset(token)


class UnaryDataset(Dataset):
    """A transformation of a single input; by default it keeps the input's element type and count."""

    def __init__(self, input_dataset: Dataset) -> None:
        self._inputs = (input_dataset,)

    @property
    def _input(self) -> Dataset:
        return self._inputs[0]

    def _cardinality(self) -> int:
        return self._input._cardinality()

    @property
    def element_spec(self) -> Any:
        return self._input.element_spec

    def _function_spec(self, apply: Callable[[Any], Any]) -> Any:
        """The spec of this node's elements ``apply(input element)``, as tracing the function would tell TF: the
        dimensions on which the first element and the function of zeros of the input's type agree (a dimension
        that depends on the data differs); without data, those on which the function of zeros agrees with the
        function of ones where the input's dimensions are unknown; if the function fails on either, one of them with
        the leading dimension static only where it is static in the input."""
        input_spec = self._input.element_spec
        trace = lambda dummy: nest.map_structure(TensorSpec.of, apply(dummy))  # noqa: E731
        try:
            output_spec = self._peek_spec()
        except (UnknownSpecError, errors.OpError):  # no data: the traced spec, its unknown dimensions unknown
            output_spec = self._only_traced(trace, input_spec)
            traced = self._traced(trace, ones_where_unknown(input_spec))
        else:
            traced = self._traced(trace, input_spec)
        agreed = None if traced is None else agreed_specs(output_spec, traced)
        if agreed is not None:
            return agreed
        leading = {s.shape[0] if s.shape else None for s in nest.flatten(input_spec)}
        static = leading.pop() if len(leading) == 1 else None
        return nest.map_structure(
            lambda s: s if s.shape and s.shape[0] == static else TensorSpec((None, *s.shape[1:]), s.dtype)
            if s.shape else s, output_spec)


class PassThroughDataset(UnaryDataset):
    """Elements unchanged (prefetch, cache, with_options); kept as nodes because sharding rules see them."""

    def __init__(self, input_dataset: Dataset, kind: str) -> None:
        super().__init__(input_dataset)
        self.kind = kind

    def _iterate(self) -> Iterator[Any]:
        return elements(self._input)


class PrefetchDataset(PassThroughDataset):
    def __init__(self, input_dataset: Dataset, buffer_size: int) -> None:
        super().__init__(input_dataset, "prefetch")
        self.buffer_size = buffer_size

    def _is_noop(self) -> bool:
        return self.buffer_size == 0


class IgnoreErrorsDataset(UnaryDataset):
    """``ignore_errors()``: reads its input with failures carried as values (failures.py) and drops them."""

    _stops_file_sharding = True

    def __init__(self, input_dataset: Dataset, log_warning: bool) -> None:
        super().__init__(input_dataset)
        self.log_warning = log_warning

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _iterate(self) -> Iterator[Any]:
        stream = carried(self._input._stream)
        while True:
            element = carried(lambda: next(stream, _END))
            if element is _END:
                return
            if type(element) is not Failed:
                yield element
            elif self.log_warning:
                log.warning("Error raised with error message %s", element.error)


class CacheDataset(UnaryDataset):
    """``cache()``: a pass that reaches the end (or reads as many elements as the input's known cardinality)
    is kept and replayed; an unfinished pass is discarded."""

    def __init__(self, input_dataset: Dataset) -> None:
        super().__init__(input_dataset)
        self._memory: dict[str, list[Any]] = {}

    def _replace_inputs(self, inputs: tuple[Dataset, ...]) -> Dataset:
        clone = super()._replace_inputs(inputs)
        assert isinstance(clone, CacheDataset)
        clone._memory = {}  # other input, other cache
        return clone

    def _iterate(self) -> Iterator[Any]:
        cached = self._memory.get("elements")
        return iter(cached) if cached is not None else self._fill()

    def _fill(self) -> Iterator[Any]:
        kept: list[Any] = []
        expected = self._input._cardinality()
        for element in elements(self._input):
            if type(element) is not Failed:  # a failure passes, uncached
                kept.append(element)
                if len(kept) == expected:  # TF completes the cache once the input's known count is read
                    self._memory.setdefault("elements", kept)
            yield element
        self._memory.setdefault("elements", kept)

    def _initialize_iterators(self) -> None:
        if "elements" not in self._memory:
            super()._initialize_iterators()


class MapDataset(UnaryDataset):
    def __init__(self, input_dataset: Dataset, fn: Callable) -> None:
        super().__init__(input_dataset)
        self.fn = fn

    def _apply(self, value: Any) -> Any:
        """The function's result as an element (a returned list is a tuple, as TF makes it)."""
        result = call(self.fn, value)
        return to_element(tuple(result) if isinstance(result, list) else result)

    def _iterate(self) -> Iterator[Any]:
        for value in elements(self._input):
            yield value if type(value) is Failed else attempt(self._apply, value)

    def _is_noop(self) -> bool:
        """TF's noop_elimination drops a map whose function returns its arguments as they are (``lambda x: x``,
        ``lambda a, b: (a, b)``): called on zeros of the input's type, every output is the argument in its place."""
        def passes_through(dummy: Any) -> bool:
            dummy = tensors_out(dummy)  # the tensors ``call`` hands the function (it does not wrap them again)
            result = call(self.fn, dummy)
            result = tuple(result) if isinstance(result, list) else result
            nest.assert_same_structure(dummy, result, check_types=False)
            return all(a is b for a, b in zip(nest.flatten(dummy), nest.flatten(result), strict=True))
        if "_identity" not in self.__dict__:  # the function is called once, as TF traces it once
            self._identity = bool(self._traced(passes_through))
        return self._identity

    @property
    def element_spec(self) -> Any:
        return self._function_spec(self._apply)


def _zeros_of(spec: Any) -> Any:
    """A value of ``spec`` to trace a function on: zeros (unknown dimensions 0), or an empty dataset."""
    if isinstance(spec, DatasetSpec):
        from .sources import ElementsDataset

        return ElementsDataset([], spec.element_spec)
    return np.zeros(tuple(0 if d is None else d for d in spec.shape), spec.dtype)


def ones_where_unknown(spec: Any) -> Any:
    """``spec`` with its unknown dimensions 1: tracing on it as well as on zeros tells which output dimensions follow
    the input's unknown ones."""
    return nest.map_structure(lambda s: TensorSpec(tuple(1 if d is None else d for d in s.shape), s.dtype)
                              if isinstance(s, TensorSpec) else s, spec)


def agreed_specs(first: Any, traced: Any) -> Any:
    """The element spec ``first`` with the dimensions on which ``traced`` (the spec of a function traced on zeros)
    differs unknown; None when they differ in structure, dtype or rank (the function depends on the data)."""
    def agreed(a: Any, b: Any) -> Any:
        if not (isinstance(a, TensorSpec) and isinstance(b, TensorSpec)):
            if a != b:
                raise ValueError("the specs differ")
            return a
        if a.dtype != b.dtype or a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            raise ValueError("the specs differ in dtype or rank")
        return TensorSpec(tuple(d if d == e else None for d, e in zip(a.shape, b.shape)), a.dtype)
    try:
        return nest.map_structure(agreed, first, traced, check_types=False)
    except (TypeError, ValueError):
        return None


class FilterDataset(UnaryDataset):
    def __init__(self, input_dataset: Dataset, predicate: Callable) -> None:
        super().__init__(input_dataset)
        self.predicate = predicate

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _iterate(self) -> Iterator[Any]:
        for element in elements(self._input):
            keep = element if type(element) is Failed else attempt(self._keeps, element)
            if type(keep) is Failed:
                yield keep
            elif keep:
                yield element

    def _keeps(self, element: Any) -> bool:
        keep = np.asarray(call(self.predicate, element))
        if keep.shape != () or keep.dtype != np.bool_:
            raise errors.InvalidArgumentError(
                f"`predicate` return type must be a scalar bool, got {keep.dtype.name} of shape {keep.shape}")
        return bool(keep)


class RepeatDataset(UnaryDataset):
    """``repeat(count)``: ``count`` passes, forever for None or a negative count (as TF's RepeatDataset; the
    ShuffleAndRepeat op TF fuses a shuffle into refuses 0 and negative counts other than -1)."""

    def __init__(self, input_dataset: Dataset, count: int | None) -> None:
        super().__init__(input_dataset)
        self.count = None if count is None or count < 0 else count
        self._refused_when_fused = count is not None and (count == 0 or count < -1)

    def _iterate(self) -> Iterator[Any]:
        optimization = pipeline_options().experimental_optimization
        shuffle = self._fused_shuffle(optimization)
        if shuffle is not None:
            return shuffle.iterate_epochs(self.count)  # TF's ShuffleAndRepeat: one iterator for all epochs
        if self.count == 1 and optimization.enabled("noop_elimination"):
            return elements(self._input)
        return self._rounds()

    def _fused_shuffle(self, optimization: Any) -> Any:
        """The shuffle TF fuses with this repeat: the input, once the rewrites drop the no-op nodes between
        them (``skip(0)``, ``take(-1)``, ``shard(1, 0)``, ``repeat(1)``, ``prefetch(0)``, options)."""
        from .shuffling import ShuffleDataset

        if not optimization.enabled("shuffle_and_repeat_fusion"):
            return None
        node, between = self._input, []
        while not isinstance(node, ShuffleDataset):  # find the shuffle first: _is_noop may call a map's function
            if len(node._inputs) != 1:
                return None
            between.append(node)
            node = node._inputs[0]
        removable = all(type(n) is PassThroughDataset and n.kind == "options"
                        or optimization.enabled("noop_elimination") and n._is_noop() for n in between)
        return node if removable else None

    def _is_noop(self) -> bool:
        return self.count == 1

    def _check_rewritten(self, options: Options) -> None:
        if self._refused_when_fused and self._fused_shuffle(options.experimental_optimization) is not None:
            raise errors.InvalidArgumentError(FUSED_REPEAT_ZERO)

    def _rounds(self) -> Iterator[Any]:
        if self.count is None:  # forever, until an epoch is empty
            while True:
                empty = True
                for element in elements(self._input):
                    empty = False
                    yield element
                if empty:
                    return
        for _ in range(self.count):
            yield from elements(self._input)
        if self.count:
            self._input._initialize_iterators()  # TF creates one more input iterator after the last round

    def _initialize_iterators(self) -> None:
        if self.count != 0:
            super()._initialize_iterators()

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        if self.count is None:
            return 0 if n == 0 else INFINITE_CARDINALITY
        if not counted(n):
            return n if self.count else 0
        return n * self.count


class TakeDataset(UnaryDataset):
    def __init__(self, input_dataset: Dataset, count: int) -> None:
        super().__init__(input_dataset)
        self.count = count

    def _is_noop(self) -> bool:
        return self.count < 0

    def _iterate(self) -> Iterator[Any]:
        if carrying():
            return self._counting_successes()
        return itertools.islice(self._input, None if self.count < 0 else self.count)

    def _counting_successes(self) -> Iterator[Any]:
        """TF's take with failures carried: they pass and do not count."""
        left = self.count
        if left == 0:
            return
        for element in elements(self._input):
            yield element
            if type(element) is not Failed:
                left -= 1
                if left == 0:
                    return

    def _cardinality(self) -> int:
        """TF's rule, which gives a negative count other than -1 back as the cardinality (``take(-5)``)."""
        n = self._input._cardinality()
        if n == UNKNOWN_CARDINALITY:
            return n
        if n == INFINITE_CARDINALITY:
            return self.count
        return n if self.count == INFINITE_CARDINALITY else min(n, self.count)


class SkipDataset(UnaryDataset):
    def __init__(self, input_dataset: Dataset, count: int) -> None:
        super().__init__(input_dataset)
        self.count = count

    def _is_noop(self) -> bool:
        return self.count == 0

    def _iterate(self) -> Iterator[Any]:
        if carrying():
            return self._skipping_failures()
        if self.count < 0:  # skips the whole input (reading it, as TF does)
            return (element for element in self._input if False)
        return itertools.islice(iter(self._input), self.count, None)

    def _skipping_failures(self) -> Iterator[Any]:
        """TF's skip with failures carried: a failure met while skipping passes, and the skipping starts over
        (TF's Skip loses its count on an error); after the skipping, every element passes."""
        stream = elements(self._input)
        if self.count < 0:
            yield from (element for element in stream if type(element) is Failed)
            return
        while True:
            for _ in range(self.count):
                element = next(stream, _END)
                if element is _END:
                    return
                if type(element) is Failed:
                    yield element
                    break
            else:
                yield from stream
                return

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        if not counted(n):
            return n
        return 0 if self.count < 0 else max(0, n - self.count)


class ShardDataset(UnaryDataset):
    """Every ``num_shards``-th element from ``index``; ``require_non_empty`` marks auto-inserted FILE shards,
    which raise TF's "Could not apply FILE based sharding" error when there are too few files."""

    def __init__(self, input_dataset: Dataset, num_shards: int, index: int, require_non_empty: bool = False) -> None:
        super().__init__(input_dataset)
        if num_shards == index == SHARD_HINT:
            self.num_shards = self.index = SHARD_HINT
            self.require_non_empty = False
            return
        if num_shards < 1:
            raise errors.InvalidArgumentError(f"Number of shards must be greater than zero (currently num_shards = "
                                              f"{num_shards}).")
        if not 0 <= index < num_shards:
            raise errors.InvalidArgumentError(f"Index must be between 0 and {num_shards - 1} (currently index = "
                                              f"{index}).")
        self.num_shards = num_shards
        self.index = index
        self.require_non_empty = require_non_empty

    def _is_noop(self) -> bool:
        return self.num_shards == 1 and self.index == 0 and not self.require_non_empty

    def _iterate(self) -> Iterator[Any]:
        if self.num_shards == SHARD_HINT:
            raise errors.FailedPreconditionError(
                "`tf.data.Dataset.shard(SHARD_HINT, ...)` can only be used in `tf.distribute.Strategy."
                "experimental_distribute_dataset()` with `tf.data.experimental.AutoShardPolicy.HINT` policy, or "
                "tf.data service with `tf.data.experimental.service.ShardingPolicy.HINT` processing mode.")
        yield from self._realigning_after_failures() if carrying() else self._every_nth()

    def _every_nth(self) -> Iterator[Any]:
        n, k = self.num_shards, self.index
        it = iter(self._input)
        position = 0
        for element in it:
            if position % n == k:
                if position == k and self.require_non_empty and k + 1 < n:
                    # TF checks, before the first element, that every other shard can get one too.
                    got = sum(1 for _ in itertools.islice(it, n - k - 1))
                    if got < n - k - 1:
                        raise errors.InvalidArgumentError(_too_few_files(k + 1, n))
                    position += got
                yield element
            position += 1

    def _realigning_after_failures(self) -> Iterator[Any]:
        """TF's shard with failures carried: before each read it skips to the next position of its index, but
        the position does not advance past a failure (nor past what a skip read before meeting one)."""
        n, k = self.num_shards, self.index
        stream = elements(self._input)
        position = 0
        while True:
            skipped = 0
            for _ in range((k - position) % n):
                element = next(stream, _END)
                if element is _END:
                    return
                if type(element) is Failed:
                    break
                skipped += 1
            else:
                position += skipped
                element = next(stream, _END)
                if element is _END:
                    return
                if type(element) is not Failed:
                    position += 1
            yield element

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        if not counted(n):
            return n
        if self.num_shards == SHARD_HINT:  # a SHARD_HINT shard is only resolved by distribution
            return UNKNOWN_CARDINALITY
        return cdiv(n, self.num_shards) + (1 if self.index < cmod(n, self.num_shards) else 0)


def _too_few_files(seen: int, shards: int) -> str:
    return (f"Could not apply FILE based sharding: the dataset only has {seen} file(s), which is not enough for "
            f"the required {shards} shards/workers. If you are using datasets with distribution strategy, consider "
            "setting the auto sharding policy to either DATA or OFF using the `experimental_distribute."
            "auto_shard_policy` option of `tf.data.Options()`. Or, split your input files into a larger number "
            "of small files such that number of files is greater than number of shards/workers.")
