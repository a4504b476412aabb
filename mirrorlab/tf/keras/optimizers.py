"""SGD and Adam whose state (iterations, slots) are mirrored variables, updated once per step.

In a replica function ``apply_gradients`` all-reduces (SUM) the gradients over every replica, then a
``merge_call`` applies the update once in cross-replica context, as TF's optimizers do under a strategy.
Sparse gradients (``IndexedSlices``, an Embedding's) stay sparse where Keras' ops keep them so: clipping works on
their values, the all-reduce concatenates the replicas' rows, an update by the gradient alone subtracts row by row
(``scatter_sub``), and an update mixing it with dense slots densifies what Keras densifies (Adam's square of the
gradient is the sum of the rows' squares).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...aggregation import ReduceOp, VariableAggregation
from ..clip_ops import clip_by_norm
from ...distribute import context
from ...distribute.batch_safe import stacked_replicas
from ...distribute.values import ReplicaValues
from ...distribute.variables import Variable
from ..indexed_slices import dense, map_values
from .._kernels.summation import tf_sum
from ...tensor import IndexedSlices, asarray, like
from ...train.checkpoint import restore_on_create

from . import schedules  # keras.optimizers.schedules
from .naming import auto_name, mark_keras_weight
from .registry import lookup, take_fixed_arguments
from .saving.serialization import deserialize_keras_object, serialize_keras_object

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "get", "serialize", "deserialize", "schedules"]


def _strategy_of(var: Any) -> Any:
    """The strategy a variable was created under (None for a single-copy variable)."""
    return getattr(var, "distribute_strategy", None)


class Optimizer(ABC):
    """Base optimizer as Keras 3's: ``iterations`` and the learning rate are variables made at construction (in
    the active strategy scope); slots are made on the first ``apply_gradients``; gradients are clipped per
    replica, summed over replicas, then weight decay and the update run once in cross-replica context."""

    slot_names: tuple[str, ...] = ()
    extra_slot_names: tuple[str, ...] = ()  # made after the interleaved ones (Adam's amsgrad velocity_hat)

    # Keras arguments mirrorlab takes only at their defaults (no loss scaling or gradient accumulation)
    _fixed_arguments = {"loss_scale_factor": (None,), "gradient_accumulation_steps": (None,)}

    def __init__(self, learning_rate: Any = 0.001, weight_decay: float | None = None, clipnorm: float | None = None,
                 clipvalue: float | None = None, global_clipnorm: float | None = None, use_ema: bool = False,
                 ema_momentum: float = 0.99, ema_overwrite_frequency: int | None = None, name: str | None = None,
                 **kwargs: Any) -> None:
        take_fixed_arguments(type(self).__name__, kwargs, self._fixed_arguments)
        if kwargs:
            raise TypeError(f"Argument(s) not recognized: {kwargs}")
        if use_ema:  # Keras' checks
            if ema_momentum > 1 or ema_momentum < 0:
                raise ValueError(f"`ema_momentum` must be in the range [0, 1]. Received: ema_momentum={ema_momentum}")
            if ema_overwrite_frequency and (not isinstance(ema_overwrite_frequency, int)
                                            or ema_overwrite_frequency < 1):
                raise ValueError("`ema_overwrite_frequency` must be an integer >= 1 or None. Received: "
                                 f"ema_overwrite_frequency={ema_overwrite_frequency}")
        self.use_ema, self.ema_momentum, self.ema_overwrite_frequency = use_ema, ema_momentum, ema_overwrite_frequency
        clips = {"clipnorm": clipnorm, "clipvalue": clipvalue, "global_clipnorm": global_clipnorm}
        if sum(value is not None for value in clips.values()) > 1:
            raise ValueError("Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. Received: "
                             + ", ".join(f"{key}={value}" for key, value in clips.items()))
        self.name = name or auto_name(type(self).__name__)
        self.weight_decay, self.clipnorm, self.clipvalue, self.global_clipnorm = \
            weight_decay, clipnorm, clipvalue, global_clipnorm
        self.iterations = Variable(np.int64(0), name=f"{self.name}/iteration", trainable=False,
                                   aggregation=VariableAggregation.ONLY_FIRST_REPLICA)
        self.iterations._keras_path = f"{self.name}/iteration"
        if not callable(learning_rate) and not isinstance(learning_rate, (int, float, np.number, np.ndarray)):
            raise ValueError("Argument `learning_rate` should be float, or an instance of LearningRateSchedule, or a "
                             "callable (that takes in the current iteration value and returns the corresponding "
                             f"learning rate value). Received instead: learning_rate={learning_rate}")
        self._schedule = learning_rate if callable(learning_rate) else None
        self._learning_rate = None if self._schedule else Variable(
            np.float32(learning_rate), name=f"{self.name}/learning_rate", trainable=False,
            aggregation=VariableAggregation.ONLY_FIRST_REPLICA)
        if self._learning_rate is not None:
            self._learning_rate._keras_path = f"{self.name}/learning_rate"
        self.built = False
        self._averages: list[Variable] = []
        self._slots: dict[str, list[Variable]] = {}
        self._index: dict[int, int] = {}
        self._var_list: list[Variable] = []

    @property
    def learning_rate(self) -> Any:
        """The learning-rate variable, or the schedule's value at the current iteration."""
        if self._schedule is not None:
            return np.float32(self._schedule(int(self.iterations.numpy())))
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        if self._schedule is not None:
            raise TypeError("This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` "
                            "constructor argument, hence its learning rate is not settable.")
        self._learning_rate.assign(np.float32(value))

    def build(self, var_list: Iterable[Variable]) -> None:
        """Create one zero slot per variable per slot name (in the variables' strategy scope)."""
        var_list = list(var_list)
        for var in var_list:
            self._check_strategy(var)
        self._index = {id(v): i for i, v in enumerate(var_list)}
        self._var_list = var_list

        def zeros(v: Variable, slot: str) -> Variable:  # named as Keras 3's: sgd/dense_kernel_momentum
            weight = v.name.removesuffix(":0").replace("/", "_")
            var = Variable(like(np.zeros(v.shape, v.dtype), v._read()), name=f"{self.name}/{weight}_{slot}",
                           trainable=False)
            return mark_keras_weight(var, f"{self.name}/{weight}_{slot}")
        self._averages = [zeros(v, "average") for v in var_list] if self.use_ema else []  # (made first, as Keras')
        for slot in (*self.slot_names, *self.extra_slot_names):
            self._slots[slot] = [zeros(v, slot) for v in var_list]
        self.built = True
        restore_on_create(self)  # slot values a checkpoint read before the slots existed

    def _check_strategy(self, var: Variable) -> None:
        """TF's errors for an optimizer and variables of different strategies."""
        strategy = _strategy_of(var)
        if strategy is None:
            return
        mine = _strategy_of(self.iterations)
        if mine is not strategy:
            raise RuntimeError(f"Mixing different tf.distribute.Strategy objects: {strategy!r} is not "
                               f"{mine or context.get_strategy()!r}\nFix: create the optimizer inside `with "
                               "strategy.scope()` of the strategy its variables belong to.")
        if (self.slot_names or self.extra_slot_names) and context.get_strategy() is not strategy:
            raise RuntimeError(f'Need to be inside "with strategy.scope()" for {strategy!r}\nFix: the first '
                               "apply_gradients creates the optimizer's slots: call it in the strategy's scope "
                               "or in strategy.run.")

    def get_config(self) -> dict[str, Any]:
        """Keras' config: the name, the learning rate's current value (float32) or its schedule, weight decay and
        clipping, Keras' fixed defaults, then the subclass's arguments (``_config_keys``)."""
        rate = serialize_keras_object(self._schedule) if self._schedule is not None else \
            float(np.float32(self._learning_rate.numpy()))
        return {"name": self.name, "learning_rate": rate, "weight_decay": self.weight_decay, "clipnorm": self.clipnorm,
                "global_clipnorm": self.global_clipnorm, "clipvalue": self.clipvalue, "use_ema": self.use_ema,
                "ema_momentum": self.ema_momentum, "ema_overwrite_frequency": self.ema_overwrite_frequency,
                **{key: accepted[0] for key, accepted in self._fixed_arguments.items()},
                **{key: getattr(self, key) for key in self._config_keys}}

    _config_keys: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> "Optimizer":
        """The optimizer of a ``get_config`` dict (a schedule from its config)."""
        config = dict(config)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = deserialize_keras_object(config["learning_rate"], custom_objects)
        return cls(**config)

    @property
    def variables(self) -> list[Variable]:
        """Keras' order: ``iterations``, the learning rate, the moving averages (``use_ema``), each variable's slots
        in turn, then extra slots."""
        own = [self.iterations] + ([self._learning_rate] if self._learning_rate is not None else [])
        if not self.built:
            return own
        interleaved = [self._slots[slot][i] for i in range(len(self._index)) for slot in self.slot_names]
        return own + self._averages + interleaved + [v for slot in self.extra_slot_names for v in self._slots[slot]]

    def _checkpoint_children(self) -> dict[str, Any]:
        """Keras 3's object graph (so checkpoint keys match TF's): ``_variables`` (this optimizer's), then
        ``_trainable_variables`` (those it updates), ``_iterations`` and ``_learning_rate``."""
        children: dict[str, Any] = {"_variables": self.variables, "_trainable_variables": self._var_list,
                                    "_iterations": self.iterations}
        if self._learning_rate is not None:
            children["_learning_rate"] = self._learning_rate
        return children

    def _lr(self) -> float:
        return float(np.asarray(self.learning_rate))

    def _clip(self, grads: list[Any]) -> list[Any]:
        """Keras' clipping (one of clipnorm, global_clipnorm, clipvalue), applied to each replica's gradients."""
        if self.clipnorm and self.clipnorm > 0:  # Keras clips each gradient with tf.clip_by_norm
            return [clip_by_norm(g, g.dtype.type(self.clipnorm)) for g in grads]
        if self.global_clipnorm and self.global_clipnorm > 0:  # Keras' clip_by_global_norm, in float32 as there
            norm = np.sqrt(tf_sum(np.stack([tf_sum(np.square(_values(g))) for g in grads])))
            clip = norm.dtype.type(self.global_clipnorm)
            scale = clip * np.minimum(norm.dtype.type(1.0) / norm, norm.dtype.type(1.0 / self.global_clipnorm))
            return [dense(g) * (scale + (norm - norm)) for g in grads]  # (Keras' product densifies IndexedSlices)
        if self.clipvalue and self.clipvalue > 0:
            return [map_values(g, lambda v: np.clip(v, -self.clipvalue, self.clipvalue)) for g in grads]
        return grads

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Variable]]) -> Any:
        """Apply one step; in a replica function the gradients are first summed over all replicas."""
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.\nFix: compute the loss inside the `with "
                             "GradientTape()` block from the model's outputs, and keep it a tensor (NumPy functions, "
                             "float() and .numpy() cut it off from the variables).")
        variables = [v for _, v in pairs]
        if (self.clipnorm or self.global_clipnorm) and stacked_replicas() is not None:
            raise NotImplementedError(f"optimizer {self.name!r} clips by norm (clipnorm={self.clipnorm}, "
                                      f"global_clipnorm={self.global_clipnorm}): in a @batch_safe function run stacked "
                                      "the norm would span all local replicas.\nFix: clip by value, or remove "
                                      "@batch_safe (the function then runs once per replica).")
        grads = self._clip([_cast(g, v.dtype) if not isinstance(g, ReplicaValues) else g for g, v in pairs])
        frame = context.current_frame()
        if frame is None or frame.replica is None:
            self._apply(grads, variables)
            return self.iterations
        ctx = frame.replica
        grads = ctx.all_reduce(ReduceOp.SUM, grads)
        ctx.merge_call(lambda strategy, g: self._apply(g, variables), args=(grads,))
        return self.iterations

    def apply(self, grads: list[Any], trainable_variables: list[Variable] | None = None) -> Any:
        """Keras 3's ``apply``: ``apply_gradients`` of the gradients paired with the variables (by default those of
        the optimizer's build)."""
        if trainable_variables is None:
            if not self.built:
                raise ValueError("When passing `grads` without `variables`, the optimizer must already be built on a "
                                 "list of variables. Call `optimizer.build(trainable_variables)` first.")
            trainable_variables = self._var_list
        return self.apply_gradients(zip(grads, trainable_variables))

    def _apply(self, grads: list[Any], variables: list[Variable]) -> None:
        if not self.built:
            self.build(variables)
        lr = self._lr()
        step = int(self.iterations.numpy()) + 1
        for var in variables:
            if id(var) not in self._index:
                raise KeyError(f"{var.name} was not passed to this optimizer's first apply_gradients/build; an "
                               "optimizer serves one fixed list of variables.")
        self._decay(variables, lr)
        for g, var in zip(grads, variables):
            if isinstance(g, ReplicaValues):
                g = g.values[0]  # identical on every replica after the all-reduce
            slots = {s: self._slots[s][self._index[id(var)]] for s in (*self.slot_names, *self.extra_slot_names)}
            self._update(var, _cast(g, var.dtype), slots, lr, step)
        if self.use_ema:
            self._update_moving_averages()
            if self.ema_overwrite_frequency and (step % self.ema_overwrite_frequency == 0):
                self.finalize_variable_values(self._var_list)
        self.iterations.assign_add(np.int64(1))

    def _decay(self, variables: list[Variable], lr: float) -> None:
        """Keras' decoupled weight decay, before the update: ``var - var * weight_decay * learning_rate``."""
        if self.weight_decay is not None:
            for var in variables:
                var.assign_sub(var._read() * var.dtype.type(self.weight_decay) * var.dtype.type(lr))

    def _step_without_data(self, variables: list[Variable]) -> None:
        """What TF's traced train step still runs when its iterator has no batch left: the ops of ``apply`` that do
        not wait for the data (the weight decay and the step count; the update itself fails with the batch)."""
        if not self.built:
            self.build(variables)
        self._decay(self._var_list, self._lr())
        self.iterations.assign_add(np.int64(1))

    def _update_moving_averages(self) -> None:
        """Keras' EMA of every variable of the build, in its dtype: the first step copies the variable, later ones
        keep ``ema_momentum`` of the average."""
        first = int(self.iterations.numpy()) == 0
        for var, average in zip(self._var_list, self._averages):
            momentum = var.dtype.type(0.0 if first else 1.0) * var.dtype.type(self.ema_momentum)
            average.assign(momentum * average._read() + (var.dtype.type(1) - momentum) * var._read())

    def finalize_variable_values(self, var_list: list[Variable]) -> None:
        """Keras' end of ``fit``: with ``use_ema`` the model's variables take their moving averages."""
        if not self.use_ema:
            return
        if not self.built:  # no step ever ran (TF's moving averages are made by the build)
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '_model_variables_moving_average'"
                                 "\nFix: fit at least one step (epochs > initial_epoch, with data) before the end of "
                                 "fit copies the moving averages into the model.")
        var_list = list(var_list)
        if len(var_list) != len(self._averages):
            raise ValueError(f"The length of model variables ({len(var_list)}) to override does not match the length "
                             f"of model variables stored in the optimizer ({len(self._averages)}). Please check if "
                             "the optimizer was called on your model.")
        for var, average in zip(var_list, self._averages):
            var.assign(average._read())

    @abstractmethod
    def _update(self, var: Variable, grad: Any, slots: dict[str, Variable], lr: float, step: int) -> None:
        """Implemented by subclasses (``grad`` an array or IndexedSlices)."""


