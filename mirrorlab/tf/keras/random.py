"""``keras.random`` as Keras 3 runs it on TensorFlow: seeds and the samplers behind initializers and Dropout.

Keras' random ops are stateless: an integer seed ``s`` means the stateless seed ``[s, 0]``; a ``SeedGenerator``
hands out ``[s, 0]``, ``[s, 1]``, ... from a non-trainable variable (mirrored with aggregation NONE under a
strategy, so every replica advances its own copy and draws what the others draw); no seed means the global
generator. Unseeded initializers and generators take their seed from Python's ``random`` (``make_default_seed``),
so ``keras.utils.set_random_seed`` fixes them. The values are TF's (``mirrorlab.random``).
"""

from __future__ import annotations

import random as python_random
from typing import Any

import numpy as np

from .. import random as tf_random
from ...aggregation import VariableAggregation
from ...distribute.variables import Variable
from ..name_scope import name_scope
from ...runtime import current_environment
from ...tensor import as_tensor, tensor_view
from .naming import auto_name, keras_path, keras_path_scope

__all__ = ["SeedGenerator", "make_default_seed", "draw_seed", "uniform", "normal", "truncated_normal", "dropout"]

_SEED_MODULUS = 2**31 - 2  # Keras' TF backend folds seeds into int32 with floormod(seed, int32 max - 1)
_GLOBAL = "keras.global_seed_generator"


def make_default_seed() -> int:
    """A seed for an object created without one, from Python's ``random`` (per worker process)."""
    return python_random.randint(1, int(1e9))


class SeedGenerator:
    """A stream of stateless seeds ``[seed, 0]``, ``[seed, 1]``, ... kept in a non-trainable int64 variable."""

    def __init__(self, seed: int | None = None, name: str | None = None) -> None:
        self.name = name if name is not None else auto_name(type(self).__name__)
        self._initial_seed = seed
        if seed is None:
            seed = make_default_seed()
        if not isinstance(seed, int):
            raise ValueError(f"Argument `seed` must be an integer. Received: seed={seed}")
        with name_scope(self.name), keras_path_scope(self.name):
            self.state = Variable(np.array([seed, 0], np.int64), trainable=False, name="seed_generator_state",
                                  aggregation=VariableAggregation.NONE)
            self.state._keras_path = keras_path("seed_generator_state")

    def next(self, ordered: bool = True) -> np.ndarray:
        """The current state, then advance it (by one in the second word; scrambled when not ``ordered``)."""
        value = np.asarray(self.state.value()).copy()
        self.state.assign(value + np.array([0, 1], np.int64) if ordered else (value + 1) * 5387 % 933199)
        return value

    def get_config(self) -> dict[str, Any]:
        return {"seed": self._initial_seed, "name": self.name}

    def __repr__(self) -> str:
        return f"<SeedGenerator name={self.name}>"


def global_seed_generator() -> SeedGenerator:
    """The generator for ops given no seed: one per worker process, made on first use."""
    state = current_environment().process_state
    if state.get(_GLOBAL) is None:
        state[_GLOBAL] = SeedGenerator()
    return state[_GLOBAL]


def reset_global_seed_generator() -> None:
    """Forget the global generator (``set_random_seed`` does: it is remade from the new seed)."""
    current_environment().process_state[_GLOBAL] = None


def draw_seed(seed: Any) -> np.ndarray:
    """The int32 stateless seed pair an op with ``seed`` uses (drawing from a generator advances it)."""
    if isinstance(seed, SeedGenerator):
        pair = seed.next()
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        pair = np.array([int(seed), 0], np.int64)
    elif seed is None:
        pair = global_seed_generator().next(ordered=False)
    else:
        raise ValueError("Argument `seed` must be either an integer or an instance of `SeedGenerator`. "
                         f"Received: seed={seed} (of type {type(seed)})")
    return np.mod(pair, _SEED_MODULUS).astype(np.int32)


def _dtype(dtype: Any) -> np.dtype:
    return np.dtype("float32" if dtype is None else getattr(dtype, "as_numpy_dtype", dtype))


def uniform(shape: Any, minval: float = 0.0, maxval: float = 1.0, dtype: Any = None, seed: Any = None) -> np.ndarray:
    """Values drawn uniformly from ``[minval, maxval)``; Keras casts the bounds with ``tf.cast``, so a Python float
    goes through float32 first."""
    dtype = _dtype(dtype)
    low, high = (as_tensor(bound).astype(dtype) for bound in (minval, maxval))
    return tf_random.stateless_uniform(shape, draw_seed(seed), low, high, dtype)


def normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = None, seed: Any = None) -> np.ndarray:
    """Normally distributed values."""
    return tf_random.stateless_normal(shape, draw_seed(seed), mean, stddev, _dtype(dtype))


def truncated_normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = None,
                     seed: Any = None) -> np.ndarray:
    """Normally distributed values, redrawn beyond two standard deviations."""
    return tf_random.stateless_truncated_normal(shape, draw_seed(seed), mean, stddev, _dtype(dtype))


def dropout_mask(shape: tuple[int, ...], rate: float, dtype: np.dtype, seed: Any) -> np.ndarray:
    """Which inputs dropout keeps: a uniform draw in the inputs' type at least ``rate`` (TF's stateless dropout)."""
    return tf_random.stateless_uniform(shape, draw_seed(seed), dtype=dtype) >= np.asarray(rate, dtype)


def dropout_scale(rate: float, dtype: np.dtype) -> Any:
    """The factor on kept inputs: ``1 / (1 - rate)`` in Python floats, then the inputs' type (as TF computes it)."""
    return np.asarray(1 / (1 - rate), dtype)[()]


def dropout(inputs: Any, rate: float, noise_shape: Any = None, seed: Any = None) -> np.ndarray:
    """``keras.random.dropout``: zero each input (each draw of ``noise_shape``) with probability ``rate`` and scale
    the rest by ``1 / (1 - rate)``."""
    x = np.asarray(inputs)
    if rate == 1.0:
        return np.zeros_like(x)
    if rate == 0.0:
        return x
    shape = x.shape if noise_shape is None else tuple(x.shape[i] if d is None else d for i, d in enumerate(noise_shape))
    keep = dropout_mask(shape, rate, x.dtype, seed)
    return tensor_view(np.where(keep, x * dropout_scale(rate, x.dtype), x.dtype.type(0)))
