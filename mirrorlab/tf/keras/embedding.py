"""Keras 3's ``Embedding`` layer: rows of a trainable ``(input_dim, output_dim)`` matrix looked up by integer indices.

As Keras on TF: indices of another dtype are cast to int32 (floats truncate), a negative index counts from the end
(Keras' ``take``), an index outside ``[0, input_dim)`` after that raises TF's GatherV2 error, and the tape's gradient
of the matrix is ``IndexedSlices`` (one row per looked-up index, repeated indices kept apart), which optimizers add
row by row.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ... import errors
from ...tensor import IndexedSlices, array_module, to_host
from ...distribute.variables import Variable
from . import initializers, regularizers
from .layers import BuiltinLayer
from .saving.serialization import serialize_keras_object

__all__ = ["Embedding"]


def _positive_int(value: Any, name: str) -> int:
    """``value`` when it is a positive int (not a bool), else Keras' ValueError naming ``name``."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value} (of type "
                         f"{type(value).__name__}).")
    return value


class Embedding(BuiltinLayer):
    """``embeddings[indices]``: an output of shape ``indices.shape + (output_dim,)`` in the layer's dtype."""

    _fixed_arguments = {"embeddings_constraint": (None,), "quantization_config": (None,), "lora_rank": (None,)}

    def __init__(self, input_dim: int, output_dim: int, embeddings_initializer: Any = "uniform",
                 embeddings_regularizer: Any = None, mask_zero: bool = False, weights: Any = None,
                 input_length: int | None = None, **kwargs: Any) -> None:
        self.input_dim = _positive_int(input_dim, "input_dim")
        self.output_dim = _positive_int(output_dim, "output_dim")
        if input_length is not None:
            warnings.warn("Argument `input_length` is deprecated. Just remove it.", stacklevel=2)
        if mask_zero:
            raise NotImplementedError("Embedding(mask_zero=True): Keras masking (masks passed to the following "
                                      "layers) is not implemented in mirrorlab.\nFix: use mask_zero=False and "
                                      "give padding index 0 no special meaning, or weight the padded positions "
                                      "yourself (e.g. sample_weight).")
        super().__init__(**kwargs)
        self.embeddings_initializer = initializers.get(embeddings_initializer)  # draws its default seed now
        self.embeddings_regularizer = regularizers.get(embeddings_regularizer)
        self.mask_zero = False
        if weights is not None:  # Keras builds the layer and sets the given matrix
            self.build(None)
            self._set_matrix(weights[0] if isinstance(weights, list) and len(weights) == 1 else weights)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "input_dim": self.input_dim, "output_dim": self.output_dim,
                "embeddings_initializer": serialize_keras_object(self.embeddings_initializer),
                "embeddings_regularizer": serialize_keras_object(self.embeddings_regularizer),
                "activity_regularizer": None, "embeddings_constraint": None, "mask_zero": False,
                "quantization_config": None}

    def build(self, input_shape: Any = None) -> None:
        """Create ``embeddings`` (its shape does not depend on the input's)."""
        self._embeddings = self.add_weight((self.input_dim, self.output_dim), self.embeddings_initializer,
                                           regularizer=self.embeddings_regularizer, name="embeddings")

    def _set_matrix(self, matrix: Any) -> None:
        shape = tuple(np.shape(matrix))
        if shape != (self.input_dim, self.output_dim):
            raise ValueError(f"Layer {self.name} weight shape {(self.input_dim, self.output_dim)} is not compatible "
                             f"with provided weight shape {shape}.\nFix: pass weights=[matrix] with a matrix of "
                             "shape (input_dim, output_dim).")
        self._embeddings.assign(np.asarray(matrix, self.dtype))

    @property
    def embeddings(self) -> Variable:
        """The ``(input_dim, output_dim)`` matrix (Keras' AttributeError before the layer is built)."""
        if not self.built:
            raise AttributeError("You must build the layer before accessing `embeddings`.")
        return self._embeddings

    def _checkpoint_children(self) -> dict[str, Any]:
        """Keras 3 tracks the matrix as ``_embeddings``."""
        return {"_embeddings": self._embeddings}

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (*input_shape, self.output_dim)

    def _convert_input(self, x: Any) -> Any:
        """Keras' Embedding takes int32 and int64 indices as they are and casts any other input to int32."""
        return x if x.dtype in (np.int32, np.int64) else x.astype(np.int32)

    def _output_dtype(self, input_dtype: np.dtype) -> np.dtype:
        return self.dtype

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        xp = array_module(x)
        index = xp.where(x < 0, x + x.dtype.type(self.input_dim), x)
        outside = (index < 0) | (index >= self.input_dim)
        if bool(outside.any()):
            raise self._range_error(np.asarray(to_host(index)), np.asarray(to_host(outside)))
        return xp.take(self._embeddings._read(), index, axis=0), index

    def _range_error(self, index: np.ndarray, outside: np.ndarray) -> errors.InvalidArgumentError:
        """TF's GatherV2 error for the first index (row-major) outside the table, as Keras wraps it."""
        where = tuple(int(i) for i in np.argwhere(outside)[0]) if index.ndim else ()
        position = f"[{','.join(str(i) for i in where)}]" if where else ""
        return errors.InvalidArgumentError(
            f"Exception encountered when calling Embedding.call().\n\n\x1b[1mindices{position} = {index[where]} is not "
            f"in [0, {self.input_dim}) [Op:GatherV2]\x1b[0m\n\nFix: indices must lie in [0, input_dim) "
            f"(input_dim={self.input_dim}; negative ones count from the end): raise input_dim or map the indices.")

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        """No input gradient (indices); the matrix's as TF's: IndexedSlices of ``dy``'s rows at the indices."""
        index = cache
        rows = IndexedSlices(dy.reshape(-1, self.output_dim), index.reshape(-1),
                             np.array([self.input_dim, self.output_dim], np.int32))
        return None, [rows]