def _cast(grad: Any, dtype: np.dtype) -> Any:
    """A gradient in the variable's dtype (IndexedSlices keep their form: Keras casts their values)."""
    return map_values(grad, lambda values: asarray(values, dtype))


def _values(grad: Any) -> Any:
    """The numbers a gradient holds: an array, or the rows of IndexedSlices (repeated indices counted apart)."""
    return grad.values if isinstance(grad, IndexedSlices) else grad


def _scaled(grad: Any, factor: Any) -> Any:
    """``factor * grad`` as a dense array (Keras scales IndexedSlices' values; the sum with a dense slot densifies)."""
    return dense(map_values(grad, lambda values: factor * values))


def _subtract(var: Variable, delta: Any) -> None:
    """Keras' ``assign_sub``: IndexedSlices subtract row by row (``scatter_sub``), arrays at once."""
    if isinstance(delta, IndexedSlices):
        var.scatter_sub(delta)
    else:
        var.assign_sub(delta)


class SGD(Optimizer):
    """Gradient descent with optional (Nesterov) momentum."""

    _config_keys = ("momentum", "nesterov")

    def __init__(self, learning_rate: Any = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 name: str | None = None, **kwargs: Any) -> None:
        if not 0 <= momentum <= 1:
            raise ValueError("`momentum` must be a float between [0, 1].")
        self.momentum = float(momentum)
        self.nesterov = nesterov
        self.slot_names = ("momentum",) if self.momentum else ()
        super().__init__(learning_rate, name=name, **kwargs)

    def _update(self, var: Variable, grad: Any, slots: dict[str, Variable], lr: float, step: int) -> None:
        if not self.momentum:
            _subtract(var, map_values(grad, lambda values: values * var.dtype.type(lr)))
            return
        m, step_size = slots["momentum"], _scaled(grad, lr)
        m.assign(self.momentum * m._read() - step_size)
        var.assign_add(self.momentum * m._read() - step_size if self.nesterov else m._read())


