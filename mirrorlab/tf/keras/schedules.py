"""``keras.optimizers.schedules``: learning rates as functions of the optimizer's step, computed in float32 as Keras 3
computes them; pass one as an optimizer's ``learning_rate``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._kernels import portable_math

__all__ = ["CosineDecay", "ExponentialDecay", "InverseTimeDecay", "LearningRateSchedule", "PiecewiseConstantDecay",
           "PolynomialDecay"]

_F = np.float32


class LearningRateSchedule:
    """A learning rate that depends on the step: subclasses define ``__call__(step)``; ``_config_keys`` name the
    constructor arguments Keras' config holds (kept as attributes of the same names)."""

    _config_keys: tuple[str, ...] = ()

    def get_config(self) -> dict[str, Any]:
        if not self._config_keys and type(self).get_config is LearningRateSchedule.get_config:
            raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override `get_config()` "
                                      "in order to be serializable.")
        return {key: getattr(self, key) for key in self._config_keys}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "LearningRateSchedule":
        return cls(**config)

    def __call__(self, step: Any) -> Any:
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override `__call__(self, "
                                  "step)`.")


class _RateOverSteps(LearningRateSchedule):
    """A schedule of ``initial_learning_rate``, ``decay_rate`` per ``decay_steps``, and ``staircase``."""

    _config_keys = ("initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name")

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool,
                 name: str) -> None:
        self.initial_learning_rate, self.decay_steps, self.decay_rate = initial_learning_rate, decay_steps, decay_rate
        self.staircase, self.name = staircase, name

    def _progress(self, step: Any) -> Any:
        """``step / decay_steps`` in float32, floored with ``staircase``."""
        p = _F(step) / _F(self.decay_steps)
        return np.floor(p) if self.staircase else p


class ExponentialDecay(_RateOverSteps):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)`` (the exponent floored with ``staircase``)."""

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False,
                 name: str = "ExponentialDecay") -> None:
        if decay_steps <= 0:
            raise ValueError(f"Argument `decay_steps` must be > 0. Received: decay_steps={decay_steps}")
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step: Any) -> Any:
        return _F(self.initial_learning_rate) * portable_math.power(_F(self.decay_rate), self._progress(step), dtype=_F)


class InverseTimeDecay(_RateOverSteps):
    """``initial_learning_rate / (1 + decay_rate * step / decay_steps)`` (floored with ``staircase``)."""

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False,
                 name: str = "InverseTimeDecay") -> None:
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def __call__(self, step: Any) -> Any:
        return _F(self.initial_learning_rate) / (_F(1) + _F(self.decay_rate) * self._progress(step))


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[i]`` for steps up to and including ``boundaries[i]``, ``values[-1]`` after the last boundary."""

    _config_keys = ("boundaries", "values", "name")

    def __init__(self, boundaries: Sequence[Any], values: Sequence[Any], name: str = "PiecewiseConstant") -> None:
        if len(boundaries) != len(values) - 1:
            raise ValueError("The length of boundaries should be 1 less than the length of values. Received: "
                             f"boundaries={boundaries} of length {len(boundaries)}, and values={values} of length "
                             f"{len(values)}.")
        self.boundaries, self.values, self.name = list(boundaries), list(values), name

    def __call__(self, step: Any) -> Any:
        for boundary, value in zip(self.boundaries, self.values):
            if step <= boundary:
                return _F(value)
        return _F(self.values[-1])


class PolynomialDecay(LearningRateSchedule):
    """From ``initial_learning_rate`` to ``end_learning_rate`` over ``decay_steps`` along ``(1 - t) ** power``
    (restarting every ``decay_steps`` with ``cycle``)."""

    _config_keys = ("initial_learning_rate", "decay_steps", "end_learning_rate", "power", "cycle", "name")

    def __init__(self, initial_learning_rate: float, decay_steps: int, end_learning_rate: float = 0.0001,
                 power: float = 1.0, cycle: bool = False, name: str = "PolynomialDecay") -> None:
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.end_learning_rate, self.power, self.cycle, self.name = end_learning_rate, power, cycle, name

    def __call__(self, step: Any) -> Any:
        steps, decay = _F(step), _F(self.decay_steps)
        if self.cycle:
            multiplier = _F(1) if steps == 0 else _F(math.ceil(steps / decay))
            decay = decay * multiplier
        else:
            steps = min(steps, decay)
        fraction = portable_math.power(_F(1) - steps / decay, _F(self.power), dtype=_F)
        start, end = _F(self.initial_learning_rate), _F(self.end_learning_rate)
        return (start - end) * fraction + end


class CosineDecay(LearningRateSchedule):
    """A cosine from ``initial_learning_rate`` down to ``alpha`` times it over ``decay_steps`` (after a linear
    warmup to ``warmup_target`` over ``warmup_steps`` when given)."""

    _config_keys = ("initial_learning_rate", "decay_steps", "alpha", "name", "warmup_target", "warmup_steps")

    def __init__(self, initial_learning_rate: float, decay_steps: int, alpha: float = 0.0, name: str = "CosineDecay",
                 warmup_target: float | None = None, warmup_steps: int = 0) -> None:
        self.initial_learning_rate, self.decay_steps, self.alpha = initial_learning_rate, decay_steps, alpha
        self.name, self.warmup_target, self.warmup_steps = name, warmup_target, warmup_steps

    def __call__(self, step: Any) -> Any:
        start = _F(self.initial_learning_rate)
        if self.warmup_target is not None and step < self.warmup_steps:
            return start + (_F(self.warmup_target) - start) * (_F(step) / _F(self.warmup_steps))
        top = start if self.warmup_target is None else _F(self.warmup_target)
        done = min(_F(step) - _F(self.warmup_steps if self.warmup_target is not None else 0), _F(self.decay_steps))
        cosine = _F(0.5) * (_F(1) + portable_math.cos(_F(math.pi) * done / _F(self.decay_steps), dtype=_F))
        return top * ((_F(1) - _F(self.alpha)) * cosine + _F(self.alpha))
