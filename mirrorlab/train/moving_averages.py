"""``tf.train.ExponentialMovingAverage``: shadow variables that follow variables with an exponential decay, as TF
2.21 updates them (``avg -= (avg - var) * (1 - decay)``, the decay a float32 and cast to the variable's dtype).

A shadow starts from its variable's current value and is made where the variable lives: a distributed
variable's shadow is a mirrored variable of the same strategy. ``apply`` in a replica function updates through
``merge_call`` with the replicas' mean of the variable; in cross-replica context each local copy follows its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from ..aggregation import ReduceOp
from ..distribute import context
from ..distribute.distributed_variables import DistributedVariable
from ..distribute.variables import Variable

__all__ = ["ExponentialMovingAverage"]

_FLOATS = ("float16", "float32", "float64")


class ExponentialMovingAverage:
    """Moving averages of variables: ``apply(var_list)`` makes (first time) and updates the shadows,
    ``average(var)`` returns one."""

    def __init__(self, decay: Any, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage") -> None:
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias  # (TF applies it only to tensors, which eager execution refuses)
        self._name = name
        self._averages: dict[int, tuple[Variable, Variable]] = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list: Sequence[Variable] | None = None) -> None:
        """Create the missing shadows (from each variable's current value), then move every shadow towards its
        variable."""
        var_list = list(var_list or [])
        for var in var_list:
            if not isinstance(var, Variable):
                raise TypeError("tf.train.ExponentialMovingAverage does not support non-Variable tensors when eager "
                                "execution is enabled.\nFix: pass variables (tf.Variable), e.g. "
                                "model.trainable_variables.")
        for var in var_list:
            if var.dtype.name not in _FLOATS:
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            if id(var) not in self._averages:
                self._averages[id(var)] = (var, self._shadow(var))
        decay = np.float32(np.asarray(self._decay))
        if self._num_updates is not None:
            steps = np.float32(np.asarray(self._num_updates))
            decay = np.minimum(decay, (np.float32(1.0) + steps) / (np.float32(10.0) + steps))
        for var in var_list:
            _assign_moving_average(self._averages[id(var)][1], var, np.float32(1.0) - decay)

    def _shadow(self, var: Variable) -> Variable:
        """A non-trainable copy of ``var``'s current value, named ``<var>/<name>``, where ``var`` lives."""
        strategy = var._strategy if isinstance(var, DistributedVariable) else None
        frame = context.current_frame()
        outside = strategy is not None and (frame is None or frame.strategy is not strategy)
        with strategy.scope() if outside else nullcontext():
            return Variable(np.asarray(var.read_value()), trainable=False,
                            name=f"{var.name.removesuffix(':0')}/{self._name}")

    def average(self, var: Variable) -> Variable | None:
        """The shadow of ``var``, or None before ``apply`` saw it."""
        entry = self._averages.get(id(var))
        return None if entry is None else entry[1]

    def average_name(self, var: Variable) -> str:
        """TF1's restore name of ``var``'s shadow: ``<var name>/<name>``."""
        shadow = self.average(var)
        if shadow is not None:
            return shadow.name.removesuffix(":0")
        return f"{var.name.removesuffix(':0')}/{self._name}"


def _assign_moving_average(average: Variable, var: Variable, decay: np.float32) -> None:
    """TF's ``assign_moving_average`` without zero-debiasing: in a replica function through ``merge_call`` with the
    replicas' mean of ``var``; in cross-replica context copy by copy; otherwise on the variables themselves."""
    def update(shadow: Any, value: Any) -> Any:
        step = decay.astype(shadow.dtype)
        return shadow.assign_sub((np.asarray(shadow.read_value()) - np.asarray(value)) * step)

    frame = context.current_frame()
    if frame is not None and frame.replica is not None:
        frame.replica.merge_call(lambda strategy, v: strategy.extended.update(
            average, update, args=(strategy.extended.reduce_to(ReduceOp.MEAN, v, average),)), args=(var,))
    elif isinstance(average, DistributedVariable):
        if frame is None or frame.strategy is not average._strategy:
            raise TypeError(f"ExponentialMovingAverage.apply of {var.name} outside its strategy's scope: TF's "
                            "default replica context cannot update a distributed variable (TypeError: tuple indices "
                            "must be integers or slices).\nFix: call apply inside `with strategy.scope():` or "
                            "in strategy.run.")
        average._strategy.extended.update(average, update, args=(var,))
    else:
        update(average, var)