class Adam(Optimizer):
    """Adam (Kingma & Ba) with Keras 3's update formulas, optionally AMSGrad."""

    slot_names = ("momentum", "velocity")
    _config_keys = ("beta_1", "beta_2", "epsilon", "amsgrad")

    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, amsgrad: bool = False, name: str | None = None, **kwargs: Any) -> None:
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self.amsgrad = amsgrad
        self.extra_slot_names = ("velocity_hat",) if amsgrad else ()
        super().__init__(learning_rate, name=name, **kwargs)

    def _update(self, var: Variable, grad: Any, slots: dict[str, Variable], lr: float, step: int) -> None:
        m, v = slots["momentum"], slots["velocity"]
        one, t = np.float32(1), np.float32(step)  # Keras computes the bias correction in float32
        alpha = np.float32(lr) * np.sqrt(one - np.float32(self.beta_2) ** t) / (one - np.float32(self.beta_1) ** t)
        m.assign_add((dense(grad) - m._read()) * (1 - self.beta_1))
        v.assign_add((dense(map_values(grad, np.square)) - v._read()) * (1 - self.beta_2))
        velocity = v._read()
        if self.amsgrad:
            v_hat = slots["velocity_hat"]
            v_hat.assign(np.maximum(v_hat._read(), velocity))
            velocity = v_hat._read()
        var.assign_sub((m._read() * alpha) / (np.sqrt(velocity) + self.epsilon))


