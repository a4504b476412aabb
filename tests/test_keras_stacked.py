"""Stacked Keras steps (mirrorlab/tf/keras/stacked_step.py): bit-identical to one step per replica, and the rule
that decides when a step stacks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab.tf import keras
from mirrorlab.tf.keras import stacked_step
from mirrorlab.tf.keras.data_adapter import unpack_x_y_sample_weight
from mirrorlab.distribute.regroup import select_replica
from mirrorlab.sim import SimCluster

# (output activation, loss, labels): the common heads
HEADS = {
    "softmax+sparse": ("softmax", "sparse_categorical_crossentropy", "sparse"),
    "logits+sparse": (None, keras.losses.SparseCategoricalCrossentropy(from_logits=True), "sparse"),
    "softmax+categorical": ("softmax", "categorical_crossentropy", "one_hot"),
    "sigmoid+binary": ("sigmoid", "binary_crossentropy", "binary"),
    "linear+mse": (None, "mse", "one_hot"),
    "tanh+mae": ("tanh", "mae", "one_hot"),
    "linear+huber": (None, "huber", "one_hot"),  # (a loss without stacked execution: computed replica by replica)
    "linear+mse, flat labels": (None, "mse", "flat"),  # (broadcast against the outputs: only batches of 1 or 3 fit)
    "linear+mse, unreduced": (None, keras.losses.MeanSquaredError(reduction=None), "one_hot"),  # (a loss per example)
}


def make_model(hidden, head, optimizer, flatten, regularized=False, functional=False):
    """A Sequential MLP (or the same chain as a functional model): optional Flatten, Dense layers of ``hidden``
    (units, activation), the head's output (``regularized``: with an L2 penalty, so fit runs per replica and
    evaluate computes the loss per replica)."""
    activation, loss, _ = HEADS[head]
    layers = [keras.Input((2, 3) if flatten else (6,))] + ([keras.layers.Flatten()] if flatten else [])
    for i, (units, act) in enumerate(hidden):
        layers.append(keras.layers.Dense(units, activation=act, kernel_initializer=keras.initializers.GlorotUniform(i)))
    layers.append(keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(7),
                                     kernel_regularizer="l2" if regularized else None))
    if activation is not None:
        layers.append(keras.layers.Activation(activation))
    if functional:
        outputs = layers[0]
        for layer in layers[1:]:
            outputs = layer(outputs)
        model = keras.Model(layers[0], outputs)
    else:
        model = keras.Sequential(layers)
    opt = keras.optimizers.SGD(0.1, momentum=0.5) if optimizer == "sgd" else keras.optimizers.Adam(0.01)
    model.compile(optimizer=opt, loss=loss, metrics=["accuracy"] + (["mse"] if HEADS[head][2] != "sparse" else []))
    return model


def data(n, head, flatten, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2, 3) if flatten else (n, 6)).astype(np.float32)
    labels = rng.integers(0, 3, n)
    kind = HEADS[head][2]
    y = {"sparse": labels, "one_hot": np.eye(3, dtype=np.float32)[labels], "flat": labels.astype(np.float32),
         "binary": (rng.random((n, 3)) < 0.5).astype(np.float32)}[kind]
    return x, y


def train_evaluate_predict(stack, hidden, head, optimizer, flatten, n, batch, multi_worker, regularized=False,
                           functional=False):
    """fit (2 epochs), evaluate, predict; returns everything as bytes to compare bit for bit, and how many steps
    ran stacked."""
    strategy = ml.MultiWorkerMirroredStrategy() if multi_worker else ml.distribute.MirroredStrategy()
    x, y = data(n, head, flatten)
    with strategy.scope():
        model = make_model(hidden, head, optimizer, flatten, regularized, functional)
    model.stack_replicas = stack
    history = model.fit(md.Dataset.from_tensor_slices((x, y)).batch(batch), epochs=2, verbose=0)
    evaluated = model.evaluate(md.Dataset.from_tensor_slices((x, y)).batch(batch), verbose=0, return_dict=True)
    predicted = model.predict(md.Dataset.from_tensor_slices(x).batch(batch), verbose=0)
    weights = [w.numpy() for w in model.weights + model.optimizer.variables]
    return ([w.tobytes() for w in weights], repr(history.history), repr(evaluated), predicted.tobytes(),
            predicted.shape)


def count_stacked(monkeypatch):
    """Count the stacked steps (each runs the layers' stacked forward pass once; counted there, inside the step,
    because a test frame on the stack before the step starts would become the collectives' call site)."""
    calls = []
    original = stacked_step._forward

    def counted(*args):
        calls.append(1)
        return original(*args)
    monkeypatch.setattr(stacked_step, "_forward", counted)
    return calls


layer_specs = st.lists(st.tuples(st.integers(1, 9), st.sampled_from([None, "relu", "tanh", "sigmoid", "softmax"])),
                       max_size=2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hidden=layer_specs, head=st.sampled_from(sorted(HEADS)), optimizer=st.sampled_from(["sgd", "adam"]),
       flatten=st.booleans(), per_replica=st.integers(1, 4), extra=st.integers(0, 30),
       shape=st.sampled_from([(1, 2), (1, 3), (1, 4), (2, 2), (2, 3)]), regularized=st.booleans(),
       functional=st.booleans())
def test_stacked_steps_equal_per_replica_steps_bit_for_bit(monkeypatch, hidden, head, optimizer, flatten, per_replica,
                                                            extra, shape, regularized, functional):
    # The first global batch splits evenly (Keras builds from it, see UNEVEN_FIRST_BATCH); the last may be partial,
    # down to empty replica batches, which run per replica.
    calls = count_stacked(monkeypatch)
    workers, devices = shape
    batch = per_replica * workers * devices
    n = batch + extra
    args = (hidden, head, optimizer, flatten, n, batch, workers > 1, regularized, functional)
    stacked = outcome(SimCluster(workers, devices).run(train_evaluate_predict, True, *args))
    ran_stacked = len(calls)
    per_replica = outcome(SimCluster(workers, devices).run(train_evaluate_predict, False, *args))
    assert len(calls) == ran_stacked  # (stack_replicas=False never stacks)
    assert stacked == per_replica


def outcome(run):
    """A run's values, or its error's type and first line (labels that do not broadcast fail alike)."""
    try:
        return run.values()
    except Exception as error:  # noqa: BLE001 (compared, not hidden)
        return type(error).__name__, str(error).splitlines()[0]


@pytest.mark.parametrize("functional", [False, True])
def test_full_batches_of_a_common_model_run_stacked(monkeypatch, functional):
    # 32 examples in global batches of 8 on 4 replicas: every step of fit (2 epochs x 4), evaluate (4) and predict
    # (4) stacks, and the results are those of the per-replica steps.
    calls = count_stacked(monkeypatch)
    args = ([(5, "relu")], "softmax+sparse", "adam", False, 32, 8, False, False, functional)
    stacked = SimCluster(1, 4).run(train_evaluate_predict, True, *args).values()
    assert len(calls) == 16
    assert stacked == SimCluster(1, 4).run(train_evaluate_predict, False, *args).values()


def first_batch(strategy, x, y, batch):
    return next(iter(strategy.experimental_distribute_dataset(md.Dataset.from_tensor_slices((x, y)).batch(batch))))


def refusals(devices=4):
    """stack_refusal's answer for a plain model and for each thing that must fall back to per-replica steps."""
    strategy = ml.distribute.MirroredStrategy()
    x, y = data(16, "softmax+sparse", False)
    full, uneven, empty = (first_batch(strategy, x[:n], y[:n], n) for n in (8, 7, 2))

    def refusal(layers, batch=full, step="train_step", compile_args=dict, cls=keras.Sequential, stack=True):
        with strategy.scope():
            model = cls([keras.Input((6,)), *layers]) if isinstance(layers, list) else layers()
            model.compile(**{"optimizer": "sgd", "loss": "sparse_categorical_crossentropy", **compile_args()})
        model.stack_replicas = stack
        model._build_from_first_batch(strategy.experimental_distribute_dataset(  # (as fit: metrics built from data)
            md.Dataset.from_tensor_slices((x[:8], y[:8])).batch(8)), training=True)
        return stacked_step.stack_refusal(model, step, batch)

    class OwnDense(keras.layers.Dense):
        pass

    class OnWrite(keras.metrics.Metric):  # a metric whose variable every update all-reduces (ON_WRITE, SUM)
        def __init__(self):
            super().__init__(name="on_write")
            self.total = ml.Variable(0.0, aggregation=ml.VariableAggregation.SUM)

        def update_state(self, y_true, y_pred, sample_weight=None):
            self.total.assign_add(np.float32(1.0))

        def result(self):
            return self.total.value()

    class OwnStep(keras.Sequential):
        def train_step(self, data):
            return super().train_step(data)

    dense = keras.layers.Dense

    def functional(branches=False, dtype="float32"):
        def build():
            inputs = keras.Input((6,), dtype=dtype)
            outputs = dense(3)(inputs)
            return keras.Model(inputs, keras.layers.Add()([outputs, dense(3)(inputs)]) if branches else outputs)
        return build

    return {
        "functional": refusal(functional()),
        "functional with branches": refusal(functional(branches=True)),
        "functional float64 input": refusal(functional(dtype="float64")),
        "plain": refusal([dense(4, activation="relu"), dense(3, activation="softmax")]),
        "predict": refusal([dense(3)], step="predict_step"),
        "dropout": refusal([keras.layers.Dropout(0.5), dense(3)]),
        "batch norm": refusal([keras.layers.BatchNormalization(), dense(3)]),
        "custom activation": refusal([dense(3, activation=lambda z: z * 2.0)]),
        "gelu": refusal([dense(3, activation="gelu")]),
        "wide softmax": refusal([dense(9000, activation="softmax")]),
        "dense subclass": refusal([OwnDense(3)]),
        "regularizer": refusal([dense(3, kernel_regularizer="l2")]),
        "regularizer, evaluating": refusal([dense(3, kernel_regularizer="l2")], step="test_step"),
        "clipnorm": refusal([dense(3)], compile_args=lambda: {"optimizer": keras.optimizers.SGD(clipnorm=1.0)}),
        "on-write metric": refusal([dense(3)], compile_args=lambda: {"metrics": [OnWrite()]}),
        "own train_step": refusal([dense(3)], cls=OwnStep),
        "own train_step, evaluating": refusal([dense(3)], step="test_step", cls=OwnStep),
        "stack_replicas False": refusal([dense(3)], stack=False),
        "uneven batch": refusal([dense(3)], batch=uneven),
        "empty replica batches": refusal([dense(3)], batch=empty),
    }


def test_stack_refusal_names_what_falls_back_to_per_replica_steps():
    got = SimCluster(1, 4).run(refusals).values()[0]
    assert got["plain"] is None and got["predict"] is None and got["functional"] is None
    assert got["regularizer, evaluating"] is None and got["own train_step, evaluating"] is None
    expected = {"dropout": "Dropout", "batch norm": "BatchNormalization", "custom activation": "no stacked execution",
                "gelu": "'gelu' has no stacked execution", "wide softmax": "softmax over 9000",
                "dense subclass": "OwnDense", "regularizer": "regularization", "clipnorm": "clips",
                "own train_step": "overrides train_step", "stack_replicas False": "stack_replicas",
                "uneven batch": "differ in shape", "empty replica batches": "empty",
                "functional with branches": "one chain", "functional float64 input": "conversions",
                "on-write metric": "not ON_READ"}
    for case, words in expected.items():
        assert got[case] is not None and words in got[case], (case, got[case])


@settings(max_examples=25, deadline=None)
@given(shape=st.sampled_from([(1, 8), (2, 4), (1, 1)]), n=st.integers(1, 20))
def test_stack_check_hands_the_step_each_replicas_share_of_the_batch_or_a_reason(shape, n):
    """The shares ``stack_check`` returns (and the stacked step reuses) are each replica's own (x, y, weight) of the
    batch, as a per-replica step unpacks it; a refusal returns none."""
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        x, y = data(40, "softmax+sparse", False)
        with strategy.scope():
            model = make_model([], "softmax+sparse", "sgd", False)
        batch = first_batch(strategy, x, y, n)
        refusal, shares = stacked_step.stack_check(model, "train_step", batch)
        if refusal is not None:
            return refusal == stacked_step.stack_refusal(model, "train_step", batch) and shares is None
        want = [unpack_x_y_sample_weight(select_replica(k, batch)) for k in range(shape[1])]
        return all(got[0].tobytes() == exp[0].tobytes() and got[1].tobytes() == exp[1].tobytes() and got[2] is None
                   for got, exp in zip(shares, want, strict=True))
    assert all(SimCluster(*shape).run(program).values())


def test_one_local_replica_never_stacks():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        x, y = data(8, "softmax+sparse", False)
        with strategy.scope():
            model = make_model([], "softmax+sparse", "sgd", False)
        return stacked_step.stack_refusal(model, "train_step", first_batch(strategy, x, y, 8))
    assert SimCluster(2, 1).run(program).values() == ["one local replica"] * 2


@pytest.mark.parametrize("shape", [(3, 1, 5), (2, 17, 10), (4, 32, 128), (2, 16, 1), (3, 20, 9)])
def test_tf_sum_each_sums_each_slab_as_alone(shape):
    from mirrorlab.tf._kernels.summation import tf_sum, tf_sum_each
    values = (np.random.default_rng(1).standard_normal(shape) * 1e3).astype(np.float32)
    assert tf_sum_each(values).tobytes() == np.stack([tf_sum(v, axis=0) for v in values]).tobytes()


@pytest.mark.parametrize("shape", [(1, 4), (2, 3)])
def test_stacked_steps_leave_the_same_trace_as_per_replica_steps(shape):
    # Same collectives, call sites, virtual times and seeded replica-order draws: the trace (values recorded) is the
    # same byte for byte, so replays and diagnostics do not depend on stacking. Global batches of 2 per replica, the
    # last one partial (which runs per replica).
    replicas = shape[0] * shape[1]
    args = ([(5, "relu")], "softmax+sparse", "adam", False, replicas * 3 + 1, replicas * 2, shape[0] > 1)
    runs = [SimCluster(*shape, seed=3, trace_values=True).run(train_evaluate_predict, stack, *args)
            for stack in (True, False)]
    assert runs[0].values() == runs[1].values()
    assert runs[0].trace.to_jsonl() == runs[1].trace.to_jsonl()


def test_losses_that_compute_rows_apart_stack_and_others_are_computed_replica_by_replica():
    losses = keras.losses
    dense, sparse = ((8, 10), (8, 10)), ((8,), (8, 10))
    assert all(loss.stack_refusal(*shapes) is None for loss, shapes in (
        (losses.SparseCategoricalCrossentropy(), sparse), (losses.SparseCategoricalCrossentropy(), ((8, 1), (8, 10))),
        (losses.CategoricalCrossentropy(from_logits=True), dense), (losses.MeanSquaredError(), dense),
        (losses.BinaryCrossentropy(label_smoothing=0.1), dense), (losses.MeanAbsoluteError(), dense)))
    refused = {"no stacked execution": losses.Huber(), "reduces with 'sum'": losses.MeanSquaredError(reduction="sum"),
               "over axis 0": losses.CategoricalCrossentropy(axis=0),
               "ignore_class": losses.SparseCategoricalCrossentropy(ignore_class=0)}
    for words, loss in refused.items():
        assert words in loss.stack_refusal(*(sparse if "ignore" in words else dense))
    assert "rows of 9000 values" in losses.MeanSquaredError().stack_refusal((8, 9000), (8, 9000))
    # labels broadcast against the predictions: Keras matches ranks, which a replica axis would shift
    assert "broadcasts labels of shape (8,)" in losses.MeanSquaredError().stack_refusal((8,), (8, 10))
    assert "broadcasts" in losses.SparseCategoricalCrossentropy().stack_refusal((8, 10), (8, 10))

    class OwnLoss(losses.MeanSquaredError):
        pass
    assert "OwnLoss" in OwnLoss().stack_refusal(*dense)


def fit_with_labels_out_of_range(stack):
    strategy = ml.distribute.MirroredStrategy()
    x, y = data(16, "softmax+sparse", False)
    y[5], y[6] = 7, 9  # replica 2 of the first batch holds both; 7 is reported, as that replica's kernel does
    with strategy.scope():
        model = make_model([], "softmax+sparse", "sgd", False)
    model.stack_replicas = stack
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)


