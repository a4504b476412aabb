"""Weight initializers, giving Keras 3's values on TF: the random ones draw with TF's stateless ops from their
seed (an integer, a ``SeedGenerator``, or without one a default seed taken from Python's ``random`` when the
initializer is made), so a seeded program starts from TF's weights. On a cluster every worker then starts from the
chief's values anyway."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from . import random
from .registry import lookup
from .saving.serialization import deserialize_keras_object, serialize_keras_object

__all__ = ["get", "serialize", "deserialize", "Initializer", "Zeros", "Ones", "Constant", "Identity", "RandomNormal", "RandomUniform",
           "TruncatedNormal", "VarianceScaling", "GlorotUniform", "GlorotNormal", "HeNormal", "HeUniform",
           "LecunNormal", "LecunUniform"]


class Initializer(ABC):
    @abstractmethod
    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        """Implemented by subclasses."""

    def get_config(self) -> dict[str, Any]:
        """Keras' config (none for an initializer without arguments)."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Initializer":
        return cls(**config)


class RandomInitializer(Initializer):
    """An initializer that draws: ``seed`` an int or a ``SeedGenerator``; None takes a default seed now."""

    def __init__(self, seed: Any = None) -> None:
        self._init_seed = seed
        if seed is None:
            seed = random.make_default_seed()
        elif not isinstance(seed, (int, random.SeedGenerator)) or isinstance(seed, bool):
            raise ValueError("`seed` argument should be an instance of `keras.random.SeedGenerator()` or an integer. "
                             f"Received: seed={seed}")
        self.seed = seed

    def get_config(self) -> dict[str, Any]:
        return {"seed": self._init_seed if isinstance(self._init_seed, int) else None}


class RandomNormal(RandomInitializer):
    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: Any = None) -> None:
        self.mean, self.stddev = mean, stddev
        super().__init__(seed)

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        return random.normal(shape, self.mean, self.stddev, dtype, self.seed)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "mean": self.mean, "stddev": self.stddev}


class TruncatedNormal(RandomInitializer):
    """Normal values redrawn beyond two standard deviations."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: Any = None) -> None:
        self.mean, self.stddev = mean, stddev
        super().__init__(seed)

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        return random.truncated_normal(shape, self.mean, self.stddev, dtype, self.seed)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "mean": self.mean, "stddev": self.stddev}


class RandomUniform(RandomInitializer):
    """Values drawn uniformly from ``[minval, maxval)`` (Keras' "uniform", Embedding's default)."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: Any = None) -> None:
        self.minval, self.maxval = minval, maxval
        super().__init__(seed)

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        return random.uniform(shape, self.minval, self.maxval, dtype, self.seed)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "minval": self.minval, "maxval": self.maxval}


