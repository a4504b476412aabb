"""``keras.utils``: ``set_random_seed`` seeds Python's and NumPy's generators (Python's gives the default seeds of
initializers and Dropout layers made afterwards) and the TF global seed (which fixes tf.data shuffles without their
own seed), and restarts Keras' global seed generator, with Keras' check that the seed is an int; ``to_categorical``
and ``normalize`` as Keras 3's (NumPy in, NumPy out)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from .. import random as tf_random
from ...tensor import Tensor
from .random import reset_global_seed_generator

__all__ = ["set_random_seed", "to_categorical", "normalize"]


def set_random_seed(seed: Any) -> None:
    """Seed ``random``, ``numpy.random`` and ``tf.random.set_seed`` at once."""
    if not isinstance(seed, int):
        raise ValueError(f"Expected `seed` argument to be an integer. Received: seed={seed} (of type {type(seed)})")
    reset_global_seed_generator()
    random.seed(seed)
    np.random.seed(seed)
    tf_random.set_seed(seed)


def to_categorical(x: Any, num_classes: int | None = None) -> np.ndarray:
    """One-hot rows of the class ids ``x`` (a trailing dimension of 1 dropped): ``num_classes`` columns (by default
    the largest id plus one), float64 for NumPy input as Keras' (a mirrorlab tensor gives float32, as a TF tensor
    gives Keras' ``one_hot``)."""
    as_tensor = isinstance(x, Tensor)
    x = np.array(x, dtype="int64")
    shape = x.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = tuple(shape[:-1])
    x = x.reshape(-1)
    if not num_classes:
        num_classes = int(np.max(x)) + 1
    categorical = np.zeros((x.shape[0], num_classes), np.float32 if as_tensor else np.float64)
    categorical[np.arange(x.shape[0]), x] = 1
    return categorical.reshape(shape + (num_classes,))


def normalize(x: Any, axis: int = -1, order: int = 2) -> np.ndarray:
    """``x`` divided by its ``order``-norm along ``axis`` (a zero norm leaves the values), as Keras' NumPy path."""
    x = np.asarray(x)
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis or -1)
