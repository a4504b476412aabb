"""``padded_batch``: batches of elements whose shapes differ, padded as TF 2.21 pads them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import errors, nest
from .batching import BatchDataset
from .dataset import Dataset, TensorSpec, UnknownSpecError
from .tensors import STRING, canonical, to_element

__all__ = ["PaddedBatchDataset", "shape_leaves"]


def _dtype_text(dtype: np.dtype) -> str:
    """A dtype as TF prints a DType: ``<dtype: 'int64'>``."""
    return f"<dtype: '{'string' if dtype == STRING else dtype.name}'>"


def _padded_shape(shape: Any, spec: TensorSpec) -> tuple[int | None, ...]:
    """One component's padded shape (None or -1: the longest in the batch), checked against its spec."""
    dims = tuple(None if d is None or int(d) == -1 else int(d) for d in shape)
    compatible = spec.shape is None or (len(dims) == len(spec.shape) and all(
        p is None or s is None or p >= s for p, s in zip(dims, spec.shape)))
    if not compatible:
        raise ValueError(f"The padded shape {dims} is not compatible with the shape {spec.shape} of the "
                         "corresponding input component.\nFix: give every padded dimension at least the size of "
                         "the component's dimension (None or -1 pads to the longest in the batch).")
    return dims


def _padding_value(value: Any, spec: TensorSpec) -> Any:
    """One component's padding value: a scalar of the component's dtype (TF converts Python values with its
    own dtype inference and refuses a different dtype)."""
    if value is None:
        return b"" if spec.dtype == STRING else np.zeros((), spec.dtype)[()]
    array = canonical(np.asarray(to_element(value)))
    if array.dtype != spec.dtype:
        raise TypeError(f"Invalid `padding_values`. `padding_values` values type {_dtype_text(array.dtype)} does "
                        f"not match type {_dtype_text(spec.dtype)} of the corresponding input component.\nFix: "
                        f"give the padding value the component's dtype, e.g. np.{spec.dtype.name}(...).")
    if array.ndim:
        raise ValueError(f"Invalid `padding_values`. `padding_values` must be scalars, got shape {array.shape}.")
    return array.item() if spec.dtype == STRING else array[()]


def _per_component(value: Any, specs: Any) -> list[Any]:
    """``value`` matched to the flattened components (one value for all of them is broadcast)."""
    flat = nest.flatten(specs)
    if value is None or not nest.is_nested(specs) or not nest.is_nested(value):
        return [value] * len(flat)
    nest.assert_same_structure(specs, value, check_types=False)
    return nest.flatten(value)


class PaddedBatchDataset(BatchDataset):
    """TF's PaddedBatchDatasetV2: each component padded to its padded shape (unknown dims: the batch's
    longest), then stacked."""

    _fuses_map = False

    def __init__(self, input_dataset: Dataset, batch_size: int, padded_shapes: Any, padding_values: Any,
                 drop_remainder: bool) -> None:
        try:
            specs = input_dataset.element_spec
        except UnknownSpecError:  # an empty input: nothing will be padded
            specs = None
        self._specs = specs
        self._shapes: list[Any] = []
        self._values: list[Any] = []
        if specs is not None:  # TF checks the shapes, then the padding values, then the batch size
            flat = nest.flatten(specs)
            if padded_shapes is None:
                for index, spec in enumerate(flat):
                    if spec.shape is None:
                        raise ValueError(f"You must provide `padded_shapes` argument because component {index} "
                                         "has unknown rank.")
                self._shapes = [spec.shape for spec in flat]
            else:
                self._shapes = [_padded_shape(s, spec) for s, spec in zip(shape_leaves(padded_shapes, specs), flat)]
            self._values = [_padding_value(v, spec) for v, spec in zip(_per_component(padding_values, specs), flat)]
        super().__init__(input_dataset, batch_size, drop_remainder)

    def _combine(self, elements: list[Any]) -> Any:
        flat = [nest.flatten(e) for e in elements]
        out = []
        for c, (shape, value, spec) in enumerate(zip(self._shapes, self._values, nest.flatten(self._specs))):
            parts = [f[c] for f in flat]
            target = tuple(max(p.shape[d] for p in parts) if size is None else size for d, size in enumerate(shape))
            batch = np.full((len(parts), *target), value, dtype=spec.dtype)
            for i, part in enumerate(parts):
                if any(have > want for have, want in zip(part.shape, target)):
                    raise errors.DataLossError("Attempted to pad to a smaller size than the input element.")
                batch[(i, *(slice(0, d) for d in part.shape))] = part.item() if part.ndim == 0 else part
            out.append(canonical(batch))
        return nest.pack_sequence_as(elements[0], out)

    @property
    def element_spec(self) -> Any:
        if self._specs is None:
            return super().element_spec  # an empty input: unknown, as its own spec
        size = self.batch_size if self.drop_remainder else None
        return nest.pack_sequence_as(self._specs, [TensorSpec((size, *shape), spec.dtype) for shape, spec in
                                                   zip(self._shapes, nest.flatten(self._specs))])


def shape_leaves(padded_shapes: Any, specs: Any) -> list[Any]:
    """The padded shapes in component order: a shape is a leaf (a list or tuple of dims) wherever the
    element spec has a component."""
    if isinstance(specs, TensorSpec):
        return [padded_shapes]
    if isinstance(specs, dict):
        return [leaf for key in sorted(specs) for leaf in shape_leaves(padded_shapes[key], specs[key])]
    return [leaf for shape, spec in zip(padded_shapes, specs, strict=True) for leaf in shape_leaves(shape, spec)]