def test_a_stacked_loss_that_raises_raises_the_first_failing_replicas_error():
    stacked, per_replica = (outcome(SimCluster(1, 4).run(fit_with_labels_out_of_range, stack))
                            for stack in (True, False))
    assert stacked == per_replica
    assert "Received a label value of 7" in stacked[1] and "Label values: 0 7 [" in stacked[1]


@settings(max_examples=40, deadline=None)
@given(shape=st.tuples(st.integers(1, 4), st.integers(0, 9), st.integers(1, 12)), from_logits=st.booleans(),
       ignore=st.sampled_from([None, 0, 2]), seed=st.integers(0, 99))
def test_sparse_cross_entropy_call_and_grad_equal_call_and_grad(shape, from_logits, ignore, seed):
    """The stacked step's fused loss and gradient (shared softmax terms) give ``call`` and ``grad``'s bits."""
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal(shape) * 4).astype(np.float32)
    y_pred = logits if from_logits else (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    labels = rng.integers(0, shape[-1], shape[:-1])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits, ignore_class=ignore)
    upstream = rng.standard_normal(shape[:-1]).astype(np.float32)
    fused_losses, fused_grad = loss.call_and_grad(labels, y_pred, lambda per_example: upstream)
    assert fused_losses.tobytes() == np.asarray(loss.call(labels, y_pred)).tobytes()
    assert fused_grad.tobytes() == np.asarray(loss.grad(labels, y_pred, upstream)).tobytes()
