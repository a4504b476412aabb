"""Keras' ``Layer`` (user layers compose others in ``call``) and the built-in layers with explicit forward and
backward passes.

A built-in layer's ``_forward(x, training)`` returns the output and a cache; ``_backward(cache, dy)`` returns the
input gradient and the weight gradients. Caches travel with the call, never on the layer, so replicas that run the
same layer in turn cannot overwrite each other's state.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...distribute.batch_safe import stacked_replicas
from ...distribute.variables import Variable
from .._kernels.summation import tf_sum, tf_sum_each
from ...tensor import array_module, asarray, like
from ..autodiff import recording, track, untracked, watching
from ..name_scope import name_scope
from ...train.checkpoint import restore_on_create
from . import activations, initializers, regularizers
from .random import SeedGenerator, dropout_mask, dropout_scale
from .naming import auto_name, keras_path, keras_path_scope, mark_keras_weight
from .registry import take_fixed_arguments
from .saving.serialization import dtype_policy, serialize_keras_object
from .symbolic import KerasHistory, KerasTensor, Node, is_symbolic, shapes_of, symbolic_call

__all__ = ["Layer", "Lambda", "Add", "Average", "Concatenate", "Maximum", "Minimum", "Multiply", "Subtract", "add", "average",
           "concatenate", "maximum", "minimum", "multiply", "subtract", "Dense", "Conv2D", "Flatten", "Reshape", "Activation", "Dropout", "Input", "InputLayer",
           "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D", "BatchNormalization",
           "LayerNormalization", "Embedding", "Rescaling"]




class Layer:
    """Keras' base layer. ``build`` creates the weights (``add_weight``, in the active strategy's scope, named under
    the layer's name scope); ``call`` computes. A subclass overrides ``call`` with other layers and tensor functions,
    which a recording ``GradientTape`` differentiates; the built-in layers have their own forward and backward passes
    (``BuiltinLayer``). Layers and variables set as attributes are tracked, as Keras tracks them: their weights are this
    layer's (own weights first), and checkpoints save them under the attribute's name (layers held in lists or
    dicts are listed and trained but, as in TF 2.21, not saved by ``tf.train.Checkpoint``)."""

    _names_sublayers = True  # calls open the layer's name scope (built-in layers, which make none, skip it)
    _built_at_init = False  # Keras builds the layer when it is made: its config has no build config
    # Keras arguments mirrorlab takes only at their default (features it does not build): name -> accepted values
    _fixed_arguments: dict[str, tuple] = {"activity_regularizer": (None,), "autocast": (True,)}

    def __new__(cls, *args: Any, **kwargs: Any) -> "Layer":
        """Remember the constructor's arguments (defaults filled in) when they are plain values: Keras' automatic
        config of a subclass that defines no ``get_config``."""
        layer = super().__new__(cls)
        layer.__dict__["_auto_config"] = _plain_arguments(cls, args, kwargs)
        return layer

    def __init__(self, name: str | None = None, input_shape: tuple | None = None, input_dim: int | None = None,
                 dtype: Any = "float32", trainable: bool = True, **kwargs: Any) -> None:
        self._check_fixed_arguments(kwargs)
        if kwargs:
            raise TypeError(f"Unrecognized keyword arguments passed to {type(self).__name__}: {kwargs}")
        if isinstance(dtype, dict):  # a serialized DTypePolicy (from a config)
            dtype = dtype.get("config", {}).get("name", "float32")
        self._layers: list[Layer] = []  # tracked sublayers, in the order they were set
        self._attributes: dict[str, Any] = {}  # attribute name -> layer or variable: the checkpoint's children
        self.name = name or auto_name(type(self).__name__)
        self.dtype = np.dtype(dtype)
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        self._input_shape_arg = None if input_shape is None else tuple(input_shape)  # (Keras' name)
        self.built = False
        self._weights: list[tuple[str, Variable]] = []  # (name given to add_weight, variable), in creation order
        self._seed_generators: list[SeedGenerator] = []  # set as attributes: their states are variables, not weights
        self._regularizers: list[tuple[Variable, Any]] = []
        self._build_shapes: Any = None  # the input shape ``build`` was called with (Keras' build config)
        self.trainable = bool(trainable)

    def _check_fixed_arguments(self, kwargs: dict[str, Any]) -> None:
        """Take the Keras arguments mirrorlab supports only at their defaults out of ``kwargs``; refuse others."""
        fixed: dict[str, tuple] = {}
        for cls in reversed(type(self).__mro__):
            fixed.update(cls.__dict__.get("_fixed_arguments", {}))
        take_fixed_arguments(type(self).__name__, kwargs, fixed)

    def get_config(self) -> dict[str, Any]:
        """Keras' layer config: ``name``, ``trainable``, the dtype policy, then a subclass's arguments (Keras'
        automatic config of plain constructor values when the subclass defines no ``get_config``)."""
        config = {"name": self.name, "trainable": self.trainable, "dtype": dtype_policy(self.dtype)}
        defined_by = next(cls for cls in type(self).__mro__ if "get_config" in cls.__dict__)
        if defined_by.__module__.startswith("mirrorlab.") and not type(self).__module__.startswith("mirrorlab."):
            auto = self.__dict__.get("_auto_config")
            if auto is None:
                raise NotImplementedError(
                    f"Layer {type(self).__name__} was created by passing non-serializable argument values in "
                    "`__init__()`, and therefore the layer must override `get_config()` in order to be serializable."
                    "\nFix: define get_config(self) returning {**super().get_config(), <your arguments>}.")
            config.update(auto)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Layer":
        """The layer ``get_config`` describes (nested objects from their configs)."""
        return cls(**config)

    def get_build_config(self) -> dict[str, Any] | None:
        """``{"input_shape": ...}`` of the built layer (None if unbuilt or built when made, as in Keras)."""
        if self._built_at_init or self._build_shapes is None:
            return None
        return {"input_shape": serialize_keras_object(self._build_shapes)}

    def build_from_config(self, config: dict[str, Any]) -> None:
        """Build the layer for the input shape its build config recorded."""
        if config and config.get("input_shape") is not None and not self.built:
            self.build(shape_from_json(config["input_shape"]))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"

    @property
    def trainable(self) -> bool:
        """False freezes the layer: it and its sublayers list no trainable weights."""
        return self.__dict__["_trainable"]

    @trainable.setter
    def trainable(self, value: bool) -> None:
        """Set the flag on this layer, on the weights it made trainable and on its sublayers, as Keras 3 does."""
        self.__dict__["_trainable"] = value = bool(value)
        for _, var in self._weights:
            if var._created_trainable:
                var.trainable = value
        for layer in self._layers:
            layer.trainable = value

    def __setattr__(self, name: str, value: Any) -> None:
        tracked = self.__dict__.get("_attributes")
        if tracked is not None:
            tracked.pop(name, None)
            if isinstance(value, (Layer, Variable)):
                tracked[name] = value
            if isinstance(value, SeedGenerator) and all(value is not known for known in self._seed_generators):
                self._seed_generators.append(value)
            for layer in _layers_in(value):
                if all(layer is not known for known in self._layers):
                    self._layers.append(layer)
        object.__setattr__(self, name, value)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's ``build`` runs under the layer's name scope (weights are named ``<layer>/<weight>``, also when
        user code calls ``build`` itself) and marks the layer built, as Keras wraps it."""
        super().__init_subclass__(**kwargs)
        if "build" in cls.__dict__:
            cls.build = _scoped_build(cls.__dict__["build"])

    def build(self, input_shape: tuple) -> None:
        """Create the weights for inputs of ``input_shape`` (nothing here: sublayers build on their first call)."""
        self._build_shapes = input_shape
        self.built = True

    @contextlib.contextmanager
    def _scope(self) -> Iterator[None]:
        """This layer's name scope, opened once however deeply its own methods nest (per thread)."""
        opened = _calls.__dict__.setdefault("scopes", set())
        if id(self) in opened:
            yield
            return
        opened.add(id(self))
        try:
            with name_scope(self.name), keras_path_scope(self.name):
                yield
        finally:
            opened.discard(id(self))

    def add_weight(self, shape: tuple = (), initializer: Any = None, dtype: Any = None, trainable: bool = True,
                   regularizer: Any = None, name: str | None = None, **kwargs: Any) -> Variable:
        """A new weight of this layer, as Keras' ``add_weight`` (initializer by default glorot_uniform for floats,
        zeros otherwise; the name by default ``variable``)."""
        unknown = set(kwargs) - {"autocast", "constraint", "aggregation", "synchronization", "overwrite_with_gradient"}
        if unknown:
            raise TypeError(f"add_weight() got unexpected keyword arguments {sorted(unknown)}")
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        if initializer is None:
            initializer = "glorot_uniform" if dtype.kind == "f" else "zeros"
        name = "variable" if name is None else name
        value = initializers.get(initializer)(tuple(shape), dtype)
        with self._scope():  # also when called outside build (in __init__, say): named <layer>/<name>
            var = Variable(value, name=name, trainable=trainable)
        mark_keras_weight(var, keras_path(name))
        self._weights.append((name, var))
        if regularizer is not None:
            self._regularizers.append((var, regularizers.get(regularizer)))
        return var

    @property
    def losses(self) -> list[Any]:
        """Each regularized weight's penalty now (differentiable on a recording ``GradientTape``), then the
        sublayers'."""
        penalties = []
        for var, regularizer in self._regularizers:
            watching(var)  # a recording tape that watches reads remembers it
            w = var._read()
            penalties.append(track(regularizer(w), lambda g, var=var, w=w, r=regularizer: [(var, g * r.grad(w))]))
        return penalties + [loss for layer in self._layers for loss in layer.losses]

    def _own_weights(self) -> list[Variable]:
        """This layer's own weights, trainable first (as Keras lists them)."""
        own = [var for _, var in self._weights]
        return [v for v in own if v._created_trainable] + [v for v in own if not v._created_trainable]

    @property
    def weights(self) -> list[Variable]:
        """Own weights, then each sublayer's, each once."""
        return _once(self._own_weights() + [w for layer in self._layers for w in layer.weights])

    @property
    def variables(self) -> list[Variable]:
        """The weights and the seed generators' states (which Keras counts as variables, not weights): own weights,
        own generators, then each sublayer's."""
        return _once(self._own_weights() + [g.state for g in self._seed_generators] +
                     [v for layer in self._layers for v in layer.variables])

    def get_weights(self) -> list[np.ndarray]:
        """The weights' values (copies), in creation order."""
        return [w.numpy() for w in self.weights]

    @property
    def trainable_weights(self) -> list[Variable]:
        """The weights training updates: none of a frozen layer's (``trainable = False``, sublayers included)."""
        if not self.trainable:
            return []
        return [var for var in self.weights if var.trainable]

    trainable_variables = trainable_weights

    def _not_trained(self, variables: list[Variable]) -> list[Variable]:
        """Those of ``variables`` that training leaves alone."""
        trainable = {id(w) for w in self.trainable_weights}
        return [v for v in variables if id(v) not in trainable]

    @property
    def non_trainable_weights(self) -> list[Variable]:
        return self._not_trained(self.weights)

    @property
    def non_trainable_variables(self) -> list[Variable]:
        return self._not_trained(self.variables)

    def _checkpoint_children(self) -> dict[str, Any]:
        """The layers and variables set as attributes, by attribute name (as TF's object graph tracks them)."""
        return dict(self._attributes)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """The output shape for inputs of ``input_shape``: found by calling the layer (not training) on zeros of that
        shape (an unknown dimension as 1), as Keras traces a layer on a symbolic input."""
        out = tuple(self(np.zeros(tuple(1 if d is None else int(d) for d in input_shape), self.dtype),
                         training=False).shape)
        return (None, *out[1:]) if input_shape and input_shape[0] is None else out

    def check_input_shape(self, shape: tuple) -> None:
        """Keras' input spec of the built layer, checked on an input of ``shape`` (None: unknown); none here."""

    def _convert_input(self, x: Any) -> Any:
        """Keras' autocast: a floating input in the layer's dtype (float64 data gives float32 outputs)."""
        return x.astype(self.dtype) if x.dtype.kind == "f" and x.dtype != self.dtype else x

    # A call in a @batch_safe function run stacked is refused unless the class checks its own (built-in layers) or
    # only calls layers that do (models).
    _checks_stacked_calls = False

    def call(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """The layer's computation; a subclass of ``Layer`` must define it."""
        raise NotImplementedError(f"Exception encountered when calling {type(self).__name__}.call().\n\n"
                                  f"\x1b[1mLayer {type(self).__name__} does not have a `call` method implemented."
                                  "\x1b[0m\n\nFix: define call(self, inputs) in the layer's class.")

    def __call__(self, inputs: Any, *args: Any, training: Any = None, **kwargs: Any) -> Any:
        """Build on the first input, then ``call``. The training mode is ``training`` if given, else that of the layer
        call this one runs inside (Keras' call context); it reaches ``call`` when its signature takes ``training``,
        and the layers ``call`` uses either way."""
        if symbolic_inputs(inputs):
            return self._symbolic_call(inputs, args, kwargs, training)
        if not self._checks_stacked_calls and stacked_replicas() is not None:
            refuse_stacked(stack_refusal_of(self, ()))
        outer = getattr(_calls, "training", None)
        mode = outer if training is None else training
        if not self.built:
            self.build(shapes_of(untracked(inputs)))
        if mode is not None and takes_training(self):
            kwargs["training"] = mode
        _calls.training = mode
        try:
            if not self._names_sublayers:
                return self.call(inputs, *args, **kwargs)
            with self._scope():  # sublayers built on this first call are named under this layer
                return self.call(inputs, *args, **kwargs)
        finally:
            _calls.training = outer


    def _symbolic_call(self, inputs: Any, args: tuple, kwargs: dict, training: Any) -> Any:
        """The layer applied to symbolic tensors (``keras.Input`` and what layers made of it): built for their shapes,
        then a node of the graph whose outputs come from a call on zeros, not training (see ``symbolic``)."""
        if not self.built:
            self.build(shapes_of(inputs))
        if training is not None:
            kwargs = {**kwargs, "training": training}
        return symbolic_call(self, self._on_zeros, (inputs, *args), kwargs)

    def _on_zeros(self, *args: Any, **kwargs: Any) -> Any:
        """The outputs on zeros standing for symbolic inputs, not training (nothing random is drawn and no statistic
        moves)."""
        return self(*args, **{**kwargs, "training": False})


def symbolic_inputs(inputs: Any) -> bool:
    """Whether a layer's inputs are symbolic (a KerasTensor, or a list, tuple or dict holding one)."""
    return isinstance(inputs, KerasTensor) or (isinstance(inputs, (list, tuple, dict)) and is_symbolic(inputs))


_calls = threading.local()  # ``training``: the mode of the layer call in progress (Keras' call context); ``scopes``


def _scoped_build(build: Callable[..., None]) -> Callable[..., None]:
    """``build`` run under the layer's name scope, then marking it built and giving the new weights the values a
    checkpoint read before they existed (TF's restore-on-create), before the first call uses them."""
    @functools.wraps(build)
    def scoped(self: Layer, input_shape: Any, *args: Any, **kwargs: Any) -> None:
        with self._scope():
            build(self, input_shape, *args, **kwargs)
        self._build_shapes = input_shape
        self.built = True
        restore_on_create(self)
    return scoped


def takes_training(layer: Layer) -> bool:
    """Whether the layer's ``call`` has a ``training`` parameter (cached per class)."""
    cls = type(layer)
    cached = _TAKES_TRAINING.get(cls)
    if cached is None:
        cached = _TAKES_TRAINING[cls] = "training" in inspect.signature(cls.call).parameters
    return cached


_TAKES_TRAINING: dict[type, bool] = {}


def _once(weights: list[Variable]) -> list[Variable]:
    """``weights`` in order, each once (a layer shared by two parents lists its weights once, as Keras)."""
    return list({id(w): w for w in weights}.values())


def _plain_arguments(cls: type, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """``cls(*args, **kwargs)``'s constructor arguments by name with the defaults of those not given (the contents
    of ``**kwargs`` merged in), or None if any is not a plain value (str, number, bool, None, nests of them)."""
    signature = inspect.signature(cls.__init__)
    try:
        bound = signature.bind_partial(None, *args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    given: dict[str, Any] = {}
    for name, value in list(bound.arguments.items())[1:]:
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            given.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            given[name] = value
    plain = all(isinstance(v, (str, int, float, bool, type(None))) for v in _leaves(given))
    return given if plain else None


def _leaves(value: Any) -> list[Any]:
    """The plain values of a nest of lists, tuples and dicts."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def shape_from_json(shape: Any) -> Any:
    """A shape read from JSON as ``build`` takes it: a tuple, or a list of tuples for several inputs."""
    if isinstance(shape, list) and shape and all(isinstance(d, list) for d in shape):
        return [tuple(d) for d in shape]
    return tuple(shape) if isinstance(shape, list) else shape


def _layers_in(value: Any) -> list["Layer"]:
    """The layers ``value`` holds: itself, or the items of a list, tuple or dict (nested), as Keras tracks them."""
    if isinstance(value, Layer):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [layer for item in value for layer in _layers_in(item)]
    return []


class BuiltinLayer(Layer, ABC):
    """A built-in layer: ``_forward(x, training)`` returns the output and a cache, ``_backward(cache, dy)`` the input
    gradient and the trainable weights' gradients; ``call`` runs the forward pass and, while a tape records, makes the
    output differentiable through the backward pass."""

    _checks_stacked_calls = True  # (``call`` checks ``stack_refusal`` itself)

    _names_sublayers = False

    def _checkpoint_children(self) -> dict[str, Any]:
        """Keras 3's names: the kernel is tracked as ``_kernel`` (checkpoint keys ``.../_kernel``)."""
        return {("_kernel" if name == "kernel" else name): var for name, var in self._weights}

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return input_shape

    def _on_zeros(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """Zeros of the output's shape and dtype, from ``compute_output_shape`` and the input checks (no compute)."""
        x = self._convert_input(asarray(inputs))
        self.check_input_shape(x.shape)
        return np.zeros(self.compute_output_shape(tuple(x.shape)), self._output_dtype(x.dtype))

    def _output_dtype(self, input_dtype: np.dtype) -> np.dtype:
        """The output's dtype for (converted) inputs of ``input_dtype``: theirs, unless the layer casts its output."""
        return input_dtype

    @abstractmethod
    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        """Implemented by subclasses."""

    @abstractmethod
    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        """Implemented by subclasses: the input's gradient (None when ``input_grad`` is False and the layer skips it:
        a plain array's, which no tape can ask for) and the trainable weights' gradients."""

    def _logits(self, cache: Any) -> Any:
        """The pre-activation values a sigmoid or softmax output remembers (Keras' ``_keras_logits``), else None."""
        return None

    def call(self, inputs: Any, training: Any = None) -> Any:
        x = self._convert_input(asarray(untracked(inputs)))
        if stacked_replicas() is None:
            self.check_input_shape(x.shape)
            out, cache = self._forward(x, bool(training))
            return differentiable(self, inputs, out, cache)
        self.check_input_shape(x.shape[1:])  # (one replica's input)
        refusal = stack_refusal_of(self, x.shape[1:])
        if refusal is not None:
            refuse_stacked(refusal)
        out, cache = self._stacked_forward(x, bool(training))
        return differentiable(self, inputs, out, cache, stacked=True)

    # -- stacked execution: all local replicas' inputs at once, on a leading replica axis (keras/stacked_step.py) --

    def stack_refusal(self, input_shape: tuple) -> str | None:
        """Why this layer cannot run the local replicas' inputs (each of ``input_shape``) stacked, bit-identical to
        one call per replica; None when it can. Only layers that say so run stacked: the default refuses."""
        return f"layer {self.name!r} ({type(self).__name__}) has no stacked execution"

    def _stacked_forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        """``_forward`` of stacked inputs (replica, batch, ...): ``_forward`` itself for a layer that treats rows
        apart (only called when ``stack_refusal`` allows)."""
        return self._forward(x, training)

    def _stacked_backward(self, cache: Any, dy: Any, input_grad: bool) -> tuple[Any, list[Any]]:
        """``_backward`` of stacked gradients: weight gradients carry the replica axis first (one per replica);
        ``input_grad`` False may skip the input's gradient (the first layer's, which no one uses)."""
        return self._backward(cache, dy, input_grad)


def refuse_stacked(refusal: str) -> None:
    """Raise ``refusal`` (a layer's reason not to run stacked) as the error of a stacked ``@batch_safe`` call."""
    raise NotImplementedError(f"{refusal}: it cannot run in a @batch_safe function run stacked.\nFix: use layers "
                              "that run stacked (see docs/keras.md, Stacked replicas), or remove @batch_safe (the "
                              "function then runs once per replica).")


def stack_refusal_of(layer: Layer, input_shape: tuple) -> str | None:
    """Why ``layer`` cannot run the local replicas' inputs (each of ``input_shape``) stacked; None when it can. Only
    built-in layers whose own class declares ``stack_refusal`` may (a subclass, even of Dense, does not)."""
    if not isinstance(layer, BuiltinLayer) or "stack_refusal" not in vars(type(layer)):
        return f"layer {layer.name!r} ({type(layer).__name__}) does not declare stacked execution"
    return layer.stack_refusal(input_shape)


def differentiable(layer: BuiltinLayer, inputs: Any, out: Any, cache: Any, stacked: bool = False) -> Any:
    """``out`` of ``layer`` on ``inputs`` (with its logits when it keeps them); while a tape records, a value the tape
    differentiates through ``layer``'s backward pass to ``inputs`` and the weights the layer made trainable, frozen
    or not, as TF's tape follows them (from the logits' gradient when a cross-entropy uses them). ``stacked``: the
    values carry the local replicas first, and so do the weights' gradients (``_stacked_backward``)."""
    logits = layer._logits(cache)
    if not recording():
        return out if logits is None else activations.with_logits(out, logits)
    weights = [var for _, var in layer._weights if var._created_trainable]  # frozen too: a tape may ask about them
    for var in weights:
        watching(var)  # the tapes that watch reads remember them

    def backward_from(value: Any, from_logits: bool) -> Any:
        def backward(g: Any) -> list[tuple[Any, Any]]:
            dy = like(asarray(g, value.dtype), value)
            if stacked:
                step = layer._stacked_backward_from_logits if from_logits else layer._stacked_backward
            else:
                step = layer._backward_from_logits if from_logits else layer._backward
            # (a plain array's gradient goes nowhere, as no tape can watch one: not computed; dx None: no input
            # gradient, for indices too)
            dx, grads = step(cache, dy, not isinstance(inputs, np.ndarray))
            return [*([] if dx is None else [(inputs, dx)]), *zip(weights, grads)]
        return backward
    if logits is None:
        return track(out, backward_from(out, False), (inputs,))
    tracked_logits = track(logits, backward_from(logits, True), (inputs,))
    result = track(out, lambda g: [(tracked_logits, layer._activation_grad(cache, like(asarray(g, out.dtype), out)))],
                   (tracked_logits,))
    activations.with_logits(out, logits)  # metrics read the plain output
    return activations.with_logits(result, tracked_logits)


class InputLayer(BuiltinLayer):
    """Declares the input's shape (``shape`` per example, with ``batch_size``; or ``batch_shape``; the legacy
    ``input_shape``) and dtype; passes data through. Its ``output`` is the symbolic tensor ``keras.Input`` returns."""

    _built_at_init = True
    _fixed_arguments = {"sparse": (False,), "ragged": (False,), "optional": (False,)}

    def __init__(self, shape: tuple | None = None, batch_size: int | None = None, dtype: Any = None,
                 batch_shape: tuple | None = None, name: str | None = None, input_shape: tuple | None = None,
                 **kwargs: Any) -> None:
        shape = shape if shape is not None else input_shape
        if shape is not None and batch_shape is not None:
            raise ValueError("You cannot pass both `shape` and `batch_shape` at the same time.")
        if batch_size is not None and batch_shape is not None:
            raise ValueError("You cannot pass both `batch_size` and `batch_shape` at the same time.")
        if shape is None and batch_shape is None:
            raise ValueError("You must pass a `shape` argument.")
        batch_shape = tuple(batch_shape) if batch_shape is not None else (batch_size, *tuple(shape))
        super().__init__(name=name, input_shape=batch_shape[1:], dtype=dtype or "float32", **kwargs)
        self.batch_shape = batch_shape
        self.built = True
        self.output = KerasTensor(batch_shape, self.dtype, name=name)
        self.output._keras_history = KerasHistory(self, 0, 0)
        self.__dict__["_inbound_nodes"] = [Node(self, outputs=[self.output])]

    def get_config(self) -> dict[str, Any]:
        return {"batch_shape": list(self.batch_shape), "dtype": self.dtype.name, "sparse": False, "ragged": False,
                "name": self.name, "optional": False}

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x, None

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        return dy, []

    def stack_refusal(self, input_shape: tuple) -> str | None:
        return None


def Input(shape: tuple | None = None, batch_size: int | None = None, dtype: Any = None,  # noqa: N802 (Keras' name)
          batch_shape: tuple | None = None, name: str | None = None, **kwargs: Any) -> KerasTensor:
    """A symbolic input of per-example ``shape`` (``keras.Input``): call layers on it and build
    ``keras.Model(inputs, outputs)``, or put it first in a ``Sequential`` model to declare the input shape."""
    return InputLayer(shape=shape, batch_size=batch_size, dtype=dtype, batch_shape=batch_shape, name=name,
                      **kwargs).output


class _Activated(BuiltinLayer):
    """A layer ending in an activation: its caches end with ``(z, a)``, the pre-activation and the output."""

    activation: activations.Activation

    def _logits(self, cache: Any) -> Any:
        return cache[-2] if self.activation.keeps_logits else None

    def _activation_grad(self, cache: Any, dy: Any) -> Any:
        """The gradient w.r.t. the pre-activation, from the gradient ``dy`` w.r.t. the output."""
        return self.activation.backward(cache[-2], cache[-1], dy)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        return self._backward_from_logits(cache, self._activation_grad(cache, dy), input_grad)

    @abstractmethod
    def _backward_from_logits(self, cache: Any, dz: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        """``_backward`` from the gradient ``dz`` w.r.t. the pre-activation."""

    def _activation_refusal(self, width: Any) -> str | None:
        """Why the activation cannot run stacked on rows of ``width`` values (see ``activations.stack_refusal``)."""
        refusal = activations.stack_refusal(self.activation, width, self.dtype)
        return None if refusal is None else f"layer {self.name!r}: {refusal}"

    def _stacked_backward(self, cache: Any, dy: Any, input_grad: bool) -> tuple[Any, list[Any]]:
        return self._stacked_backward_from_logits(cache, self._activation_grad(cache, dy), input_grad)

    def _stacked_backward_from_logits(self, cache: Any, dz: Any, input_grad: bool) -> tuple[Any, list[Any]]:
        """``_stacked_backward`` from the pre-activation's gradient: ``_backward_from_logits`` for a layer whose
        backward treats rows apart."""
        return self._backward_from_logits(cache, dz, input_grad)


class _KernelBias(_Activated):
    """A layer with a kernel and an optional bias: their initializers and regularizers, and an activation."""

    _fixed_arguments = {"kernel_constraint": (None,), "bias_constraint": (None,)}

    def __init__(self, activation: Any = None, use_bias: bool = True, kernel_initializer: Any = "glorot_uniform",
                 bias_initializer: Any = "zeros", kernel_regularizer: Any = None, bias_regularizer: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = initializers.get(kernel_initializer)  # made now: a default seed is drawn here
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)

    def _kernel_bias_config(self) -> dict[str, Any]:
        """The activation, bias, initializer, regularizer and constraint entries of Keras' config."""
        return {"activation": self.activation.name, "use_bias": self.use_bias,
                "kernel_initializer": serialize_keras_object(self.kernel_initializer),
                "bias_initializer": serialize_keras_object(self.bias_initializer),
                "kernel_regularizer": serialize_keras_object(self.kernel_regularizer),
                "bias_regularizer": serialize_keras_object(self.bias_regularizer)}

    def _build_kernel_bias(self, kernel_shape: tuple, bias_shape: tuple) -> None:
        self.kernel = self.add_weight(kernel_shape, self.kernel_initializer, regularizer=self.kernel_regularizer,
                                      name="kernel")
        self.bias = self.add_weight(bias_shape, self.bias_initializer, regularizer=self.bias_regularizer,
                                    name="bias") if self.use_bias else None


class Dense(_KernelBias):
    """``activation(x @ kernel + bias)``."""

    _fixed_arguments = {"quantization_config": (None,), "lora_rank": (None,)}

    def __init__(self, units: int, activation: Any = None, use_bias: bool = True, **kwargs: Any) -> None:
        super().__init__(activation, use_bias, **kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive integer. Received: "
                             f"units={units}")
        self.units = int(units)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "units": self.units, **self._kernel_bias_config(), "kernel_constraint": None,
                "bias_constraint": None, "quantization_config": None}

    def build(self, input_shape: tuple) -> None:
        self._build_kernel_bias((int(input_shape[-1]), self.units), (self.units,))

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (*input_shape[:-1], self.units)

    def _convert_input(self, x: Any) -> Any:
        """Keras' Dense converts any input (integers too) to its dtype."""
        return x.astype(self.dtype) if x.dtype != self.dtype else x

    def check_input_shape(self, shape: tuple) -> None:
        """Keras' Dense input spec: at least 2 dimensions, the last one the kernel's rows."""
        if not self.built:
            return
        refused = f"Input 0 with name 'None' of layer '{self.name}' is incompatible with the layer: "
        if len(shape) < 2:
            raise ValueError(f"{refused}expected min_ndim=2, found ndim={len(shape)}. Full shape received: "
                             f"{tuple(shape)}")
        rows = self.kernel.shape[0]
        if shape[-1] is not None and shape[-1] != rows:
            raise ValueError(f"{refused}expected axis -1 of input shape to have value {rows}, but received input "
                             f"with shape {tuple(shape)}")

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        z = x @ self.kernel._read()
        if self.bias is not None:
            z = z + self.bias._read()
        a = self.activation.forward(z)
        return a, (x, z, a)

    def _backward_from_logits(self, cache: Any, dz: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        x = cache[0]
        kernel = self.kernel._read()
        x2, dz2 = x.reshape(-1, x.shape[-1]), dz.reshape(-1, dz.shape[-1])
        grads = [(x2.T @ dz2).astype(self.dtype, copy=False)]
        if self.bias is not None:
            grads.append(tf_sum(dz2, axis=0).astype(self.dtype, copy=False))
        return (dz @ kernel.T if input_grad else None), grads

    def stack_refusal(self, input_shape: tuple) -> str | None:
        """Dense stacks inputs of rank 2 (a batch of vectors per replica), whose products stay each replica's own
        (``np.matmul`` of (replica, batch, in) by the kernel multiplies each replica's matrix alone)."""
        if len(input_shape) != 2:
            return f"layer {self.name!r} (Dense) stacks only inputs of rank 2, got shape {tuple(input_shape)}"
        return self._activation_refusal(self.units)

    def _stacked_backward_from_logits(self, cache: Any, dz: Any, input_grad: bool) -> tuple[Any, list[Any]]:
        """Each replica's ``x.T @ dz`` and bias sum, stacked (the same products and sums as one replica's)."""
        x = cache[0]
        grads = [np.matmul(np.swapaxes(x, 1, 2), dz).astype(self.dtype, copy=False)]
        if self.bias is not None:
            grads.append(tf_sum_each(dz).astype(self.dtype, copy=False))
        return (dz @ self.kernel._read().T if input_grad else None), grads


class Flatten(BuiltinLayer):
    """Collapse all but the batch dimension."""

    _fixed_arguments = {"data_format": ("channels_last", None)}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "data_format": "channels_last"}

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], int(np.prod(input_shape[1:])))

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x.reshape(x.shape[0], int(np.prod(x.shape[1:]))), x.shape  # (sized: an empty batch reshapes too)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        return dy.reshape(cache), []

    def stack_refusal(self, input_shape: tuple) -> str | None:
        return None

    def _stacked_forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x.reshape(x.shape[0], x.shape[1], int(np.prod(x.shape[2:]))), x.shape


class Reshape(BuiltinLayer):
    """Reshape everything but the batch dimension to ``target_shape`` (one entry may be -1)."""

    _built_at_init = True

    def __init__(self, target_shape: tuple, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)
        if self.target_shape.count(-1) > 1:
            raise ValueError(f"There must be at most one unknown dimension (-1) in `target_shape`. Received: "
                             f"target_shape={tuple(target_shape)}.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "target_shape": list(self.target_shape)}

    def check_input_shape(self, shape: tuple) -> None:
        """Keras' error for a target shape that does not hold the input's values (batch dimension aside)."""
        size = int(np.prod([d for d in shape[1:]])) if all(d is not None for d in shape[1:]) else None
        known = int(np.prod([d for d in self.target_shape if d != -1]))
        if size is not None and (size % known if -1 in self.target_shape else size != known):
            raise ValueError(f"Exception encountered when calling Reshape.call().\n\n\x1b[1mThe total size of the "
                             f"tensor must be unchanged. Received: input_shape={tuple(shape[1:])}, "
                             f"target_shape={self.target_shape}\x1b[0m\n\nFix: give a target shape holding "
                             f"{size} values per example.")

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        known = int(np.prod([d for d in self.target_shape if d != -1]))
        size = int(np.prod(input_shape[1:]))
        return (input_shape[0], *(size // known if d == -1 else d for d in self.target_shape))

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        return x.reshape((x.shape[0], *self.target_shape)), x.shape

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        return dy.reshape(cache), []


class Activation(_Activated):
    """``activation(x)`` as a layer (a sigmoid or softmax output keeps its logits, as Keras')."""

    _built_at_init = True

    def __init__(self, activation: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.activation = activations.get(activation)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "activation": self.activation.name}

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        a = self.activation.forward(x)
        return a, (x, a)

    def _backward_from_logits(self, cache: Any, dz: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        return dz, []

    def stack_refusal(self, input_shape: tuple) -> str | None:
        return self._activation_refusal(input_shape[-1])


class Dropout(BuiltinLayer):
    """Zero each input with probability ``rate`` while training and scale the rest by ``1 / (1 - rate)``; the
    identity at inference. ``noise_shape`` shares one draw along its dimensions of 1 (None: the input's size).

    The masks are TF's: each training call draws with the next seed of the layer's ``SeedGenerator`` (from ``seed``,
    or a default seed taken from Python's ``random`` when the layer is made). Under a strategy every replica advances
    its own copy of the generator, so replicas drop the same positions of same-shaped inputs, as in TF."""

    _built_at_init = True

    def __init__(self, rate: float, noise_shape: Any = None, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0 <= rate <= 1:
            raise ValueError("Invalid value received for argument `rate`. Expected a float value between 0 and 1. "
                             f"Received: rate={rate}")
        self.rate, self.seed = rate, seed
        self.noise_shape = _noise_shape(noise_shape)
        if rate > 0:
            self.seed_generator = SeedGenerator(seed)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rate": self.rate, "seed": self.seed,
                "noise_shape": None if self.noise_shape is None else list(self.noise_shape)}

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        if not training or self.rate == 0:
            return x, None
        xp = array_module(x)
        if self.rate == 1:
            return xp.zeros_like(x), (False, x.dtype.type(1))
        shape = x.shape if self.noise_shape is None else tuple(
            x.shape[i] if d is None else d for i, d in enumerate(self.noise_shape))
        keep = like(dropout_mask(shape, self.rate, x.dtype, self.seed_generator), x)
        scale = dropout_scale(self.rate, x.dtype)
        return xp.where(keep, x * scale, x.dtype.type(0)), (keep, scale)

    def _backward(self, cache: Any, dy: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        if cache is None:
            return dy, []
        keep, scale = cache
        return array_module(dy).where(keep, dy, dy.dtype.type(0)) * scale, []


def _noise_shape(noise_shape: Any) -> tuple | None:
    """Keras' check of Dropout's ``noise_shape``: an iterable of positive integers or None."""
    if noise_shape is None:
        return None
    if isinstance(noise_shape, str):
        raise ValueError("Invalid value received for argument `noise_shape`. Expected a tuple or list of integers. "
                         f"Received: noise_shape={noise_shape}")
    try:
        noise_shape = tuple(noise_shape)
    except TypeError:
        raise ValueError("Invalid value received for argument `noise_shape`. Expected an iterable of integers "
                         f"(e.g., a tuple or list). Received: noise_shape={noise_shape}") from None
    for i, dim in enumerate(noise_shape):
        if dim is not None and not isinstance(dim, int):
            raise ValueError("Invalid value received for argument `noise_shape`. Expected all elements to be integers "
                             f"or None. Received element at index {i}: {dim} (type: {type(dim).__name__})")
        if dim is not None and dim <= 0:
            raise ValueError("Invalid value received for argument `noise_shape`. Expected all dimensions to be "
                             f"positive integers or None. Received negative or zero value at index {i}: {dim}")
    return noise_shape


def window_geometry(size: int, window: int, stride: int, padding: str) -> tuple[int, int, int]:
    """Along one dimension of ``size``: the number of windows and the padding before and after them, as TF
    places them ("valid": none, windows that fit; "same": ceil(size / stride) windows, the odd pad after)."""
    if padding == "valid":
        return max((size - window) // stride + 1, 0), 0, 0
    count = -(-size // stride)
    pad = max((count - 1) * stride + window - size, 0)
    return count, pad // 2, pad - pad // 2


def window_pair(value: Any, what: str, positive: bool = True) -> tuple[int, int]:
    """A 2-D window argument (an int for both dimensions, or 2 ints) as a pair, with Keras' errors for another
    length, a non-integer, or (``positive``) a value below 1."""
    pair = (value, value) if isinstance(value, int) else value
    try:
        pair = tuple(pair)
    except TypeError:
        pair = ()
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) for v in pair):
        raise ValueError(f"The `{what}` argument must be a tuple of 2 integers. Received {what}={value}")
    small = {int(v) for v in pair if v <= 0}
    if small and positive:
        raise ValueError(f"The `{what}` argument must be a tuple of 2 integers. Received {what}={value}, including "
                         f"values {small} that do not satisfy `value > 0`")
    return int(pair[0]), int(pair[1])


class Conv2D(_KernelBias):
    """2-D convolution over NHWC inputs ("valid" or "same" padding, any strides), via im2col."""

    _fixed_arguments = {"data_format": ("channels_last", None), "dilation_rate": (1, (1, 1)), "groups": (1,),
                        "lora_rank": (None,)}

    def __init__(self, filters: int, kernel_size: int | tuple, strides: int | tuple = (1, 1), padding: str = "valid",
                 activation: Any = None, use_bias: bool = True, **kwargs: Any) -> None:
        super().__init__(activation, use_bias, **kwargs)
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise ValueError(f"The `padding` argument must be a list/tuple or one of {{'valid', 'same'}}. Received: "
                             f"{padding}")
        if int(filters) <= 0:
            raise ValueError(f"Invalid value for argument `filters`. Expected a strictly positive value. Received "
                             f"filters={filters}.")
        self.filters = int(filters)
        self.kernel_size = window_pair(kernel_size, "kernel_size")
        self.strides = window_pair(strides, "strides")
        self.padding = padding.lower()

    def get_config(self) -> dict[str, Any]:
        config = self._kernel_bias_config()
        return {**super().get_config(), "filters": self.filters, "kernel_size": list(self.kernel_size),
                "strides": list(self.strides), "padding": self.padding, "data_format": "channels_last",
                "dilation_rate": [1, 1], "groups": 1, "activation": config.pop("activation"), **config,
                "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None}

    def build(self, input_shape: tuple) -> None:
        if len(input_shape) < 4:
            raise ValueError(f"Input 0 with name 'None' of layer '{self.name}' is incompatible with the layer: "
                             f"expected min_ndim=4, found ndim={len(input_shape)}. Full shape received: "
                             f"{tuple(input_shape)}")
        kh, kw = self.kernel_size
        height, width = input_shape[1], input_shape[2]
        if self.padding == "valid" and any(size is not None and size < k for size, k in ((height, kh), (width, kw))):
            raise ValueError(f"Computed output size would be zero or negative. Received `inputs shape="
                             f"{tuple(input_shape)}`, `kernel shape={(kh, kw, int(input_shape[-1]), self.filters)}`, "
                             f"`dilation_rate=[1 1]`, `strides={self.strides}`, `padding={self.padding}`.")
        self._build_kernel_bias((kh, kw, int(input_shape[-1]), self.filters), (self.filters,))

    def _convert_input(self, x: Any) -> Any:
        """Keras' autocast; integer inputs meet the float kernel in TF's convolution and fail there, as in Keras."""
        if x.dtype.kind in "iub":
            raise ValueError(f"Exception encountered when calling Conv2D.call().\n\n\x1b[1mIncompatible type "
                             f"conversion requested to type {x.dtype.name} for `tf.Variable of type "
                             f"{self.dtype.name}.\x1b[0m\n\nFix: cast the inputs to {self.dtype.name} first.")
        return super()._convert_input(x)

    def _geometry(self, height: int, width: int) -> tuple[int, int, int, int, int, int]:
        """Output size and padding (top, bottom, left, right) like TF."""
        (oh, top, bottom), (ow, left, right) = (window_geometry(size, k, s, self.padding) for size, k, s in
                                                zip((height, width), self.kernel_size, self.strides))
        return oh, ow, top, bottom, left, right

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        oh, ow = self._geometry(input_shape[1], input_shape[2])[:2]
        return (input_shape[0], oh, ow, self.filters)

    def _forward(self, x: Any, training: bool) -> tuple[Any, Any]:
        n, h, w, c = x.shape
        oh, ow, top, bottom, left, right = self._geometry(h, w)
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0))) if top + bottom + left + right else x
        windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))[:, ::sh, ::sw]
        cols = windows[:, :oh, :ow].transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * c)
        z = (cols @ self.kernel._read().reshape(kh * kw * c, self.filters)).reshape(n, oh, ow, self.filters)
        if self.bias is not None:
            z = z + self.bias._read()
        a = self.activation.forward(z)
        return a, (x.shape, padded.shape, cols, z, a)

    def _backward_from_logits(self, cache: Any, dz: Any, input_grad: bool = True) -> tuple[Any, list[Any]]:
        x_shape, padded_shape, cols, z, _ = cache
        n, oh, ow, _ = z.shape
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        c = x_shape[-1]
        dz = dz.reshape(n * oh * ow, self.filters)
        kernel = self.kernel._read().reshape(kh * kw * c, self.filters)
        grads = [(cols.T @ dz).reshape(self.kernel.shape).astype(self.dtype, copy=False)]
        if self.bias is not None:
            grads.append(tf_sum(dz, axis=0).astype(self.dtype, copy=False))
        if not input_grad:
            return None, grads
        dcols = (dz @ kernel.T).reshape(n, oh, ow, kh, kw, c)
        dpadded = array_module(dz).zeros(padded_shape, dtype=dz.dtype)
        for i in range(kh):
            for j in range(kw):
                dpadded[:, i:i + sh * oh:sh, j:j + sw * ow:sw, :] += dcols[:, :, :, i, j, :]
        _, _, top, _, left, _ = self._geometry(x_shape[1], x_shape[2])
        return dpadded[:, top:top + x_shape[1], left:left + x_shape[2], :], grads


from .pooling import AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D, MaxPooling2D  # noqa: E402 (they build on Layer)
from .normalization import BatchNormalization, LayerNormalization  # noqa: E402 (they build on Layer)
from .embedding import Embedding  # noqa: E402 (it builds on Layer)
from .preprocessing import Rescaling  # noqa: E402 (it builds on Layer)
from .lambda_layer import Lambda  # noqa: E402 (it builds on Layer)
from .merging import (Add, Average, Concatenate, Maximum, Minimum, Multiply, Subtract, add, average,  # noqa: E402
                      concatenate, maximum, minimum, multiply, subtract)
