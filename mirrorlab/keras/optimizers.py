"""SGD and Adam whose state (iterations, slots) are mirrored variables, updated once per step.

In a replica function ``apply_gradients`` all-reduces (SUM) the gradients over every replica, then a
``merge_call`` applies the update once in cross-replica context, as TF's optimizers do under a strategy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..aggregation import ReduceOp, VariableAggregation
from ..distribute import context
from ..distribute.values import DistributedValues
from ..distribute.variables import Variable
from ..tensor import asarray, like

from .registry import lookup

__all__ = ["Optimizer", "SGD", "Adam", "get"]


class Optimizer(ABC):
    """Base optimizer: subclasses name their slots and implement ``_update``."""

    slot_names: tuple[str, ...] = ()

    def __init__(self, learning_rate: float = 0.001, name: str | None = None) -> None:
        self.learning_rate = learning_rate
        self.name = name or type(self).__name__.lower()
        self.iterations: Variable | None = None
        self._slots: dict[str, list[Variable]] = {}
        self._index: dict[int, int] = {}

    @property
    def built(self) -> bool:
        return self.iterations is not None

    def build(self, var_list: Iterable[Variable]) -> None:
        """Create ``iterations`` and one zero slot per variable per slot name (in the active strategy scope)."""
        var_list = list(var_list)
        self.iterations = Variable(np.int64(0), name=f"{self.name}/iterations", trainable=False,
                                   aggregation=VariableAggregation.ONLY_FIRST_REPLICA)
        self._index = {id(v): i for i, v in enumerate(var_list)}
        self._slots = {slot: [Variable(like(np.zeros(v.shape, v.dtype), v._read()), name=f"{self.name}/{slot}/{i}", trainable=False)
                              for i, v in enumerate(var_list)] for slot in self.slot_names}

    @property
    def variables(self) -> list[Variable]:
        """The optimizer's state: ``iterations`` then each slot's variables."""
        if self.iterations is None:
            return []
        return [self.iterations, *(v for slot in self.slot_names for v in self._slots[slot])]

    def _checkpoint_children(self) -> dict[str, Any]:
        children: dict[str, Any] = dict(self._slots)
        if self.iterations is not None:
            children["iterations"] = self.iterations
        return children

    def _lr(self) -> float:
        lr = self.learning_rate
        return float(lr(int(self.iterations.numpy()))) if callable(lr) else float(lr)

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Variable]],
                        skip_gradients_aggregation: bool = False) -> Any:
        """Apply one step; in a replica function the gradients are first summed over all replicas."""
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        frame = context.current_frame()
        if frame is None or frame.replica is None:
            self._apply(grads, variables)
            return self.iterations
        ctx = frame.replica
        if not skip_gradients_aggregation:
            grads = ctx.all_reduce(ReduceOp.SUM, grads)
        ctx.merge_call(lambda strategy, g: self._apply(g, variables), args=(grads,))
        return self.iterations

    def _apply(self, grads: list[Any], variables: list[Variable]) -> None:
        if not self.built:
            self.build(variables)
        lr = self._lr()
        step = int(self.iterations.numpy()) + 1
        for g, v in zip(grads, variables):
            if isinstance(g, DistributedValues):
                g = g.values[0]  # identical on every replica after the all-reduce
            if id(v) not in self._index:
                raise KeyError(f"{v.name} was not passed to this optimizer's first apply_gradients/build; an "
                               "optimizer serves one fixed list of variables.")
            self._update(v, asarray(g, v.dtype), {s: self._slots[s][self._index[id(v)]] for s in self.slot_names},
                         lr, step)
        self.iterations.assign_add(np.int64(1))

    @abstractmethod
    def _update(self, var: Variable, grad: Any, slots: dict[str, Variable], lr: float, step: int) -> None:
        """Implemented by subclasses."""


class SGD(Optimizer):
    """Gradient descent with optional (Nesterov) momentum."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 name: str | None = None) -> None:
        super().__init__(learning_rate, name)
        self.momentum = float(momentum)
        self.nesterov = nesterov
        self.slot_names = ("momentum",) if self.momentum else ()

    def _update(self, var: Variable, grad: Any, slots: dict[str, Variable], lr: float, step: int) -> None:
        if not self.momentum:
            var.assign_sub(var.dtype.type(lr) * grad)
            return
        m = slots["momentum"]
        m.assign(self.momentum * m.value() - lr * grad)
        var.assign_add(self.momentum * m.value() - lr * grad if self.nesterov else m.value())


class Adam(Optimizer):
    """Adam (Kingma & Ba) with Keras 3's update formulas."""

    slot_names = ("m", "v")

    def __init__(self, learning_rate: float = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, name: str | None = None) -> None:
        super().__init__(learning_rate, name)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def _update(self, var: Variable, grad: Any, slots: dict[str, Variable], lr: float, step: int) -> None:
        m, v = slots["m"], slots["v"]
        one, t = np.float32(1), np.float32(step)  # Keras computes the bias correction in float32
        alpha = np.float32(lr) * np.sqrt(one - np.float32(self.beta_2) ** t) / (one - np.float32(self.beta_1) ** t)
        m.assign_add((grad - m.value()) * (1 - self.beta_1))
        v.assign_add((grad * grad - v.value()) * (1 - self.beta_2))
        var.assign_sub((m.value() * alpha) / (np.sqrt(v.value()) + self.epsilon))


_BY_NAME = {"sgd": SGD, "adam": Adam}


def get(identifier: str | Optimizer) -> Optimizer:
    return lookup(identifier, Optimizer, _BY_NAME, "optimizer")