class RMSprop(Optimizer):
    """RMSprop with Keras 3's update formulas (optional momentum and centering)."""

    _config_keys = ("rho", "momentum", "epsilon", "centered")

    slot_names = ("velocity",)

    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.9, momentum: float = 0.0, epsilon: float = 1e-7,
                 centered: bool = False, name: str | None = None, **kwargs: Any) -> None:
        self.rho, self.momentum, self.epsilon, self.centered = float(rho), float(momentum), float(epsilon), centered
        self.extra_slot_names = (("momentum",) if self.momentum > 0 else ()) + \
            (("average_gradient",) if centered else ())
        super().__init__(learning_rate, name=name, **kwargs)

    def _update(self, var: Variable, grad: Any, slots: dict[str, Variable], lr: float, step: int) -> None:
        velocity = slots["velocity"]
        squared = map_values(grad, np.square)  # as Keras: square first
        velocity.assign(self.rho * velocity._read() + _scaled(squared, 1 - self.rho))
        if self.centered:
            average = slots["average_gradient"]
            average.assign(self.rho * average._read() + _scaled(grad, 1 - self.rho))
            denominator = velocity._read() - average._read() * average._read() + self.epsilon
        else:
            denominator = velocity._read() + self.epsilon
        root = np.sqrt(denominator)
        rate = var.dtype.type(lr)
        increment = IndexedSlices(rate * grad.values / root[grad.indices], grad.indices, grad.dense_shape) \
            if isinstance(grad, IndexedSlices) else rate * grad / root  # (Keras divides the rows by theirs)
        if self.momentum > 0:
            momentum = slots["momentum"]
            momentum.assign(self.momentum * momentum._read() + dense(increment))
            var.assign_sub(momentum._read())
        else:
            _subtract(var, increment)


class AdamW(Adam):
    """Keras 3's AdamW: Adam with decoupled weight decay, whose ``weight_decay`` defaults to 0.004 and must be set."""

    def __init__(self, learning_rate: Any = 0.001, weight_decay: float | None = 0.004, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7, amsgrad: bool = False, name: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate, beta_1, beta_2, epsilon, amsgrad, name=name, weight_decay=weight_decay,
                         **kwargs)
        if weight_decay is None:  # (checked after the name is taken, as Keras does)
            raise ValueError(f"Argument `weight_decay` must be a float. Received: weight_decay={weight_decay}")


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}


def get(identifier: str | dict | Optimizer) -> Optimizer:
    """An optimizer from its name, class, config or itself."""
    return lookup(identifier, Optimizer, _BY_NAME, "optimizer")


def serialize(optimizer: Optimizer) -> dict[str, Any]:
    return serialize_keras_object(optimizer)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Optimizer:
    return deserialize_keras_object({"module": "keras.optimizers", **config}, custom_objects)
