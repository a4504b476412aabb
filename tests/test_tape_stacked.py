"""A TF-style custom training loop (GradientTape over Keras layers and losses, ``compute_average_loss``, the
optimizer's ``apply_gradients``) declared ``@batch_safe``: run stacked by ``strategy.run``, with the results and trace
of one call per replica, and refused with the op and the fix where an op cannot stack."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mirrorlab.tf as ml
from mirrorlab.distribute import batch_safe as batch_safe_module
from mirrorlab.distribute.batch_safe import batch_safe, stacked_replicas
from mirrorlab.sim import SimCluster
from mirrorlab.tf import keras

# (output activation, loss, labels)
HEADS = {
    "logits+sparse": (None, lambda r: keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=r),
                      "sparse"),
    "softmax+sparse": ("softmax", lambda r: keras.losses.SparseCategoricalCrossentropy(reduction=r), "sparse"),
    "softmax+categorical": ("softmax", lambda r: keras.losses.CategoricalCrossentropy(reduction=r), "one_hot"),
    "sigmoid+binary": ("sigmoid", lambda r: keras.losses.BinaryCrossentropy(reduction=r), "binary"),
    "linear+mse": (None, lambda r: keras.losses.MeanSquaredError(reduction=r), "one_hot"),
    "tanh+mae": ("tanh", lambda r: keras.losses.MeanAbsoluteError(reduction=r), "one_hot"),
}


def make_model(hidden, activation, flatten, functional):
    """An MLP of Dense layers (``hidden``: units and activation), a 3-unit output and its activation."""
    layers = [keras.Input((2, 3) if flatten else (6,))] + ([keras.layers.Flatten()] if flatten else [])
    for i, (units, act) in enumerate(hidden):
        layers.append(keras.layers.Dense(units, activation=act, kernel_initializer=keras.initializers.GlorotUniform(i)))
    layers.append(keras.layers.Dense(3, activation=activation, kernel_initializer=keras.initializers.GlorotUniform(7)))
    if not functional:
        return keras.Sequential(layers)
    outputs = layers[0]
    for layer in layers[1:]:
        outputs = layer(outputs)
    return keras.Model(layers[0], outputs)


def tape_loop(safe, hidden, head, reduction, optimizer, flatten, functional, per_replica, uneven, steps):
    """``steps`` steps of a custom loop; returns the weights, the optimizer's state and each replica's loss as bytes,
    and how many calls ran stacked.
    ``uneven``: odd replicas get one more example (their batches differ in shape: the function runs per replica)."""
    strategy = ml.MultiWorkerMirroredStrategy()
    n = strategy.num_replicas_in_sync
    activation, make_loss, kind = HEADS[head]
    rng = np.random.default_rng(per_replica)
    size = n * (per_replica + 1)
    x = rng.standard_normal((size, 2, 3) if flatten else (size, 6)).astype(np.float32)
    labels = rng.integers(0, 3, size)
    y = {"sparse": labels, "one_hot": np.eye(3, dtype=np.float32)[labels],
         "binary": (rng.random((size, 3)) < 0.5).astype(np.float32)}[kind]
    with strategy.scope():
        model = make_model(hidden, activation, flatten, functional)
        opt = keras.optimizers.SGD(0.1, momentum=0.5) if optimizer == "sgd" else keras.optimizers.Adam(0.01)
    loss_fn = make_loss(reduction)

    stacked_calls = []

    def step(xb, yb):
        stacked_calls.append(stacked_replicas() is not None)
        with ml.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
            if reduction is None:
                loss = ml.nn.compute_average_loss(loss, global_batch_size=n * per_replica)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    def share(a):
        def replica(c):
            first = c.replica_id_in_sync_group * (per_replica + 1)
            return a[first:first + per_replica + (c.replica_id_in_sync_group % 2 if uneven else 0)]
        return strategy.experimental_distribute_values_from_function(replica)

    fn = batch_safe(step) if safe else step
    xs, ys = share(x), share(y)
    losses = []
    for _ in range(steps):
        out = strategy.run(fn, args=(xs, ys))
        losses += [(type(v).__name__, np.asarray(v).tobytes()) for v in strategy.experimental_local_results(out)]
    return [w.numpy().tobytes() for w in model.weights + opt.variables], losses, sum(stacked_calls)


def count_stacked(monkeypatch):
    """Count the stacked runs (the replica context of each stacked call is made once)."""
    calls = []
    original = batch_safe_module.BatchSafeReplicaContext.__init__

    def counted(self, *args):
        calls.append(1)
        original(self, *args)
    monkeypatch.setattr(batch_safe_module.BatchSafeReplicaContext, "__init__", counted)
    return calls


@settings(max_examples=40, deadline=None)
@given(hidden=st.lists(st.tuples(st.integers(1, 9), st.sampled_from([None, "relu", "tanh", "sigmoid", "softmax"])),
                       max_size=2),
       head=st.sampled_from(sorted(HEADS)), reduction=st.sampled_from([None, "sum_over_batch_size", "sum"]),
       optimizer=st.sampled_from(["sgd", "adam"]), flatten=st.booleans(), functional=st.booleans(),
       per_replica=st.integers(0, 5), uneven=st.booleans(), steps=st.integers(1, 3),
       shape=st.sampled_from([(1, 2), (1, 3), (1, 4), (2, 2), (2, 3)]))
def test_a_batch_safe_tape_loop_gives_the_results_and_trace_of_per_replica_calls(
        hidden, head, reduction, optimizer, flatten, functional, per_replica, uneven, steps, shape):
    args = (hidden, head, reduction, optimizer, flatten, functional, per_replica, uneven, steps)
    runs = [SimCluster(*shape, trace_values=True).run(tape_loop, safe, *args) for safe in (True, False)]
    (stacked, per_replica) = ([value[:2] for value in run.values()] for run in runs)
    assert stacked == per_replica
    assert runs[0].trace.to_jsonl() == runs[1].trace.to_jsonl()
    ran_stacked = sum(value[2] for value in runs[0].values())
    assert ran_stacked == (0 if uneven or shape[1] == 1 else steps * shape[0])


def test_equal_replica_batches_run_the_tape_loop_stacked(monkeypatch):
    calls = count_stacked(monkeypatch)
    SimCluster(1, 4).run(tape_loop, True, [(5, "relu")], "logits+sparse", None, "sgd", False, False, 8, False, 3)
    assert len(calls) == 3
    SimCluster(1, 4).run(tape_loop, True, [(5, "relu")], "logits+sparse", None, "sgd", False, False, 8, True, 3)
    assert len(calls) == 3  # (uneven batches: per replica)


def refused(what):
    """A stacked tape step using something that cannot stack."""
    strategy = ml.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    layers = [keras.Input((4,)), keras.layers.Dense(3)]
    if what == "dropout":
        layers.insert(1, keras.layers.Dropout(0.5, name="dropout"))
    if what == "lambda":
        layers.insert(1, keras.layers.Lambda(ml.nn.relu, name="lambda"))
    with strategy.scope():
        model = keras.Sequential(layers)
        w = ml.Variable(np.ones((3, 3), np.float32))
        opt = keras.optimizers.SGD(0.1, clipnorm=1.0 if what == "clipnorm" else None)
    loss_fn = (keras.losses.Huber(reduction=None) if what == "huber" else
               keras.losses.MeanSquaredError(reduction=None))
    xs = strategy.experimental_distribute_values_from_function(lambda c: np.ones((2, 4), np.float32))
    ys = strategy.experimental_distribute_values_from_function(lambda c: np.zeros((2, 3), np.float32))

    @batch_safe
    def step(xb, yb):
        variables = model.trainable_variables + ([w] if what == "weight read outside a layer" else [])
        with ml.GradientTape() as tape:
            out = model(xb, training=True)
            if what == "weight read outside a layer":
                out = out @ w
            weights = np.ones(yb.shape[:-1], np.float32) if what == "sample weights" else None
            loss = ml.nn.compute_average_loss(loss_fn(yb, out, sample_weight=weights), global_batch_size=4)
            if what == "loss of the whole stack":
                loss = ml.reduce_sum(loss)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss
    return strategy.run(step, args=(xs, ys))


@pytest.mark.parametrize("what, words", [
    ("dropout", "layer 'dropout' (Dropout) does not declare stacked execution"),
    ("lambda", "layer 'lambda' (Lambda) does not declare stacked execution"),
    ("huber", "loss 'huber_loss' (Huber) has no stacked execution"),
    ("sample weights", "sample weights: loss 'mean_squared_error'"),
    ("clipnorm", "clips by norm"),
    ("weight read outside a layer", "mixes the 2 local replicas"),
    ("loss of the whole stack", "target has shape ()")])
def test_what_a_stacked_tape_loop_cannot_do_raises_naming_it_with_the_fix(what, words):
    with pytest.raises(NotImplementedError, match=re.escape(words)) as caught:
        refused(what)
    assert "Fix:" in str(caught.value) and "@batch_safe" in str(caught.value)


def test_the_same_loop_without_batch_safe_runs_per_replica_as_before():
    """(What is refused stacked is a matter of the declaration: per replica, the same loop trains.)"""
    strategy = ml.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dropout(0.5), keras.layers.Dense(3)])
        opt = keras.optimizers.SGD(0.1)
    xs = strategy.experimental_distribute_values_from_function(lambda c: np.ones((2, 4), np.float32))

    def step(xb):
        with ml.GradientTape() as tape:
            loss = ml.nn.compute_average_loss(ml.reduce_sum(model(xb, training=True), axis=1), global_batch_size=4)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    strategy.run(step, args=(xs,))
    assert int(opt.iterations.numpy()) == 1
