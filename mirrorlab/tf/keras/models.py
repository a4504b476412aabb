"""Keras' ``Model`` (the base of ``Sequential``, functional models and subclasses) with ``compile``/``fit``/``evaluate`` on any mirrorlab
strategy.

``fit`` runs one ``strategy.run`` per step and scales the loss as Keras 3 on TF 2.21 does: each replica
takes the mean over its own batch divided by the number of replicas, and one all-reduce sums the
gradients. On an uneven last batch that is the mean of per-replica means, not the global mean (TF's
behaviour, kept for conformance; custom loops get the exact mean from ``compute_average_loss``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from ... import errors, nest
from ..array_ops import reduce_mean
from ..autodiff import GradientTape, add_n, track, untracked
from ..data.dataset import Dataset
from ...distribute import context
from ...distribute.batch_safe import stacked_replicas
from ...distribute.input_lib import DistributedDataset
from ...distribute.values import DistributedValues, PerReplicaSpec
from ...distribute.variables import Variable
from ...tensor import array_module, is_cupy, to_host
from ...train.checkpoint import restore_on_create
from . import losses as losses_lib
from . import metrics as metrics_lib
from . import optimizers as optimizers_lib
from . import weights_file
from .saving.model_file import load_model, save_model
from .saving.serialization import deserialize_keras_object, serialize_keras_object
from .callbacks import BatchLogs, Callback, CallbackList, History, pythonify_logs
from .compile_metrics import CompileMetrics
from .data_adapter import as_arrays, as_dataset, train_validation_split, unpack_x_y_sample_weight
from .epoch_iterator import EpochIterator
from .layers import InputLayer, Layer, shape_from_json, symbolic_inputs, takes_training
from .naming import auto_name
from .stacked_step import run_stacked_predict, run_stacked_step, stack_check

__all__ = ["Model", "first_shape", "first_leaf", "clone_model", "load_model", "save_model", "model_from_json"]


def first_shape(shapes: Any) -> tuple:
    """The first shape of a nest of shapes (several inputs, dicts in key order), or ``shapes`` if it is one."""
    while isinstance(shapes, dict) or (isinstance(shapes, (list, tuple)) and shapes and
                                       isinstance(shapes[0], (list, tuple, dict))):
        shapes = shapes[sorted(shapes)[0]] if isinstance(shapes, dict) else shapes[0]
    return tuple(shapes)


def first_leaf(value: Any) -> Any:
    """The first array of a nest of arrays (a model's several inputs), or ``value`` itself."""
    return nest.flatten(value)[0] if isinstance(value, (list, tuple, dict)) else value


UNEVEN_FIRST_BATCH = (
    "\nFix: Keras (TF 2.21) builds the model from the mean of the first batch over the replicas, so the first global "
    "batch must split into equal replica shares: make the batch size a multiple of the number of replicas and the "
    "dataset at least one full batch long (later partial batches train fine).")


class Model(Layer):
    """A model trained with ``compile``/``fit``; remembers the strategy it was made in. ``Sequential`` applies its
    layers in order (``call`` here); a subclass defines ``call`` with the layers it sets as attributes, which are
    built (in the strategy's scope) on the model's first call, as Keras builds a subclassed model."""

    _checks_stacked_calls = True  # (its layers check their own calls)

    def __new__(cls, *args: Any, **kwargs: Any) -> "Model":
        """``keras.Model(inputs, outputs)`` makes a functional model, as Keras' ``Model`` does; so does a subclass
        given inputs and outputs (Keras' "customizing fit" models): it is rebased on ``Functional``, keeping its
        own methods and name."""
        from .functional import Functional  # (it subclasses Model)
        if cls is Model and (args or {"inputs", "outputs"} & set(kwargs)):
            return super().__new__(Functional)
        if cls is not Model and _functional_arguments(args, kwargs) and not issubclass(cls, Functional):
            return super().__new__(_functional_subclass(cls, Functional))
        return super().__new__(cls, *args, **kwargs)

    def __init__(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        if _functional_arguments(args, kwargs):  # a subclass's own __init__ passing inputs and outputs on: as Keras,
            from .functional import Functional   # it becomes a functional model of its class
            self.__class__ = _functional_subclass(type(self), Functional)
            Functional.__init__(self, *args, name=name, **kwargs)
            return
        if args:
            raise TypeError(f"{type(self).__name__}: Model takes no positional arguments but inputs and outputs "
                            f"(got {len(args)}).\nFix: pass keras.Model(inputs, outputs), or only keyword arguments "
                            "such as name=.")
        super().__init__(name=name or auto_name(type(self).__name__), **kwargs)
        # ``optimizer`` exists once compile() sets it: an uncompiled Keras 3 model has no such attribute.
        self.loss: losses_lib.Loss | None = None
        self._loss_by_shapes = False
        self._compile_metrics: CompileMetrics | None = None
        self.stop_training = self.stop_evaluating = self.stop_predicting = False
        self.steps_per_execution = 1  # (compile sets it)
        self._strategy = context.get_strategy()
        self._initial_epoch: int | None = None
        self._loss_tracker: metrics_lib.Mean | None = None
        self._traced_shapes: tuple[tuple, tuple] | None = None  # static label and output shapes of the data
        self._traced_weight_shape: tuple | None = None  # and its sample weights' (None without them)
        self._loss_built = False  # Keras' compiled loss was built (in a strategy's scope: on the first batch)
        self._called = False  # a subclass's layers were built by a first call
        self._output_shapes: dict[tuple, tuple] = {}  # a subclass's output shape by input shape
        self.stack_replicas = True  # fit/evaluate/predict may stack the local replicas (see stacked_step)

    # -- structure ---------------------------------------------------------------------------------

    @property
    def _in_sequence(self) -> bool:
        """Whether the model applies its layers in order (Sequential), rather than a subclass's own ``call``."""
        return type(self).call is Model.call

    @property
    def built(self) -> bool:
        if self._in_sequence:
            return bool(self.layers) and all(layer.built for layer in self.layers)
        return self._built

    @built.setter
    def built(self, value: bool) -> None:
        self._built = value

    @property
    def distribute_strategy(self) -> Any:
        return self._strategy

    @property
    def _optimizer(self) -> optimizers_lib.Optimizer | None:
        """The compiled optimizer, or None before ``compile``."""
        return self.__dict__.get("optimizer")

    @property
    def _compiled_metric_list(self) -> list[metrics_lib.Metric]:
        """The metrics and weighted metrics ``compile`` asked for (empty until the first data builds them)."""
        return self._compile_metrics.metrics if self._compile_metrics is not None else []

    @property
    def metrics(self) -> list[Any]:
        """Keras 3's ``model.metrics``: once compiled, the loss tracker and the compiled metrics (one
        ``CompileMetrics`` named "compile_metrics", when ``compile`` was given any), then the metrics the model holds
        as attributes, in the order they were set. ``fit`` and ``evaluate`` reset these; override to choose them."""
        own = [] if self._loss_tracker is None else [self._loss_tracker]
        if self._compile_metrics is not None and self._compile_metrics.requested:
            own.append(self._compile_metrics)
        held = [m for value in vars(self).values() if value is not self._loss_tracker
                for m in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(m, metrics_lib.Metric)]
        return own + held

    @property
    def metrics_names(self) -> list[str]:
        return [m.name for m in self.metrics]

    def reset_metrics(self) -> None:
        for metric in self.metrics:
            metric.reset_state()

    def get_metrics_result(self) -> dict[str, Any]:
        """Each of ``self.metrics``' results by name (a result that is a dict, the compiled metrics', merged in)."""
        logs: dict[str, Any] = {}
        for metric in self.metrics:
            result = metric.result()
            logs.update(result if isinstance(result, dict) else {metric.name: result})
        return logs

    @property
    def compiled_metrics(self) -> "_DeprecatedCompiledMetrics":
        """Keras 3's deprecated ``compiled_metrics``: only its ``update_state`` (which warns) remains."""
        return _DeprecatedCompiledMetrics(self)

    def compiled_loss(self, y: Any, y_pred: Any, sample_weight: Any = None, regularization_losses: Any = None) -> Any:
        """Keras 3's deprecated ``compiled_loss``: ``compute_loss`` (which it warns to use instead)."""
        warnings.warn("`model.compiled_loss()` is deprecated. Instead, use `model.compute_loss(x, y, y_pred, "
                      "sample_weight, training)`.", stacklevel=2)
        return self.compute_loss(x=None, y=y, y_pred=y_pred, sample_weight=sample_weight)

    @property
    def layers(self) -> list[Layer]:
        """The model's layers, without a leading InputLayer (as Keras lists them)."""
        return self._layers[1:] if self._layers and isinstance(self._layers[0], InputLayer) else list(self._layers)

    def get_layer(self, name: str | None = None, index: int | None = None) -> Layer:
        """The layer called ``name``, or at ``index`` in ``layers``, with Keras' errors."""
        if index is not None and name is not None:
            raise ValueError(f"Provide only a layer name or a layer index. Received: index={index}, name={name}.")
        if index is not None:
            if len(self.layers) <= index:
                raise ValueError(f"Was asked to retrieve layer at index {index} but model only has {len(self.layers)} "
                                 "layers.")
            return self.layers[index]
        if name is not None:
            for layer in self.layers:
                if layer.name == name:
                    return layer
            raise ValueError(f"No such layer: {name}. Existing layers are: {[layer.name for layer in self.layers]}.")
        raise ValueError("Provide either a layer name or layer index at `get_layer`.")

    def _checkpoint_children(self) -> dict[str, Any]:
        """Keras 3's object graph: a Sequential's built layers under ``_functional/_operations`` (index 0 is the input
        layer, which holds no variables), a subclass's layers and variables by attribute; then the optimizer, so
        checkpoint keys match TF's."""
        children: dict[str, Any] = {}
        if not self._in_sequence:
            children.update(super()._checkpoint_children())
            children.pop("optimizer", None)
        elif self.built:
            children["_functional"] = {"_operations": [None, *self.layers]}
        if self._optimizer is not None:
            children["optimizer"] = self._optimizer
        return children

    def build(self, input_shape: tuple) -> None:
        """Nothing: a subclass is only marked built, as Keras 3 builds it (its layers build on its first call;
        ``Sequential`` builds its layers here). Like every ``build``, it runs under the layer's name scope and then
        restores what a checkpoint read earlier (see ``layers._scoped_build``)."""

    def _make_state(self, input_shape: tuple) -> None:
        """Create the weights for inputs of ``input_shape`` before a step: build a Sequential, or call a subclass on
        zeros (not training) unless it was called before."""
        if self._in_sequence:
            if not self.built:
                self.build(input_shape)
        elif not self._called:
            self.compute_output_shape(input_shape)

    def _output(self, x: Any, training: bool) -> Any:
        """The model's output in a step: ``training`` is passed only to a ``call`` that takes it, as Keras' steps do."""
        return self(x, training=training) if takes_training(self) else self(x)

    def set_weights(self, weights: list[Any]) -> None:
        for var, value in zip(self.weights, weights, strict=True):
            var.assign(value)

    def save_weights(self, filepath: str | os.PathLike, overwrite: bool = True) -> None:
        """Write the weights to ``filepath`` (ending in ``.weights.h5`` as Keras 3 requires; in mirrorlab's own
        format, see ``weights_file``). An existing file is replaced (``overwrite=False`` refuses to)."""
        if not overwrite and os.path.exists(filepath):
            raise FileExistsError(f"{filepath} exists and overwrite=False.\nFix: pass overwrite=True or a new path.")
        weights_file.save(self.layers, filepath)

    def load_weights(self, filepath: str | os.PathLike) -> None:
        """Set the weights from a file ``save_weights`` wrote (layer by layer, counts and shapes checked)."""
        weights_file.load(self.layers, filepath)

    # -- configs and saving -----------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> "Model":
        """The model a config describes: a functional model's graph rebuilt, else the class called on it."""
        from .saving.functional_config import functional_from_config, is_functional_config
        from .functional import Functional
        if is_functional_config(config):
            return functional_from_config(cls if issubclass(cls, Functional) else Functional, config, custom_objects)
        return cls(**config)

    def get_compile_config(self) -> dict[str, Any]:
        """The arguments ``compile`` was given (the optimizer as made), serialized as Keras does; {} uncompiled."""
        if self._optimizer is None or not hasattr(self, "_compile_args"):
            return {}
        return serialize_keras_object({"optimizer": self._optimizer, **self._compile_args})

    def compile_from_config(self, config: dict[str, Any]) -> None:
        """``compile`` with a compile config's arguments, then the optimizer's slots for the built model's variables
        (so saved optimizer state has somewhere to go)."""
        config = deserialize_keras_object(config)
        self.compile(**config)
        if self.built and self.trainable_variables:
            with self._strategy.scope():
                self.optimizer.build(self.trainable_variables)

    def build_from_config(self, config: dict[str, Any]) -> None:
        """A subclassed model's weights, made by a call on zeros of the input shape of its first call."""
        if config and config.get("input_shape") is not None and not self._called:
            self._make_state(shape_from_json(config["input_shape"]))

    def to_json(self, **kwargs: Any) -> str:
        """The model's config (``serialize_keras_object``) as JSON; ``kwargs`` go to ``json.dumps``."""
        return json.dumps(serialize_keras_object(self), **kwargs)

    def export(self, filepath: str | os.PathLike, format: str = "tf_saved_model", verbose: bool = True,
               input_signature: Any = None, **kwargs: Any) -> None:
        """Keras' export to a serving format (a TensorFlow SavedModel, ONNX...), which mirrorlab cannot write."""
        raise NotImplementedError(f"model.export(format={format!r}) writes a serving artifact built by TensorFlow, "
                                  "which mirrorlab does not produce.\nFix: save the model with model.save('<path>"
                                  ".keras') and export it from Keras on TensorFlow, or keep its weights with "
                                  "save_weights.")

    def save(self, filepath: str | os.PathLike, overwrite: bool = True, zipped: bool | None = None,
             **kwargs: Any) -> None:
        """Save the whole model to a ``.keras`` file (see ``saving.model_file``); every worker of a cluster saves,
        each to its own path."""
        save_model(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    def count_params(self) -> int:
        return int(sum(np.prod(w.shape) for w in self.weights))

    def summary(self, print_fn: Any = print) -> None:
        print_fn(f'Model: "{self.name}"')
        for layer in self.layers:
            print_fn(f"  {layer.name:<24} {sum(int(np.prod(w.shape)) for w in layer.weights):>10} params")
        print_fn(f"Total params: {self.count_params()}")

    # -- forward -----------------------------------------------------------------------------------

    def call(self, inputs: Any, training: Any = None) -> Any:
        """The layers applied in order (a subclass defines its own ``call``)."""
        x = inputs
        for layer in self.layers:
            x = layer(x, training=training)
        return x

    def __call__(self, inputs: Any, *args: Any, training: Any = None, **kwargs: Any) -> Any:
        """The model's output; on a recording ``GradientTape`` a value the tape differentiates (each layer's output
        is; a sigmoid or softmax output remembers its logits, through which the cross-entropy losses differentiate).
        A subclass's first call builds its layers in the model's strategy scope."""
        if symbolic_inputs(inputs):
            return self._symbolic_call(inputs, args, kwargs, training)
        x = untracked(inputs)
        if self._in_sequence:
            shape = np.shape(x)[0 if stacked_replicas() is None else 1:]  # (one replica's in a stacked run)
            if not self.built:  # in ``run`` the replicas build it once, together (as TF's creator merges there)
                if self._in_own_run():
                    context.get_replica_context().merge_call(lambda _: None if self.built else self.build(shape))
                else:
                    self.build(shape)
            self._check_input(shape, bool(training))
        self._follow(x)
        if self._in_sequence or self._called:
            return super().__call__(inputs, *args, training=training, **kwargs)
        # A subclass's first call creates its layers' weights: in ``run`` every replica creates them itself.
        with contextlib.nullcontext() if self._in_own_run() else self._strategy.scope():
            out = super().__call__(inputs, *args, training=training, **kwargs)
        self._called = True  # (each layer restored what a checkpoint read for it when it built)
        return out

    def _in_own_run(self) -> bool:
        """Whether a replica of this model's strategy is calling it inside ``strategy.run``."""
        return context.get_strategy() is self._strategy and not context.in_cross_replica_context()

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        shape = tuple(input_shape)
        if not self._in_sequence:  # a subclass: found by a call, once per input shape
            if shape not in self._output_shapes:
                self._output_shapes[shape] = super().compute_output_shape(shape)
            return self._output_shapes[shape]
        for layer in self.layers:
            shape = layer.compute_output_shape(shape)
        return shape

    def _check_input(self, shape: tuple, training: bool) -> None:
        """Keras' input checks of the layers on an input of ``shape`` (None where unknown, as in a traced step),
        raised as the model's call reports them."""
        if not self._in_sequence:
            return
        for layer in self.layers:
            try:
                layer.check_input_shape(shape)
            except ValueError as error:
                call = f"{type(self).__name__}.call()"
                raise ValueError(f"Exception encountered when calling {call}.\n\n\x1b[1m{error}\x1b[0m\n\n"
                                 f"Arguments received by {call}:\n  • inputs=shape={shape}\n  • training={training}\n"
                                 "Fix: give the model inputs of the shape its first layer was built for.") from None
            shape = layer.compute_output_shape(shape)

    def _follow(self, x: Any) -> None:
        """Keep the model's state where its input is: a CuPy input moves NumPy weights, optimizer slots and
        metric totals to the input's GPU (and a NumPy input moves them back), as TF runs ops where data is.
        Under a strategy with GPU devices everything already lives on the replicas' GPUs."""
        weights = self.weights
        if not weights or is_cupy(weights[0]._read()) == is_cupy(first_leaf(x)):
            return
        state = [*weights, *self._metric_variables()]
        if self._optimizer is not None and self._optimizer.built:
            state += self._optimizer.variables
        for var in state:
            var._relocate(x)

    def _metric_variables(self) -> list[Variable]:
        metrics = [m for m in [self._loss_tracker, *self._compiled_metric_list] if m is not None]
        return [v for m in metrics for v in m.variables]

    def loss_and_gradients(self, x: Any, y: Any, loss: Any = None, global_batch_size: int | None = None) -> tuple:
        """``(loss, grads)`` of ``compute_average_loss(loss(y, model(x)), global_batch_size)`` for a custom
        training loop: what ``tf.GradientTape`` gives a TF user; grads follow ``trainable_variables``."""
        loss_fn = losses_lib.as_loss(loss if loss is not None else self.loss)
        with GradientTape() as tape:
            out = self._output(x, True)
            per_example = track(loss_fn.call(y, untracked(out)),
                                lambda g: [(out, loss_fn.grad(y, untracked(out), g))], (out,))
            value = losses_lib.compute_average_loss(per_example, global_batch_size=global_batch_size)
        return untracked(value), tape.gradient(value, self.trainable_variables)

    # -- training ----------------------------------------------------------------------------------

    def compile(self, optimizer: Any = "rmsprop", loss: Any = None, loss_weights: Any = None,
                metrics: list[Any] | None = None, weighted_metrics: list[Any] | None = None, run_eagerly: bool = False,
                steps_per_execution: int = 1, jit_compile: Any = "auto", auto_scale_loss: bool = True) -> None:
        """Set the optimizer, loss, metrics (which ignore sample weights) and weighted metrics (which take them), in
        Keras 3's order; metric state is created in the model's strategy scope. ``run_eagerly`` and ``jit_compile``
        are kept (mirrorlab always runs eagerly); ``auto_scale_loss`` matters only to mixed precision, which mirrorlab
        does not run. fit, evaluate and predict run ``steps_per_execution`` steps per execution (see
        ``EpochIterator``). Loss weights are refused with the fix."""
        if loss_weights is not None:
            raise NotImplementedError("compile(loss_weights=...) is not supported: mirrorlab trains models of one "
                                      "output.\nFix: scale the loss itself (e.g. a loss function times the weight).")
        self.run_eagerly, self.jit_compile, self.auto_scale_loss = bool(run_eagerly), jit_compile, auto_scale_loss
        self.steps_per_execution = steps_per_execution  # (checked where Keras' loops fail on it)
        self._compile_args = {"loss": loss, "loss_weights": loss_weights, "metrics": metrics,
                              "weighted_metrics": weighted_metrics, "run_eagerly": bool(run_eagerly),
                              "steps_per_execution": steps_per_execution,
                              "jit_compile": False if jit_compile == "auto" else jit_compile}
        compile_metrics = CompileMetrics(metrics, weighted_metrics)  # built, like "crossentropy", on the first data
        with self._strategy.scope():
            self.optimizer = optimizers_lib.get(optimizer)
            self._loss_by_shapes = losses_lib.chosen_by_shapes(loss)  # (made for the first data's shapes)
            self.loss = None if loss is None or self._loss_by_shapes else losses_lib.as_loss(loss)
            self._loss_tracker = metrics_lib.Mean("loss")
        self._compile_metrics = compile_metrics
        self._loss_built = False
        restore_on_create(self)

    def _prepare(self, data: DistributedDataset, training: bool = False) -> None:
        """Build the model for the data's input shape, and the compiled metrics (and a ``"crossentropy"`` loss) for
        its label and output shapes, as Keras' first step does (``"accuracy"`` depends on them); remember those
        static shapes (None where a replica's batch size is unknown), which Keras' shape errors show."""
        spec = data.element_spec
        specs = list(spec) if isinstance(spec, tuple) else [spec]
        shapes = [nest.map_structure(_replica_shape, s) for s in specs]
        x_shape = shapes[0]
        self._make_state(x_shape)
        self._check_input(x_shape, training)
        self._traced_shapes = None
        if len(specs) < 2:
            return
        y_true_shape, y_pred_shape = shapes[1], self.compute_output_shape(x_shape)
        self._traced_shapes = (y_true_shape, y_pred_shape)
        self._traced_weight_shape = shapes[2] if len(specs) > 2 else None
        if self._compile_metrics is None or self._compile_metrics.built:
            return
        if self.loss is None and self._loss_by_shapes:
            self.loss = losses_lib.for_shapes(y_true_shape, y_pred_shape)
        with self._strategy.scope():
            self._compile_metrics.build(y_true_shape, y_pred_shape)

    def _check_trace(self) -> None:
        """The errors Keras' trace of a step raises on the data's static shapes (which its messages show), in its
        order, before the step runs (and reads its batch): the loss's shape checks, adding the regularization losses
        to an unreduced loss, the metrics' shape checks."""
        if self._traced_shapes is None:
            return
        if self.loss is not None:
            self.loss.check_shapes(*self._traced_shapes)
            self._check_penalties_add(tuple(self._traced_shapes[1]), self._traced_weight_shape)
        self._compile_metrics.check_shapes(*self._traced_shapes)

    def _check_penalties_add(self, output_shape: tuple, weight_shape: tuple | None) -> None:
        """Keras adds the regularization losses to the compiled loss with ``add_n``, which refuses an unreduced loss
        (reduction "none": per-example losses, of the outputs' rank less one, times the sample weights after Keras'
        rank matching: a column of weights makes them a column)."""
        rank = len(output_shape) - 1
        if weight_shape is not None:
            rank = max(map(len, losses_lib.matched_shapes(tuple(output_shape[:-1]), tuple(weight_shape))))
        if self.loss.reduction in (None, "none") and rank and self.losses:
            raise ValueError(f"Shapes must be equal rank, but are {rank} and 0\nFix: give the compiled loss a "
                             "reduction (sum_over_batch_size, sum) when layers have regularizers.")

    def _prepare_training(self, data: DistributedDataset) -> None:
        """``_prepare`` for fit, and the optimizer's slots."""
        self._prepare(data, training=True)
        with self._strategy.scope():
            if not self.optimizer.built:
                self.optimizer.build(self.trainable_variables)

    def _build_from_first_batch(self, data: DistributedDataset, training: bool = False) -> bool:
        """Keras' build before fit or evaluate runs, for a model made in a strategy's scope: the model, its metrics
        (and, to train, the optimizer) are built from the data's first batch up front, so data without batches raises
        StopIteration as there. Under the default strategy the first step's trace builds them (even on data without
        batches; fit without epochs builds nothing): returns False, not built yet."""
        if self._strategy._is_default:
            return False
        first = next(iter(data))
        leaves = nest.flatten(first)
        if leaves and all(isinstance(leaf, DistributedValues) for leaf in leaves):
            # Keras builds from the batch's replica mean: replicas of unequal shares raise TF's AddN error here.
            try:
                nest.map_structure(lambda leaf: self._strategy.reduce("MEAN", leaf, axis=None), first)
            except errors.InvalidArgumentError as exc:
                raise type(exc)(exc.message.split("\nFix:")[0] + UNEVEN_FIRST_BATCH, exc.worker) from None
        metrics_unbuilt, loss_unbuilt = not self._compile_metrics.built, not self._loss_built
        x, y, weight = unpack_x_y_sample_weight(first)
        # Keras builds the model, then computes the metrics and the loss once, on the first batch (a replica's share):
        # a Sequential model keeps its concrete shape, and the shape errors show it.
        x_shape, y_shape, weight_shape = (None if v is None else nest.map_structure(
            lambda t: tuple(self._strategy.experimental_local_results(t)[0].shape), v) for v in (x, y, weight))
        self._make_state(x_shape)
        if training:
            self._prepare_training(data)
        else:
            self._prepare(data)
        if y is None:
            return True
        shapes = (y_shape, self.compute_output_shape(x_shape))
        if metrics_unbuilt:
            self._compile_metrics.check_shapes(*shapes)
        if loss_unbuilt and self.loss is not None:
            self._loss_built = True
            self.loss.check_shapes(*shapes)
            self._check_penalties_add(shapes[1], weight_shape)
        return True

    def _distributed(self, data: Dataset | DistributedDataset) -> DistributedDataset:
        return data if isinstance(data, DistributedDataset) else self._strategy.experimental_distribute_dataset(data)

    def _step(self, batch: Any, train: bool) -> None:
        """One replica's part of a step, as Keras 3's TF trainer: the loss (``compute_loss``) differentiated on a
        tape; the optimizer clips each replica's gradients and sums them over replicas; the loss metric takes the
        loss times the number of replicas, weighted by the batch size; then the compiled metrics."""
        x, y, sample_weight = unpack_x_y_sample_weight(batch)
        replicas = context.get_strategy().num_replicas_in_sync
        with GradientTape() as tape:
            out = self._output(x, train)
            self._check_trace()
            loss = self.compute_loss(x, y, out, sample_weight, training=train)
        value = untracked(loss)
        self._loss_tracker.update_state(value * replicas if replicas > 1 else value,
                                        sample_weight=np.float32(np.shape(first_leaf(x))[0]))
        self._compile_metrics.update_state(y, untracked(out), sample_weight)  # (its errors, as Keras' trace, come
        if train and self.trainable_variables:                              # before any update)
            self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
        elif train:  # (a model of no trainable weights only computes the loss, as Keras' step)
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)

    def compute_loss(self, x: Any = None, y: Any = None, y_pred: Any = None, sample_weight: Any = None,
                     training: bool = True) -> Any:
        """Keras 3's loss of a step: the compiled loss (inside a strategy, a replica's mean over the number of
        replicas) plus the regularization losses (each also over the number of replicas). Sample weights weight
        the compiled loss, whose "sum_over_batch_size" still divides by the number of values."""
        replicas = context.get_strategy().num_replicas_in_sync
        losses = [] if self.loss is None else [self.loss.in_step(y, y_pred, sample_weight)]
        for penalty in self.losses:  # each scaled like the compiled loss (Keras' _aggregate_additional_loss)
            losses.append(penalty * penalty.dtype.type(1.0 / replicas) if replicas > 1 else penalty)
        if not losses:
            raise ValueError("No loss to compute. Provide a `loss` argument in `compile()`.")
        return add_n(losses)

    def compute_metrics(self, x: Any, y: Any, y_pred: Any, sample_weight: Any = None) -> dict[str, Any]:
        """Update the compiled metrics and return every metric's result (``get_metrics_result``), as Keras 3."""
        if self._compile_metrics is not None:
            self._compile_metrics.update_state(y, untracked(y_pred), sample_weight)
        return self.get_metrics_result()

    def train_step(self, data: Any) -> dict[str, Any]:
        """One replica's training step on its part of a batch; returns the logs for the batch's callbacks. Override
        it (and ``test_step``, ``predict_step``) to customize ``fit`` as in Keras; ``super().train_step`` works."""
        self._step(data, True)
        return self.get_metrics_result()

    def test_step(self, data: Any) -> dict[str, Any]:
        """One replica's evaluation step (see ``train_step``)."""
        self._step(data, False)
        return self.get_metrics_result()

    def predict_step(self, data: Any) -> Any:
        """One replica's outputs for its part of a batch (``data``: ``(x,)``, ``(x, y)`` or ``(x, y, weights)``)."""
        x, _, _ = unpack_x_y_sample_weight(data)
        return self(x, training=False)

    def _custom(self, step: str) -> bool:
        """Whether a subclass overrides the step named ``step`` (fit then runs it and logs what it returns)."""
        return getattr(type(self), step) is not getattr(Model, step)

    def _run_execution(self, step: str, batches: Iterator[Any]) -> tuple[int, Any]:
        """One execution of fit (``step`` "train_step") or evaluate ("test_step"): the step on each of its batches.
        Returns how many ran and the logs of the last for the batch callbacks: a subclass's own step's logs; else
        the built-in step's running metrics, read when a callback looks."""
        custom, train = self._custom(step), step == "train_step"
        count, logs = 0, None
        for batch in batches:
            if train:
                self._check_ema_overwrite()
            if custom:
                logs = self._run_step(step, batch)
            else:
                self._replica_step(step, batch)
                logs = BatchLogs(self._batch_logs)
            count += 1
        return count, logs

    def _replica_step(self, step: str, batch: Any) -> None:
        """The built-in train or test step on every local replica: stacked when ``stack_check`` allows (the same
        bits, fewer calls: see ``stacked_step``), else once per replica in ``strategy.run``."""
        refusal, shares = stack_check(self, step, batch)
        if refusal is None:
            run_stacked_step(self, shares, step == "train_step")
        else:
            self._strategy.run(self._step, args=(batch, step == "train_step"))

    def _check_ema_overwrite(self) -> None:
        """TF's error for ``ema_overwrite_frequency`` under a strategy: Keras overwrites the variables in a ``cond``
        inside the traced train step, where the strategy's ``merge_call`` cannot run (before any update)."""
        optimizer = self.optimizer
        if (not self._strategy._is_default and getattr(optimizer, "use_ema", False)
                and optimizer.ema_overwrite_frequency):
            raise RuntimeError(
                "Exception encountered when calling Cond.call().\n\n`merge_call` called while defining a new graph or "
                "a tf.function. (Keras overwrites the model's variables with their moving averages in a control flow "
                "statement inside the train step.)\nFix: leave ema_overwrite_frequency=None under a distribution "
                "strategy (fit still ends with the averages), or train outside the strategy.")

    def _run_step(self, step: str, batch: Any) -> dict[str, Any]:
        """A subclass's own step on every replica, and its logs as Keras reduces them (``_replica_mean``)."""
        return self._replica_mean(self._strategy.run(getattr(self, step), args=(batch,)))

    def _replica_mean(self, outputs: Any) -> Any:
        """Keras' ``reduce_per_replica`` "mean" of per-replica values in a nest: TF's ``reduce_mean`` of each value's
        local results, in replica order (on a cluster, the strategy's cluster-wide MEAN)."""
        strategy = self._strategy
        if strategy.extended._num_workers > 1:
            def reduce(value: Any) -> Any:
                return strategy.reduce("MEAN", value, axis=None)
        else:
            def reduce(value: Any) -> Any:
                return reduce_mean(np.stack([to_host(v) for v in strategy.experimental_local_results(value)]), axis=0)
        return nest.map_structure(lambda v: reduce(v) if isinstance(v, DistributedValues) else v, outputs)

    def _metrics_or_logs(self, logs: Any) -> Any:
        """Keras' ``_get_metrics_result_or_logs``: the model's metric results when the step's logs have the same
        names, else the last step's logs as they are (a custom step's own logs)."""
        results = self._results()
        return results if isinstance(logs, dict) and set(logs) == set(results) else logs

    def _callback_list(self, callbacks: Any, verbose: Any, steps: int | None) -> CallbackList:
        """``callbacks`` as one list for evaluate or predict (fit's own list as it is)."""
        if isinstance(callbacks, CallbackList):
            return callbacks
        return CallbackList(list(callbacks or []), self, {"epochs": 1, "steps": steps, "verbose": verbose})

    def _results(self) -> dict[str, float]:
        return {name: float(value) for name, value in self.get_metrics_result().items()}

    def _batch_logs(self) -> dict[str, float]:
        """A step's logs as Keras hands them to batch callbacks: it reduces its step's per-replica outputs, each
        replica's own metric results, with a float32 mean over this worker's replicas (so a partial batch's replicas
        count alike). On a cluster the results are cluster-wide (there TF 2.21's Keras fails: a scalar reduced on
        axis 0, tensorflow#72388)."""
        if self._strategy.num_replicas_in_sync == 1 or self._strategy.extended._num_workers > 1:
            return self._results()
        return {name: float(value)
                for name, value in self._replica_mean(self._strategy.run(self.get_metrics_result)).items()}

    def _reset_metrics(self) -> None:
        with self._strategy.scope():
            self.reset_metrics()

    def _print(self, verbose: Any, text: str) -> None:
        chief = getattr(self._strategy.extended, "should_checkpoint", True)
        if verbose and (verbose != "auto" or chief):
            print(text, flush=True)

    def fit(self, x: Any = None, y: Any = None, batch_size: int | None = None, epochs: int = 1,
            verbose: Any = "auto", callbacks: list[Callback] | None = None, validation_split: float = 0.0,
            validation_data: Any = None, shuffle: bool = True, class_weight: dict | None = None,
            sample_weight: Any = None, initial_epoch: int = 0, steps_per_epoch: int | None = None,
            validation_steps: int | None = None, validation_batch_size: int | None = None,
            validation_freq: int | list[int] = 1) -> History:
        """Train for ``epochs`` epochs on a dataset (global batches of ``(x, y)`` or ``(x, y, sample_weight)``), a
        distributed dataset or NumPy arrays (with ``sample_weight`` or ``class_weight``, a map from class id to
        weight, also applied to a dataset's labels).

        With ``steps_per_epoch`` one iterator runs across epochs, and data that ends starts a fresh pass in the next
        epoch (see ``EpochIterator``); without it every epoch iterates the whole dataset afresh. The model, its
        metrics and the optimizer are built from the first batch (``_build_from_first_batch``).
        ``validation_data`` (``(x, y)``, ``(x, y, sample_weight)`` or a dataset), or else the last
        ``validation_split`` of the arrays (taken before shuffling), is evaluated after the epochs ``validation_freq``
        picks (every n-th, or those listed, counting from 1), on the first ``validation_steps`` batches of a fresh
        pass, as Keras 3 does; its results enter the logs as ``val_<name>``."""
        if self._optimizer is None:
            raise ValueError("You must call `compile()` before using the model.")
        if validation_split and validation_data is None:
            (x, y, sample_weight), validation_data = train_validation_split((x, y, sample_weight), validation_split)
        val_x, val_y, val_sample_weight = unpack_x_y_sample_weight(validation_data)
        data = self._distributed(as_dataset(x, y, sample_weight, batch_size, steps_per_epoch, shuffle, class_weight))
        built = self._build_from_first_batch(data, training=True)
        history = History()
        cbs = CallbackList([*(callbacks or []), history], self,  # History last, as Keras adds it (it sees their logs)
                           {"epochs": epochs, "steps": steps_per_epoch, "verbose": verbose})
        self.stop_training = False
        self._initial_epoch = None
        cbs.on_train_begin()
        start = initial_epoch if self._initial_epoch is None else max(initial_epoch, self._initial_epoch)
        epoch_iterator = EpochIterator(data, steps_per_epoch, self.steps_per_execution)
        trained = False  # a step ran: from then on every epoch logs the metrics (reset ones after an empty epoch)
        training_logs = None
        custom, step_logs = self._custom("train_step"), {}  # (a subclass's own step: its last logs, as Keras keeps)
        for epoch in range(start, epochs):
            self._reset_metrics()
            cbs.on_epoch_begin(epoch)
            steps = 0
            for begin, end in epoch_iterator.steps():
                cbs.on_train_batch_begin(begin)
                if not built:  # Keras traces its step (and builds) before the step reads its batch
                    self._prepare_training(data)
                    self._check_trace()
                    built = True
                count, logs = self._run_execution("train_step", epoch_iterator.execution())
                if not count:
                    single = epoch_iterator.steps_per_execution == 1
                    if single and not self.run_eagerly and self.jit_compile is not True:
                        # TF's traced step runs what does not wait for the batch before its get_next fails (with
                        # several steps per execution, Keras asks for an optional batch first and runs nothing)
                        self.optimizer._step_without_data(self.trainable_variables)
                    break
                cbs.on_train_batch_end(end, logs)
                step_logs = logs if custom else step_logs
                trained, steps = True, steps + count
                if self.stop_training:
                    break
            logs = pythonify_logs(self._metrics_or_logs(step_logs)) if custom else self._results() if trained else {}
            if validation_data is not None and _should_validate(epoch, validation_freq):
                logs.update({f"val_{k}": v for k, v in self.evaluate(
                    val_x, val_y, batch_size=validation_batch_size or batch_size, sample_weight=val_sample_weight,
                    steps=validation_steps, callbacks=cbs, return_dict=True).items()})
            self._print(verbose, f"Epoch {epoch + 1}/{epochs} - {steps} steps - " +
                        " - ".join(f"{k}: {v:.4f}" for k, v in logs.items()))
            cbs.on_epoch_end(epoch, logs)
            training_logs = logs
            if self.stop_training:
                break
        if self.optimizer is not None and epochs > 0:
            self.optimizer.finalize_variable_values(self.trainable_weights)
        cbs.on_train_end(training_logs)
        return history

    def evaluate(self, x: Any = None, y: Any = None, batch_size: int | None = None, verbose: Any = "auto",
                 sample_weight: Any = None, steps: int | None = None, callbacks: Any = None,
                 return_dict: bool = False, **kwargs: Any) -> Any:
        """Loss (the mean of the batches' losses, weighted by their sizes) and metrics over the input (arrays, with
        optional ``sample_weight``, or a dataset of ``(x, y)`` or ``(x, y, sample_weight)``); as a list, in Keras'
        order: the loss, each compiled metric's log by the metric's own name, then the other logs by name.
        ``callbacks`` get the test hooks (fit's validation passes fit's own)."""
        if kwargs:
            raise ValueError(f"Arguments not recognized: {kwargs}")
        data = self._distributed(as_dataset(x, y, sample_weight, batch_size, steps))
        if not self._build_from_first_batch(data):
            self._prepare(data)
            self._check_trace()
        cbs = self._callback_list(callbacks, verbose, steps)
        self.stop_evaluating = False  # (a callback may set it to stop after its batch, as in Keras)
        cbs.on_test_begin()
        self._reset_metrics()
        batches = EpochIterator(data, steps, self.steps_per_execution)  # one epoch: ``steps`` batches or one pass
        count, custom, step_logs = 0, self._custom("test_step"), {}
        for begin, end in batches.steps():
            cbs.on_test_batch_begin(begin)
            ran, logs = self._run_execution("test_step", batches.execution())
            if not ran:
                break
            cbs.on_test_batch_end(end, logs)
            step_logs = logs if custom else step_logs
            count += ran
            if self.stop_evaluating:
                break
        logs = pythonify_logs(self._metrics_or_logs(step_logs) if custom else self._results() if count else {})
        cbs.on_test_end(logs)  # (no step: Keras returns empty logs)
        return logs if return_dict else self._flatten_metrics_in_order(logs)

    def _flatten_metrics_in_order(self, logs: dict[str, Any]) -> Any:
        """evaluate's list: the logs of ``metrics_names`` in that order (the compiled metrics' own names), then the
        others by name; one value alone."""
        names = [name for m in self.metrics
                 for name in ([c.name for c in m.metrics] if isinstance(m, CompileMetrics) else [m.name])]
        values = [logs[name] for name in names if name in logs] + [logs[key] for key in sorted(logs) if key not in names]
        return values[0] if len(values) == 1 else values

    def predict(self, x: Any, batch_size: int | None = None, verbose: Any = "auto", steps: int | None = None,
                callbacks: Any = None) -> Any:
        """Outputs for all of ``x``, in order, in batches of ``batch_size`` (32) for arrays: a dataset, a
        distributed dataset, or under a strategy of several replicas the arrays' batches, runs on every replica and
        the replicas' outputs are concatenated as Keras 3 does (partial and empty replica batches included; each
        replica reads its own copies of the variables, which differ for BatchNormalization's moving statistics);
        without one, arrays are computed locally; ``steps`` stops after that many batches. ``callbacks`` get the
        predict hooks (each batch's ``{"outputs": ...}``)."""
        local = not isinstance(x, (Dataset, DistributedDataset))
        if local:
            x = as_arrays(x)
            samples, size = len(first_leaf(x)), batch_size or 32
            if self._strategy.num_replicas_in_sync > 1 and samples:  # batches of (x,), as Keras' array adapter
                x, local = Dataset.from_tensor_slices((x,)).batch(size), False
            else:
                batches = EpochIterator((nest.map_structure(lambda a, i=i: a[i:i + size], x)
                                         for i in range(0, samples, size)), steps, self.steps_per_execution,
                                        num_batches=-(-samples // size))
        if not local:
            data = self._strategy.experimental_distribute_dataset(x) if isinstance(x, Dataset) else x
            batches = EpochIterator(data, steps, self.steps_per_execution)
            self._prepare(data)
        cbs = self._callback_list(callbacks, verbose, steps)
        self.stop_predicting = False  # (a callback may set it to stop after its batch, as in Keras)
        cbs.on_predict_begin()
        parts: list[Any] = []
        for begin, end in batches.steps():
            cbs.on_predict_batch_begin(begin)
            outputs = [output for batch in batches.execution() for output in self._predict_batch(batch, local)]
            if not outputs:
                break
            parts += outputs
            cbs.on_predict_batch_end(end, {"outputs": array_module(outputs[0]).concatenate(outputs, axis=0)})
            if self.stop_predicting:
                break
        cbs.on_predict_end()
        if not parts:
            return np.zeros((0,))
        return array_module(parts[0]).concatenate(parts, axis=0)

    def _predict_batch(self, batch: Any, local: bool) -> list[Any]:
        """One batch's outputs: computed here (``local``), else each replica's, in Keras' order."""
        if local:
            return [self.predict_step((batch,))]
        refusal, shares = stack_check(self, "predict_step", batch)
        if refusal is None:
            outputs = run_stacked_predict(self, shares)
        else:
            outputs = self._strategy.run(self.predict_step, args=(batch,))
        return [to_host(p) for p in self._replica_outputs(outputs)]

    def _replica_outputs(self, per_replica: Any) -> list[Any]:
        """One step's outputs of every replica in Keras' order: the local replicas' on one worker; on several, the
        gathered outputs taken replica index first (worker 0's first replica, worker 1's first replica, ...)."""
        strategy = self._strategy
        if strategy.extended._num_workers <= 1:
            return list(strategy.experimental_local_results(per_replica))
        gathered = to_host(strategy.gather(per_replica, axis=0))
        sizes = to_host(strategy.gather(strategy.run(lambda out: np.array([len(out)]), args=(per_replica,)), axis=0))
        pieces = np.split(gathered, np.cumsum(sizes)[:-1])
        per_worker = len(strategy.extended.worker_devices)
        return [piece for first in range(per_worker) for piece in pieces[first::per_worker]]


def _functional_arguments(args: tuple, kwargs: dict) -> bool:
    """Keras' test for a functional model's constructor arguments: inputs and outputs, by position or name."""
    return len(args) == 2 or (len(args) == 1 and "outputs" in kwargs) or {"inputs", "outputs"} <= set(kwargs)


@functools.cache
def _functional_subclass(cls: type, functional: type) -> type:
    """``cls`` with ``Functional`` after it among its bases, under its own name: its ``super().__init__(inputs,
    outputs)`` builds the graph."""
    return type(cls.__name__, (cls, functional), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})


class _DeprecatedCompiledMetrics:
    """What Keras 3's deprecated ``model.compiled_metrics`` gives: an ``update_state`` that warns and updates every
    metric of ``model.metrics`` (a Mean, the loss tracker too, takes the predictions, as there)."""

    def __init__(self, model: Model) -> None:
        self._model = model

    def update_state(self, y: Any, y_pred: Any, sample_weight: Any = None) -> None:
        warnings.warn("`model.compiled_metrics()` is deprecated. Instead, use e.g.:\n```\nfor metric in "
                      "self.metrics:\n    metric.update_state(y, y_pred)\n```\n", stacklevel=2)
        for metric in self._model.metrics:
            if isinstance(metric, metrics_lib.Mean):
                metric.update_state(y_pred, sample_weight=sample_weight)
            else:
                metric.update_state(y, y_pred, sample_weight=sample_weight)


def _replica_shape(spec: Any) -> tuple:
    """The static shape of one replica's part of a distributed dataset's element (a spec or a per-replica spec)."""
    return tuple((spec._value_specs[0] if isinstance(spec, PerReplicaSpec) else spec).shape)


def _should_validate(epoch: int, validation_freq: Any) -> bool:
    """Keras' ``validation_freq``: an int validates every that many epochs, a list the epochs it holds (from 1)."""
    if isinstance(validation_freq, int):
        return (epoch + 1) % validation_freq == 0
    if isinstance(validation_freq, list):
        return epoch + 1 in validation_freq
    raise ValueError("Expected `validation_freq` to be a list or int. Received: "
                     f"validation_freq={validation_freq} of the type {type(validation_freq)}.")


def model_from_json(json_string: str, custom_objects: dict[str, Any] | None = None) -> Model:
    """The model ``Model.to_json`` describes (new weights; the config's build makes them)."""
    return deserialize_keras_object(json.loads(json_string), custom_objects)


from .cloning import clone_model  # noqa: E402 (it builds on Model and its subclasses)
