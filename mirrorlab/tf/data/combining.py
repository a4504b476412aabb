"""Datasets built from several datasets or from Python generators: ``zip``, ``concatenate``,
``enumerate`` and ``from_generator``, with TF 2.21's structure rules, cardinalities and errors."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ... import errors, nest
from ...tensor import dtype_name
from ..tensor_conversion import convert_to_tensor
from ..tensor_shape import TensorShape
from .dataset import (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, TensorSpec, UnknownSpecError, counted,
                      merged_element_specs, merged_spec)
from .failures import Failed, attempt, elements, failure
from .sources import SourceDataset
from .tensors import canonical, is_string

__all__ = ["ZipDataset", "ConcatenateDataset", "ChooseDataset", "GeneratorDataset", "zip_datasets",
           "signature_from_types"]


def zip_datasets(*args: Any, datasets: Any = None) -> "ZipDataset":
    """``Dataset.zip``: a nest of datasets (or several positional datasets) -> a dataset of nests."""
    if datasets is not None and args:
        raise TypeError("Both `*args` and `datasets` cannot be set.")
    structure = datasets if datasets is not None else (args[0] if len(args) == 1 else tuple(args))
    if not args and datasets is None:
        raise TypeError("Must pass at least one dataset to `zip`.")
    pending = [structure]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            raise TypeError("Invalid input to `zip`. Inputs are expected to be (nested) structures of "
                            "`tf.data.Dataset` objects. Python `list` is not supported and you should use `tuple` "
                            "instead.")
        if isinstance(item, tuple):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif not isinstance(item, Dataset):
            raise TypeError(f"Invalid input to `zip`. Inputs are expected to be (nested) structures of "
                            f"`tf.data.Dataset` objects, got {type(item).__name__}.")
    return ZipDataset(structure)


class ZipDataset(Dataset):
    """Elements of several datasets side by side, until the shortest ends."""

    def __init__(self, structure: Any) -> None:
        self.structure = structure
        self._inputs = tuple(nest.flatten(structure))

    def _iterate(self) -> Iterator[Any]:
        """A failure of any input (failures.py) fails the element, after every input has been read, as in TF."""
        iterators = [elements(d) for d in self._inputs]
        while True:
            items = []
            for it in iterators:
                item = next(it, _END)
                if item is _END:
                    return
                items.append(item)
            failure = next((item for item in items if type(item) is Failed), None)
            yield failure if failure is not None else nest.pack_sequence_as(self.structure, items)

    def _replace_inputs(self, inputs: tuple[Dataset, ...]) -> Dataset:
        clone = super()._replace_inputs(inputs)
        assert isinstance(clone, ZipDataset)
        clone.structure = nest.pack_sequence_as(self.structure, list(inputs))
        return clone

    def _cardinality(self) -> int:
        counts = [d._cardinality() for d in self._inputs]
        if UNKNOWN_CARDINALITY in counts:  # as TF: unknown wins, even over an empty input
            return UNKNOWN_CARDINALITY
        known = [c for c in counts if counted(c)]  # a take(-5)'s -5 included, as TF
        return min(known) if known else INFINITE_CARDINALITY

    @property
    def element_spec(self) -> Any:
        return nest.pack_sequence_as(self.structure, [d.element_spec for d in self._inputs])


class ConcatenateDataset(Dataset):
    """The elements of one dataset, then those of another with the same structure and dtypes."""

    def __init__(self, first: Dataset, second: Dataset) -> None:
        if not isinstance(second, Dataset):
            raise TypeError(f"concatenate expects a Dataset, got {type(second).__name__}")
        self._inputs = (first, second)
        a, b = first.element_spec, second.element_spec
        try:
            nest.assert_same_structure(a, b, check_types=False)
            same = all(x.dtype == y.dtype for x, y in zip(nest.flatten(a), nest.flatten(b)))
        except (TypeError, ValueError):
            same = False
        if not same:
            raise TypeError(f"Incompatible dataset elements:\n  {a} vs.   {b}")

    def _iterate(self) -> Iterator[Any]:
        return itertools.chain.from_iterable(elements(d) for d in self._inputs)  # the second begins when the first ends

    def _initialize_iterators(self) -> None:
        self._inputs[0]._initialize_iterators()  # TF creates the second input's iterator when the first ends

    def _cardinality(self) -> int:
        a, b = (d._cardinality() for d in self._inputs)
        if INFINITE_CARDINALITY in (a, b):
            return INFINITE_CARDINALITY
        return UNKNOWN_CARDINALITY if UNKNOWN_CARDINALITY in (a, b) else a + b

    @property
    def element_spec(self) -> Any:
        return nest.map_structure(merged_spec, self._inputs[0].element_spec, self._inputs[1].element_spec,
                                  check_types=False)


def _common_spec(specs: list[Any]) -> Any:
    """TF's ``most_specific_common_supertype`` of the datasets' specs for choose/sample_from_datasets, or TF's
    TypeError naming the first dataset that differs in structure or dtype."""
    spec = specs[0]
    for i, other in enumerate(specs[1:], start=1):
        try:
            spec = merged_element_specs(spec, other, check_types=False)
        except (TypeError, ValueError):
            raise TypeError(f"Invalid `datasets`. `datasets` must have compatible element specs.\n Dataset 0 "
                            f"element_spec={specs[0]}.\nDataset {i} element_spec={other}.") from None
    return spec


class ChooseDataset(Dataset):
    """``choose_from_datasets``: each element from the dataset the next choice (an int64 scalar) names; a
    chosen dataset that has ended ends the whole (or is skipped without ``stop_on_empty_dataset``, until every
    input has ended)."""

    def __init__(self, datasets: list[Dataset], choices: Dataset, stop_on_empty_dataset: bool) -> None:
        if not datasets:
            raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
        spec = choices.element_spec
        if not isinstance(spec, TensorSpec) or spec.dtype != np.int64 or spec.shape not in ((), None):
            raise TypeError(f"Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` "
                            f"tensors but are {spec}.")
        self._inputs = (choices, *datasets)
        with contextlib.suppress(UnknownSpecError):  # (an empty mapped input's spec is known when first read)
            self.element_spec  # noqa: B018 (TF checks the inputs' specs when the dataset is made)
        self.stop_on_empty_dataset = stop_on_empty_dataset

    def _iterate(self) -> Iterator[Any]:
        sources = [elements(d) for d in self._inputs[1:]]
        ended = [False] * len(sources)
        for choice in elements(self._inputs[0]):
            if type(choice) is Failed:
                yield choice
                continue
            index = int(choice)
            if not 0 <= index < len(sources):
                yield failure(errors.InvalidArgumentError(f"Selector index out of range: {index} >= {len(sources)}"))
                continue
            if ended[index]:
                continue
            value = next(sources[index], _END)
            if value is _END:
                ended[index] = True
                if self.stop_on_empty_dataset or all(ended):  # (TF stops reading choices once every input ended)
                    return
                continue
            yield value

    def _cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    @property
    def element_spec(self) -> Any:
        return _common_spec([d.element_spec for d in self._inputs[1:]])


class GeneratorDataset(SourceDataset):
    """``from_generator``: elements of a Python generator, converted to the declared dtypes and checked
    against the declared shapes (a fresh generator per iteration)."""

    def __init__(self, generator: Callable[..., Any], signature: Any, args: tuple) -> None:
        if not callable(generator):
            raise TypeError("`generator` must be a Python callable.")
        self.generator = generator
        self.signature = signature
        self.args = args

    def _iterate(self) -> Iterator[Any]:
        """The generator's elements, converted; as in TF, an error the generator raises is an InvalidArgumentError
        (an ``ignore_errors()`` then asks the generator for its next element, as TF's does)."""
        iterator = iter(self.generator(*self.args))
        while True:
            try:
                value = next(iterator)
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001 - TF's py_func reports any Python error this way
                error = errors.InvalidArgumentError(f"{type(exc).__name__}: {exc}")
                error.__cause__ = exc
                yield failure(error)
                continue
            yield attempt(_structured, self.signature, value)

    @property
    def element_spec(self) -> Any:
        """The signature; a component declared without a shape (TF: unknown rank) takes the rank of the first
        element, every dimension unknown."""
        if not any(spec.shape is None for spec in nest.flatten(self.signature)):
            return self.signature
        first = self._peek()
        if first is None:
            return nest.map_structure(lambda spec: TensorSpec(spec.shape or (), spec.dtype), self.signature)
        return nest.map_structure(lambda spec, a: spec if spec.shape is not None else
                                  TensorSpec((None,) * np.ndim(a), spec.dtype), self.signature, first)


def signature_from_types(types: Any, shapes: Any) -> Any:
    """The TensorSpec nest for ``from_generator(output_types=, output_shapes=)``: a shape (a tuple of ints and
    Nones) is a leaf of ``shapes`` wherever ``types`` has a dtype; no shapes means unknown shapes."""
    if isinstance(types, dict):
        return type(types)((k, signature_from_types(t, None if shapes is None else shapes[k]))
                           for k, t in types.items())
    if isinstance(types, tuple):
        parts = [signature_from_types(t, None if shapes is None else shapes[i]) for i, t in enumerate(types)]
        return type(types)(*parts) if hasattr(type(types), "_fields") else tuple(parts)
    return TensorSpec(shapes, types)


def _structured(signature: Any, value: Any) -> Any:
    """``value`` in the signature's structure, converted as TF's ``from_generator`` converts it: tuples and dicts
    are structure, anything where the signature has a TensorSpec is one tensor (a Python list too). TF converts with
    NumPy's casts (``2.5`` -> int64 ``2``), except for one TensorSpec of unknown rank, which it converts as
    ``tf.convert_to_tensor`` does (``2.5`` -> int64 refused)."""
    def match(spec: Any, item: Any) -> Any:
        if isinstance(spec, TensorSpec):
            return _numpy_converted(spec, item)
        if isinstance(spec, dict) and isinstance(item, dict) and set(spec) == set(item):
            return type(spec)((k, match(spec[k], item[k])) for k in spec)
        if isinstance(spec, tuple) and isinstance(item, tuple) and len(item) == len(spec):  # (a list is one tensor)
            items = [match(s, i) for s, i in zip(spec, item)]
            return type(spec)(*items) if hasattr(type(spec), "_fields") else tuple(items)
        raise _mismatch(nest.map_structure(lambda s: _DtypeName(f"tf.{dtype_name(s.dtype)}"), signature), value)

    if isinstance(signature, TensorSpec) and signature.shape is None:
        try:
            return canonical(np.asarray(convert_to_tensor(value, signature.dtype)))
        except (TypeError, ValueError):
            raise _mismatch(signature, value) from None
    return match(signature, value)


class _DtypeName(str):
    """A dtype's name that prints unquoted inside a structure, as TF's DTypes print (``(tf.int64, tf.string)``)."""

    def __repr__(self) -> str:
        return str(self)


def _mismatch(expected: Any, value: Any) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(f"TypeError: `generator` yielded an element that did not match the expected "
                                       f"structure. The expected structure was {expected}, but the yielded element "
                                       f"was {value}.")


def _numpy_converted(spec: TensorSpec, value: Any) -> Any:
    """One component as TF's ``from_generator`` converts it: NumPy's unsafe cast to a numeric dtype, NumPy's
    conversion to bool; strings must be ``str`` (encoded as UTF-8) or ``bytes``. Then the shape is checked."""
    try:
        if spec.dtype.kind in "iufc":
            converted = np.asarray(value).astype(spec.dtype)
        else:
            converted = np.asarray(value, dtype=spec.dtype)
    except (TypeError, ValueError):
        raise errors.InvalidArgumentError(f"TypeError: `generator` yielded an element that could not be converted "
                                          f"to the expected type. The expected type was {dtype_name(spec.dtype)}, "
                                          f"but the yielded element was {value}.") from None
    declared = TensorShape(spec.shape)
    if not declared.is_compatible_with(converted.shape):
        raise errors.InvalidArgumentError(f"TypeError: `generator` yielded an element of shape {converted.shape} "
                                          f"where an element of shape {declared} was expected.")
    if is_string(spec.dtype):
        for item in converted.flat:
            if not isinstance(item, (str, bytes)):
                raise errors.InternalError(f"Unsupported object type {_type_name(item)}")
    return canonical(converted)


def _type_name(item: Any) -> str:
    """A Python type's name as TF's py_func names it (``float``, ``numpy.float32``)."""
    kind = type(item)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


_END = object()
