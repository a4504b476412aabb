"""Dataset sources: ranges, tensor slices, file lists and the file readers that FILE sharding splits."""

from __future__ import annotations

from abc import abstractmethod

import glob
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import errors, nest
from .dataset import (AUTOTUNE, UNKNOWN_CARDINALITY, Dataset, TensorSpec, UnaryDataset, UnknownSpecError, agreed_specs,
                      merged_element_specs, ones_where_unknown)
from .failures import Failed, attempt, carrying, elements, ending
from .tensors import STRING, call, canonical, to_element

__all__ = ["RangeDataset", "TensorSliceDataset", "TensorDataset", "ElementsDataset", "ListDataset", "TextLineDataset",
           "NumpyFileDataset", "FlatMapDataset", "ReaderDataset", "list_files"]


_END = object()


class SourceDataset(Dataset):
    """A dataset with no input dataset (FILE sharding cannot split it)."""

    def describe(self) -> str:
        """How TF's auto-sharding error names the source."""
        return type(self).__name__


class RangeDataset(SourceDataset):
    def __init__(self, values: range, dtype: Any) -> None:
        self.values = values
        self.dtype = np.dtype(dtype)

    def _iterate(self) -> Iterator[Any]:
        return (np.asarray(v, dtype=self.dtype) for v in self.values)

    def _cardinality(self) -> int:
        return len(self.values)

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), self.dtype)

    def describe(self) -> str:
        return f"RangeDataset({self.values.start}, {self.values.stop}, {self.values.step})"


class TensorSliceDataset(SourceDataset):
    def __init__(self, tensors: Any) -> None:
        self.tensors = nest.map_structure(_as_sliceable, to_element(tensors))
        sizes = [int(t.shape[0]) for t in nest.flatten(self.tensors)]
        if len(set(sizes)) > 1:
            other = next(n for n in sizes if n != sizes[0])
            raise ValueError(f"Dimensions {sizes[0]} and {other} are not compatible\nEvery component passed to "
                             f"from_tensor_slices must have the same size in its first dimension; got {sizes}.")
        self._length = sizes[0] if sizes else 0

    def _iterate(self) -> Iterator[Any]:
        for i in range(self._length):
            yield nest.map_structure(lambda t: canonical(t[i]), self.tensors)

    def _cardinality(self) -> int:
        return self._length

    @property
    def element_spec(self) -> Any:
        return nest.map_structure(lambda t: TensorSpec(t.shape[1:], t.dtype), self.tensors)

    def describe(self) -> str:
        return f"TensorSliceDataset of {self._length} elements"


def _as_sliceable(array: Any) -> Any:
    if array.ndim == 0:
        raise ValueError(f"Unbatching a tensor is only supported for rank >= 1\nfrom_tensor_slices slices the first "
                         f"dimension of every component; got a scalar {array!r}. Fix: use from_tensors for a single "
                         "element.")
    return array


class TensorDataset(SourceDataset):
    def __init__(self, tensors: Any) -> None:
        self.tensors = to_element(tensors)

    def _iterate(self) -> Iterator[Any]:
        yield self.tensors

    def _cardinality(self) -> int:
        return 1

    @property
    def element_spec(self) -> Any:
        return nest.map_structure(TensorSpec.of, self.tensors)


class ElementsDataset(SourceDataset):
    """Given elements of a known spec (a group's window in ``group_by_window``, ``from_list``)."""

    def __init__(self, elements: list[Any], spec: Any) -> None:
        self.elements = elements
        self.spec = spec

    def _iterate(self) -> Iterator[Any]:
        return iter(self.elements)

    def _cardinality(self) -> int:
        return len(self.elements)

    @property
    def element_spec(self) -> Any:
        return self.spec