def compute_fans(shape: tuple[int, ...], input_axes: Any = None, output_axes: Any = None) -> tuple[int, int]:
    """Keras' fan-in and fan-out of a weight shape (the last two axes, times the receptive field before them)."""
    if input_axes is not None and output_axes is not None:
        return math.prod(shape[a] for a in input_axes), math.prod(shape[a] for a in output_axes)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(RandomInitializer):
    """Values whose variance is ``scale`` over the fan (in, out or their average): uniform, truncated normal (the
    default; "normal" means it too) or untruncated normal."""

    _MODES = ("fan_in", "fan_out", "fan_avg")
    _DISTRIBUTIONS = ("uniform", "truncated_normal", "untruncated_normal")

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal",
                 seed: Any = None, input_axes: Any = None, output_axes: Any = None) -> None:
        if scale <= 0.0:
            raise ValueError(f"Argument `scale` must be positive float. Received: scale={scale}")
        if mode not in self._MODES:
            raise ValueError(f"Invalid `mode` argument: {mode}. Please use one of {set(self._MODES)}")
        distribution = distribution.lower()
        distribution = "truncated_normal" if distribution == "normal" else distribution
        if distribution not in self._DISTRIBUTIONS:
            raise ValueError(f"Invalid `distribution` argument: {distribution}.Please use one of "
                             f"{set(self._DISTRIBUTIONS)}")
        self.scale, self.mode, self.distribution = scale, mode, distribution
        self.input_axes, self.output_axes = input_axes, output_axes
        super().__init__(seed)

    def get_config(self) -> dict[str, Any]:
        """Keras' config (a named subclass, Glorot or He say, leaves out the scale, mode and distribution it fixes)."""
        fixed = {} if type(self).__init__ is not VarianceScaling.__init__ else \
            {"scale": self.scale, "mode": self.mode, "distribution": self.distribution}
        return {**super().get_config(), **fixed, "input_axes": self.input_axes, "output_axes": self.output_axes}

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        fan_in, fan_out = compute_fans(tuple(shape), self.input_axes, self.output_axes)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, fan)
        if self.distribution == "truncated_normal":
            return random.truncated_normal(shape, 0.0, math.sqrt(scale) / 0.87962566103423978, dtype, self.seed)
        if self.distribution == "untruncated_normal":
            return random.normal(shape, 0.0, math.sqrt(scale), dtype, self.seed)
        limit = math.sqrt(3.0 * scale)
        return random.uniform(shape, -limit, limit, dtype, self.seed)


def _variance_scaling(name: str, scale: float, mode: str, distribution: str, doc: str) -> type:
    """One of Keras' named VarianceScaling initializers (Glorot, He, LeCun; uniform or normal)."""
    def __init__(self: VarianceScaling, seed: Any = None, input_axes: Any = None, output_axes: Any = None) -> None:
        VarianceScaling.__init__(self, scale, mode, distribution, seed, input_axes, output_axes)
    return type(name, (VarianceScaling,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})


# Keras' named variance-scaling initializers: (scale, mode, distribution, what they draw), in the order unpacked below
_NAMED = {
    "GlorotUniform": (1.0, "fan_avg", "uniform", "Uniform in [-limit, limit], limit = sqrt(6 / (fan_in + fan_out))."),
    "GlorotNormal": (1.0, "fan_avg", "truncated_normal", "Truncated normal, stddev = sqrt(2 / (fan_in + fan_out))."),
    "LecunNormal": (1.0, "fan_in", "truncated_normal", "Truncated normal, stddev = sqrt(1 / fan_in)."),
    "LecunUniform": (1.0, "fan_in", "uniform", "Uniform in [-limit, limit], limit = sqrt(3 / fan_in)."),
    "HeNormal": (2.0, "fan_in", "truncated_normal", "Truncated normal, stddev = sqrt(2 / fan_in)."),
    "HeUniform": (2.0, "fan_in", "uniform", "Uniform in [-limit, limit], limit = sqrt(6 / fan_in)."),
}
GlorotUniform, GlorotNormal, LecunNormal, LecunUniform, HeNormal, HeUniform = (
    _variance_scaling(name, *spec) for name, spec in _NAMED.items())


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

    def get_config(self) -> dict[str, Any]:
        return {"value": np.asarray(self.value).tolist()}

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


_BY_NAME = {"zeros": Zeros, "zero": Zeros, "ones": Ones, "one": Ones, "constant": Constant, "identity": Identity,
            "random_normal": RandomNormal, "normal": RandomNormal, "random_uniform": RandomUniform,
            "uniform": RandomUniform, "truncated_normal": TruncatedNormal, "variance_scaling": VarianceScaling,
            "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal, "he_normal": HeNormal,
            "he_uniform": HeUniform, "lecun_normal": LecunNormal, "lecun_uniform": LecunUniform}


def get(identifier: str | dict | Initializer) -> Initializer:
    """An initializer from its name, class, config or itself."""
    return lookup(identifier, Initializer, _BY_NAME, "initializer")


def serialize(initializer: Initializer) -> dict[str, Any]:
    return serialize_keras_object(initializer)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Initializer:
    return deserialize_keras_object({"module": "keras.initializers", **config}, custom_objects)
