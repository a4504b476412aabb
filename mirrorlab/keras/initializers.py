"""Weight initializers (seeded; on a cluster every worker then starts from the chief's values anyway)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from typing import Any

import numpy as np

from ..data.seeding import dataset_seed

from .registry import lookup

__all__ = ["get", "GlorotUniform", "Zeros", "Ones", "Constant", "Identity", "RandomNormal", "RandomUniform"]


class Initializer(ABC):
    @abstractmethod
    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        """Implemented by subclasses."""


class GlorotUniform(Initializer):
    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        fan_in, fan_out = (shape[-2] * receptive, shape[-1] * receptive) if len(shape) >= 2 else (shape[0], shape[0])
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        rng = np.random.default_rng(dataset_seed(self.seed))
        return rng.uniform(-limit, limit, shape).astype(dtype)


class RandomNormal(Initializer):
    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        rng = np.random.default_rng(dataset_seed(self.seed))
        return rng.normal(self.mean, self.stddev, shape).astype(dtype)


class RandomUniform(Initializer):
    """Values drawn uniformly from ``[minval, maxval)`` (Keras' "uniform", Embedding's default)."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: int | None = None) -> None:
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        rng = np.random.default_rng(dataset_seed(self.seed))
        return rng.uniform(self.minval, self.maxval, shape).astype(dtype)


class Zeros(Initializer):
    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        return np.zeros(shape, dtype)


class Ones(Initializer):
    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        return np.ones(shape, dtype)


class Constant(Initializer):
    """Every value ``value`` (a scalar, or an array that broadcasts to the shape)."""

    def __init__(self, value: Any = 0.0) -> None:
        self.value = value

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.value, dtype), shape).copy()


class Identity(Initializer):
    """``gain`` times the identity matrix (2-D shapes only, as Keras)."""

    def __init__(self, gain: float = 1.0) -> None:
        self.gain = gain

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        if len(shape) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices. Received: "
                             f"shape={shape} of rank {len(shape)}.")
        return (self.gain * np.eye(*shape)).astype(dtype)


_BY_NAME = {"glorot_uniform": GlorotUniform, "zeros": Zeros, "ones": Ones, "random_normal": RandomNormal,
            "random_uniform": RandomUniform, "uniform": RandomUniform, "constant": Constant,
            "identity": Identity}


def get(identifier: str | Initializer) -> Initializer:
    return lookup(identifier, Initializer, _BY_NAME, "initializer")