class ListDataset(ElementsDataset):
    """``tf.data.experimental.from_list``: the given elements, which share a structure and dtypes but, unlike
    tensor slices, may differ in shape (the spec leaves such dimensions unknown)."""

    def __init__(self, elements: list[Any]) -> None:
        if not elements:
            raise ValueError("Invalid `elements`. `elements` should not be empty. If you want an empty dataset, use "
                             "`tf.data.Dataset.range(0)`.")
        converted = [to_element(element) for element in elements]
        specs = [nest.map_structure(TensorSpec.of, element) for element in converted]
        common = specs[0]
        try:
            for spec in specs[1:]:
                common = merged_element_specs(common, spec)
        except (TypeError, ValueError):
            raise AttributeError("'NoneType' object has no attribute '_flat_tensor_specs'\nFix: give every element "
                                 "of from_list the same structure and dtypes.") from None
        super().__init__(converted, common)

    def describe(self) -> str:
        return f"ListDataset of {len(self.elements)} elements"


def list_files(file_pattern: str | list[str], shuffle: bool | None, seed: int | None) -> Dataset:
    """Sorted glob matches as a dataset of file names; raises when nothing matches (as TF)."""
    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else list(file_pattern)
    names = sorted(m for p in patterns for m in glob.glob(p.decode() if isinstance(p, bytes) else p))
    if not names:
        raise errors.InvalidArgumentError(f"Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. "
                                          f"Summarized data: b'No files matched pattern: {', '.join(map(str, patterns))}'")
    files = TensorSliceDataset(np.array([n.encode() for n in names], dtype=STRING))
    if shuffle is False:
        return files
    return files.shuffle(len(names), seed=seed)


def _file_list(filenames: Any) -> Dataset:
    if isinstance(filenames, Dataset):
        return filenames
    names = [filenames] if isinstance(filenames, (str, bytes)) or np.ndim(filenames) == 0 else list(filenames)
    return TensorSliceDataset(np.array([_path(n).encode() for n in names], dtype=STRING))


def _path(name: Any) -> str:
    value = np.asarray(name).item() if not isinstance(name, (str, bytes)) else name
    return value.decode() if isinstance(value, bytes) else str(value)


class ReaderDataset(UnaryDataset):
    """Reads records from the files its input dataset names, file after file. FILE sharding splits
    its input (the file names) across workers."""

    @abstractmethod
    def _read(self, path: str) -> Iterator[Any]:
        """Implemented by subclasses."""

    def _iterate(self) -> Iterator[Any]:
        """With failures carried (failures.py), a file that fails to read is one failure, and reading goes on with
        the next file (TF's reader retries the file forever)."""
        for name in elements(self._input):
            if type(name) is Failed:
                yield name
            elif carrying():
                yield from ending(self._read(_path(name)))
            else:
                yield from self._read(_path(name))

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    @property
    def element_spec(self) -> Any:
        return self._peek_spec()  # records, not the file names of the input


class TextLineDataset(ReaderDataset):
    """Lines of text files (without the line ending) as scalar byte strings."""

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None, name: Any = None) -> None:
        super().__init__(_file_list(filenames))

    def _read(self, path: str) -> Iterator[Any]:
        try:
            with open(path, "rb") as handle:
                for line in handle:
                    yield canonical(line.rstrip(b"\r\n"))
        except FileNotFoundError:
            raise errors.NotFoundError(f"{path}; No such file or directory") from None

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), STRING)


class NumpyFileDataset(ReaderDataset):
    """Rows of ``.npy`` files, or of the arrays in ``.npz`` files (a dict per row, or a tuple in ``keys``
    order). ``.npy`` files are memory-mapped; files are read one at a time; pickles are refused."""

    def __init__(self, filenames: Any, keys: list[str] | None = None) -> None:
        super().__init__(_file_list(filenames))
        self.keys = list(keys) if keys is not None else None

    def _read(self, path: str) -> Iterator[Any]:
        try:
            loaded = np.load(path, mmap_mode="r" if path.endswith(".npy") else None, allow_pickle=False)
        except FileNotFoundError:
            raise errors.NotFoundError(f"{path}; No such file or directory") from None
        except ValueError as exc:
            raise errors.DataLossError(f"{path} is not a NumPy file mirrorlab can read safely: {exc}") from None
        if isinstance(loaded, np.ndarray):
            for row in loaded:
                yield np.array(row)
            return
        with loaded:
            names = self.keys if self.keys is not None else sorted(loaded.files)
            missing = [k for k in names if k not in loaded.files]
            if missing:
                raise errors.InvalidArgumentError(f"{path} has no arrays {missing}; it has {sorted(loaded.files)}")
            try:
                arrays = {k: loaded[k] for k in names}
            except ValueError as exc:
                raise errors.DataLossError(f"{path} is not a NumPy file mirrorlab can read safely: {exc}") from None
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) > 1:
            raise errors.InvalidArgumentError(f"{path}: arrays {names} have different lengths {sorted(lengths)}")
        for i in range(lengths.pop() if lengths else 0):
            row = {k: np.array(a[i]) for k, a in arrays.items()}
            yield tuple(row[k] for k in names) if self.keys is not None else row


