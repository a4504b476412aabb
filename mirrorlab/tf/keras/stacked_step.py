"""Keras' train, test and predict steps of all this worker's local replicas as one stacked computation.

The replicas' batches are stacked on a leading replica axis and the layers run once on the stack, with the same
products as one replica's (``np.matmul`` multiplies each replica's matrix alone; Dense's weight gradients are each
replica's ``x.T @ dz``; sums stay each replica's, ``tf_sum_each``); so does the compiled loss when it declares it
(``Loss.stack_refusal``). What is per replica stays per replica, in that replica's context: the loss tracker and the
metrics (each replica's own copies), and the loss and its gradient w.r.t. the model's output for other losses. The
gradients go to the same all-reduce (each replica's share handed in as its own) and the
optimizer applies them once, as its ``merge_call`` does. So the weights, metrics and outputs are bit-identical to
``strategy.run`` of the step on each replica (tests/test_keras_stacked.py), at a fraction of the calls.

``stack_refusal`` is the rule that decides; anything it cannot prove identical runs per replica as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...aggregation import ReduceOp, VariableSynchronization
from ...distribute.distributed_variables import DistributedVariable
from ...distribute.regroup import regroup, select_replica
from ...distribute.stacked_run import StackedReplicas, run_stacked, stack_parts
from ...tensor import asarray, is_cupy
from ..autodiff import GradientTape, Tracked, untracked
from . import activations
from .data_adapter import unpack_x_y_sample_weight
from .layers import BuiltinLayer, Layer, stack_refusal_of
from .optimizers import Optimizer, _cast

if TYPE_CHECKING:
    from .models import Model

__all__ = ["stack_refusal", "stack_check", "chain", "run_stacked_step", "run_stacked_predict"]

def stack_refusal(model: "Model", step: str, batch: Any) -> str | None:
    """Why ``step`` of ``model`` on the distributed ``batch`` must run per replica, or None (see ``stack_check``)."""
    return stack_check(model, step, batch)[0]


def stack_check(model: "Model", step: str, batch: Any) -> tuple[str | None, list[tuple] | None]:
    """Why ``step`` ("train_step", "test_step" or "predict_step") of ``model`` on the distributed ``batch`` must run
    per replica, and None; or None and each replica's unpacked (x, y, sample_weight), which the stacked step reuses
    rather than split the batch again. It stacks when: the strategy has several local replicas on CPUs; the model
    (``model.stack_replicas`` left True) is a Sequential model, or a functional one whose layers form one chain
    (``chain``) and whose input takes the inputs as they are, of layers whose own class declares stacked execution
    (``stack_refusal`` defined in it, allowing these inputs), and it does not override its steps, ``compute_loss``
    or its call; every replica's inputs are one non-empty NumPy array, all of one shape; and, to train, there are
    no regularization losses and the optimizer neither clips nor overrides ``apply_gradients``."""
    from .models import Model  # (models imports this module)
    strategy = model._strategy
    ext = strategy.extended
    if not getattr(model, "stack_replicas", True):
        return "model.stack_replicas is False", None
    if strategy._is_default or len(ext._devices) < 2:
        return "one local replica", None
    if ext._placement.on_gpu:
        return "the replicas run on GPUs", None
    layers = chain(model)
    if layers is None:
        return "not a built Sequential model, nor a functional model whose layers form one chain", None
    overridden = [name for name in (step, "compute_loss", "_step", "__call__") if getattr(type(model), name)
                  is not getattr(Model, name)]
    if overridden:
        return f"{type(model).__name__} overrides {', '.join(overridden)}", None
    unpacked = [unpack_x_y_sample_weight(select_replica(k, batch)) for k in range(len(ext._devices))]
    shares = [share[0] for share in unpacked]
    if not all(isinstance(x, np.ndarray) for x in shares):
        return "the replicas' inputs are not single NumPy arrays", None
    if any(not x.ndim or not len(x) for x in shares):
        return "empty replica batches", None
    if len({x.shape for x in shares}) != 1:
        return "the replicas' batches differ in shape (a partial batch)", None
    shape = shares[0].shape
    if any(is_cupy(w._read()) for w in model.weights):
        return "the weights live on a GPU", None
    if any(getattr(v, "synchronization", None) != VariableSynchronization.ON_READ
           or not isinstance(v, DistributedVariable) for v in _metric_state(model)):
        return ("a compiled metric keeps variables that are not ON_READ copies of this strategy (their updates make "
                "the replicas meet)"), None
    if not model._in_sequence and (len(shape) != len(model.inputs[0].shape) or not _fits(model, shares[0])):
        return "the inputs need the functional model's conversions (rank, dtype or shape)", None
    refusal = _layers_refusal(layers, shape)
    if refusal is not None or step != "train_step":
        return refusal, None if refusal is not None else unpacked
    optimizer = model.optimizer
    if model.losses:
        return "the model has regularization losses", None
    if not model.trainable_variables:
        return "the model has no trainable weights", None
    if type(optimizer).apply_gradients is not Optimizer.apply_gradients or any(
            getattr(optimizer, clip) for clip in ("clipnorm", "clipvalue", "global_clipnorm")):
        return "the optimizer clips gradients or overrides apply_gradients", None
    return None, unpacked


def chain(model: "Model") -> list[Layer] | None:
    """The layers ``model`` applies one after the other: a built Sequential model's, or a functional model's whose
    graph is one chain (one input and output, each layer called once, on the previous one's output alone); None for
    other models."""
    from .functional import Functional  # (it builds on models, which imports this module)
    if model._in_sequence:
        return model.layers if model.built else None
    if type(model).call is not Functional.call or len(model.inputs) != 1 or len(model.outputs) != 1:
        return None
    previous, layers = model.inputs[0], []
    for node in model._nodes:
        if (len(node.args) != 1 or node.args[0] is not previous or node.kwargs or len(node.outputs) != 1
                or not isinstance(node.operation, Layer)):
            return None
        layers.append(node.operation)
        previous = node.outputs[0]
    return layers if previous is model.outputs[0] else None


def _metric_state(model: "Model") -> list[Any]:
    """The variables of the loss tracker and the compiled metrics: those made by ``add_variable`` and any other
    held as an attribute."""
    metrics = [m for m in [model._loss_tracker, *model._compiled_metric_list] if m is not None]
    return [*model._metric_variables(),
            *(v for m in metrics for v in vars(m).values() if hasattr(v, "synchronization") and hasattr(v, "assign"))]


def _fits(model: "Model", x: Any) -> bool:
    """Whether one replica's inputs enter a functional model as they are: its input's dtype, a fitting shape."""
    if x.dtype != np.dtype(model.inputs[0].dtype):
        return False
    try:
        model._check_inputs(x)
    except ValueError:
        return False
    return True


def _layers_refusal(layers: list[Layer], shape: tuple) -> str | None:
    """The first layer's refusal to run stacked on one replica's input of ``shape`` (then its output's), or None."""
    for layer in layers:
        refusal = stack_refusal_of(layer, shape)
        if refusal is not None:
            return refusal
        shape = layer.compute_output_shape(shape)
    return None


def run_stacked_step(model: "Model", shares: list[tuple], train: bool) -> None:
    """``model._step(batch, train)`` on every local replica, stacked, given the replicas' unpacked ``shares`` of the
    batch (``stack_check`` allowed it and returned them)."""
    run_stacked(model._strategy, lambda replicas: _step(model, replicas, shares, train))


def run_stacked_predict(model: "Model", shares: list[tuple]) -> Any:
    """``model.predict_step(batch)`` on every local replica, stacked, given the replicas' unpacked ``shares`` of the
    batch (``stack_check`` allowed it and returned them): the replicas' outputs (per-replica values)."""
    def step(replicas: StackedReplicas) -> Any:
        x = asarray(stack_parts([share[0] for share in shares]))
        model._check_input(x.shape[1:], False)
        out = _forward(chain(model), x, False)[-1][0]
        return regroup([out[k] for k in range(replicas.num_local)])
    return run_stacked(model._strategy, step)


def _forward(layers: list[Layer], x: Any, training: bool) -> list[tuple[Any, Any]]:
    """Each layer's stacked (output, cache), in order."""
    passes = []
    for layer in layers:
        x, cache = layer._stacked_forward(layer._convert_input(x), training)
        passes.append((x, cache))
    return passes


def _step(model: "Model", replicas: StackedReplicas, shares: list[tuple], train: bool) -> None:
    """Keras' step (``Model._step``) of all local replicas: forward stacked, the loss and metrics per replica, the
    backward pass stacked, then the optimizer's all-reduce and update as ``apply_gradients`` does them."""
    x = asarray(stack_parts([share[0] for share in shares]))  # (as a layer call converts its input)
    model._check_input(x.shape[1:], train)
    model._check_trace()
    layers = chain(model)
    passes = _forward(layers, x, train)
    out, cache = passes[-1]
    logits = layers[-1]._logits(cache)
    stacked = _stacked_loss(model, shares, out, logits)
    seeds, losses = [], [] if stacked is None else list(stacked[0])
    compiled = model._compile_metrics
    if stacked is None or compiled is None or not compiled.built or model._compiled_metric_list:
        for k, share in enumerate(shares):  # each replica's loss (unless stacked), then its metrics, as its step does
            with replicas.replica(k):
                out_k, logits_k = out[k], None if logits is None else logits[k]
                if stacked is None:
                    loss, seed = _replica_loss(model, layers[-1], share, out_k, logits_k, tuple(c[k] for c in cache),
                                               train)
                    seeds.append(seed)
                    losses.append(loss)
                _replica_metrics(model, share, out_k, logits_k)
    _track_losses(model, replicas, shares, losses)
    if not train:
        return
    if stacked is not None:
        _, top, from_logits = stacked
    else:
        top, from_logits = np.stack([np.asarray(s) for s in seeds]), logits is not None
    grads = _backward(layers, passes, asarray(top, (logits if from_logits else out).dtype), from_logits)
    variables = model.trainable_variables
    by_leaf = [list(_cast(grads[id(var)], var.dtype)) for var in variables]  # (each replica's slice)
    reduced = replicas.all_reduce(ReduceOp.SUM, by_leaf)
    optimizer = model.optimizer
    replicas.merge_call(lambda strategy: optimizer._apply(reduced, variables))


def _stacked_loss(model: "Model", shares: list[tuple], out: Any, logits: Any) -> tuple[Any, Any, bool] | None:
    """The compiled loss of all replicas at once: ``(losses, gradients, whether w.r.t. the logits)``; None when
    ``_loss_refusal`` refuses, or when it raises (labels out of range...): replica by replica, the error is then the
    one the first failing replica raises, with its own values, as in ``strategy.run``."""
    if _loss_refusal(model, shares, out) is not None:
        return None
    try:
        losses, grads, used = model.loss.stacked_in_step(
            stack_parts([share[1] for share in shares]), out if logits is None else activations.with_logits(out, logits))
    except Exception:  # noqa: BLE001 (recomputed per replica, which raises it as each replica would)
        return None
    return losses, grads, logits is not None and used is logits


def _loss_refusal(model: "Model", shares: list[tuple], out: Any) -> str | None:
    """Why the compiled loss cannot run on all replicas at once (then it runs replica by replica); None when it
    can: no regularization losses, no sample weights, labels of one shape, a loss that allows it."""
    if model.losses or model.loss is None:
        return "regularization losses, or no compiled loss"
    labels = [share[1] for share in shares]
    if any(share[2] is not None for share in shares) or not all(isinstance(y, np.ndarray) for y in labels):
        return "sample weights, or labels that are not arrays"
    if len({y.shape for y in labels}) != 1:
        return "the replicas' labels differ in shape"
    return model.loss.stack_refusal(labels[0].shape, out.shape[1:])


def _replica_loss(model: "Model", last: BuiltinLayer, share: tuple, out: Any, logits: Any, cache: tuple,
                  train: bool) -> tuple[Any, Any]:
    """One replica's loss, as ``Model._step`` computes it from the model's output (here a tape leaf standing for
    it, with its logits as ``differentiable`` gives them); returns it and its gradient w.r.t. that output (w.r.t.
    the logits when the output keeps them), None when not training."""
    x, y, sample_weight = share
    with GradientTape() as tape:
        leaf = Tracked(out if logits is None else logits, lambda g: [])
        if logits is None:
            y_pred = leaf
        else:
            result = Tracked(out, lambda g: [(leaf, last._activation_grad(cache, asarray(g, out.dtype)))], (leaf,))
            y_pred = activations.with_logits(result, leaf)
        loss = model.compute_loss(x, y, y_pred, sample_weight, training=train)
    return untracked(loss), (tape.gradient(loss, leaf) if train else None)


def _replica_metrics(model: "Model", share: tuple, out: Any, logits: Any) -> None:
    """One replica's compiled metrics, as ``Model._step`` updates them (on its own copies)."""
    x, y, sample_weight = share
    if logits is not None:
        activations.with_logits(out, logits)  # (metrics read the plain output)
    model._compile_metrics.update_state(y, out, sample_weight)


def _track_losses(model: "Model", replicas: StackedReplicas, shares: list[tuple], losses: list[Any]) -> None:
    """Every replica's loss tracker update, as ``Model._step`` makes it on the replica's own copies (the loss
    times the replicas in sync, one count per example): all at once for scalar losses, else replica by replica
    (an unreduced loss)."""
    replicas_in_sync = model._strategy.num_replicas_in_sync
    values = [np.asarray(loss) * replicas_in_sync if replicas_in_sync > 1 else np.asarray(loss) for loss in losses]
    weights = [np.float32(np.shape(share[0])[0]) for share in shares]
    if all(value.ndim == 0 for value in values):
        model._loss_tracker.update_each(values, weights)
        return
    for k, (value, weight) in enumerate(zip(values, weights)):
        with replicas.replica(k):
            model._loss_tracker.update_state(value, sample_weight=weight)


def _backward(layers: list[Layer], passes: list[tuple[Any, Any]], top: Any, from_logits: bool) -> dict[int, Any]:
    """Stacked weight gradients (replica axis first) by ``id`` of each trainable weight, from the loss gradient
    ``top`` w.r.t. the last layer's output (its logits when ``from_logits``), through every layer in reverse."""
    grads: dict[int, Any] = {}
    dy = top
    for i in reversed(range(len(layers))):
        layer, (out, cache) = layers[i], passes[i]
        if i == len(layers) - 1 and from_logits:
            dx, weight_grads = layer._stacked_backward_from_logits(cache, dy, i > 0)
        else:
            dx, weight_grads = layer._stacked_backward(cache, asarray(dy, out.dtype), i > 0)
        weights = [var for _, var in layer._weights if var._created_trainable]
        grads.update(zip(map(id, weights), weight_grads))
        dy = dx
    return grads