class FlatMapDataset(UnaryDataset):
    """``flat_map`` / ``interleave``: the datasets ``fn`` makes from each input element, interleaved."""

    def __init__(self, input_dataset: Dataset, fn: Callable, cycle_length: int, block_length: int) -> None:
        super().__init__(input_dataset)
        if cycle_length == AUTOTUNE:  # TF: one input at a time per schedulable CPU core
            cycle_length = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.fn = fn
        self.cycle_length = max(1, int(cycle_length))
        self.block_length = max(1, int(block_length))

    def _dataset_for(self, element: Any) -> Dataset:
        result = call(self.fn, element)
        if not isinstance(result, Dataset):
            raise TypeError(f"the function given to flat_map/interleave must return a Dataset, got "
                            f"{type(result).__name__}")
        return result

    def _iterate(self) -> Iterator[Any]:
        """TF's interleave order: a slot whose dataset ends is refilled from the input when next visited. A failure
        (failures.py) passes on without moving the cycle on."""
        inputs, end_of_input = elements(self._input), False
        slots: list[Iterator[Any] | None] = [None] * self.cycle_length
        open_count = index = block = 0
        while not end_of_input or open_count:
            current = slots[index]
            if current is not None:
                value = next(current, _END)
                if type(value) is Failed:
                    yield value
                    continue
                if value is not _END:
                    block += 1
                    if block == self.block_length:
                        index, block = (index + 1) % self.cycle_length, 0
                    yield value
                    continue
                slots[index] = None
                open_count -= 1
                index, block = (index + 1) % self.cycle_length, 0
            elif not end_of_input:
                element = next(inputs, _END)
                dataset = element if element is _END or type(element) is Failed else attempt(self._dataset_for,
                                                                                              element)
                if dataset is _END:
                    end_of_input = True
                elif type(dataset) is Failed:
                    yield dataset
                else:
                    slots[index] = elements(dataset)
                    open_count += 1
            else:
                index, block = (index + 1) % self.cycle_length, 0

    def reads_files(self) -> bool:
        """Whether ``fn`` builds a file reader (then FILE sharding splits this node's input), seen on the dataset it
        makes from the first input element (none, or one that fails to read, makes no reader)."""
        try:
            sample = self._input._peek()
        except errors.OpError:
            return False
        if sample is None:
            return False
        return any(isinstance(node, ReaderDataset) for node in self._dataset_for(sample)._walk())

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    @property
    def element_spec(self) -> Any:
        """The element spec of the datasets ``fn`` makes, as TF traces ``fn`` on the input's spec: the spec of the one
        made from the first input element, its dimensions unknown where the one made from zeros of the input's type
        differs (without input, the ones made from zeros and from ones where the input's dimensions are unknown)."""
        spec_of = lambda value: self._dataset_for(value).element_spec  # noqa: E731
        try:
            first = self._input._peek()
        except errors.OpError:  # reading fails (TF would only trace): as without data
            first = None
        traced = self._traced(spec_of)
        if first is None:
            made, traced = traced, self._traced(spec_of, ones_where_unknown(self._input.element_spec))
            if made is None:
                raise UnknownSpecError("cannot infer the element_spec of flat_map/interleave over an empty input "
                                       "whose function fails on zeros of the input's type")
        else:
            made = spec_of(first)
        agreed = None if traced is None else agreed_specs(made, traced)
        return made if agreed is None else agreed
