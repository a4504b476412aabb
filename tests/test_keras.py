"""mirrorlab.tf.keras on simulated clusters: exact global gradients, determinism, BackupAndRestore."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab import errors
from mirrorlab.tf import keras
from mirrorlab.tf.keras.compile_metrics import CompileMetrics
from mirrorlab.sim import Crash, SimCluster

RNG = np.random.default_rng(0)
X = RNG.standard_normal((52, 6)).astype(np.float32)
Y = np.argmax(X @ RNG.standard_normal((6, 3)), axis=1)


def build_model(optimizer="adam"):
    model = keras.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(6,),
                                                 kernel_initializer=keras.initializers.GlorotUniform(seed=1)),
                              keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(seed=2))])
    opt = keras.optimizers.Adam(0.05) if optimizer == "adam" else keras.optimizers.SGD(0.1, momentum=0.9)
    model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def train_program(epochs=3, batch=16, optimizer="adam", callbacks_fn=None, data=(X, Y)):
    strategy = ml.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = build_model(optimizer)
    callbacks = callbacks_fn() if callbacks_fn else None
    history = model.fit(md.Dataset.from_tensor_slices(data).batch(batch), epochs=epochs, verbose=0,
                        callbacks=callbacks)
    return [w.numpy() for w in model.weights], history.history, history.epoch


def test_fit_on_a_cluster_equals_fit_on_one_device_when_batches_split_evenly():
    # 48 examples in global batches of 12: 2, 4 and 3 examples per replica on 6, 3 and 4 replicas.
    x, y = X[:48], Y[:48]
    single = SimCluster(workers=1).run(train_program, 3, 12, "adam", None, (x, y)).values()[0]
    for workers, devices in ((2, 3), (3, 1), (1, 4)):
        run = SimCluster(workers=workers, devices_per_worker=devices).run(train_program, 3, 12, "adam", None, (x, y))
        for weights, history, _ in run.values():
            for a, b in zip(weights, single[0]):
                np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
            np.testing.assert_allclose(history["loss"], single[1]["loss"], rtol=1e-4)
            assert history["accuracy"] == pytest.approx(single[1]["accuracy"], abs=1e-6)
    assert single[1]["loss"][-1] < single[1]["loss"][0]


def test_steps_per_execution_on_a_cluster_trains_as_one_step_per_call():
    # TF 2.21's Keras fails under any strategy when steps_per_execution > 1 (InvalidArgumentError "You must feed a
    # value for placeholder tensor" from its while loop); mirrorlab runs the executions: the same weights and logs as
    # one step per call, the batch callbacks once per execution (the case fit_steps_per_execution has the rest).
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(20, 3)).astype(np.float32), rng.integers(0, 3, 20)

    def program(per_execution):
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
            model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                          metrics=["accuracy"], steps_per_execution=per_execution)
        model.set_weights([np.full((3, 3), 0.1, np.float32), np.zeros(3, np.float32)])
        calls = []
        hook = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda batch, logs: calls.append(batch),
                                              on_train_batch_end=lambda batch, logs: calls.append(batch))
        data = md.Dataset.from_tensor_slices((x, y)).batch(4)  # 5 global batches, 1 per replica in the last
        history = model.fit(data, epochs=2, verbose=0, callbacks=[hook])
        return model.get_weights(), history.history, calls, int(model.optimizer.iterations.numpy())

    one = SimCluster(workers=2, devices_per_worker=2).run(program, 1).values()
    two = SimCluster(workers=2, devices_per_worker=2).run(program, 2).values()
    for (w1, h1, c1, i1), (w2, h2, c2, i2) in zip(one, two):
        assert all(np.array_equal(a, b) for a, b in zip(w1, w2)) and h1 == h2 and i1 == i2 == 10
        assert c1 == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4] * 2 and c2 == [0, 1, 2, 3, 4, 5] * 2


def test_fit_scales_an_uneven_last_batch_as_keras_on_tf_does():
    # After an even first batch (Keras builds from it; an uneven first batch fails there, as TF's AddN), 3 examples
    # in one global batch over 2 replicas ([2] and [1] examples): Keras 3 on TF 2.21 averages the two replicas'
    # mean gradients (not the global mean), and the loss metric weights by batch size.
    x = np.array([[0.0, 0.2], [0.4, 0.6], [0.8, 1.0]], np.float32)
    y = np.array([[1.0], [0.0], [2.0]], np.float32)
    kernel, bias = np.array([[0.5], [-0.25]], np.float32), np.array([0.1], np.float32)
    exact = (np.zeros((2, 2), np.float32), np.full((2, 1), 0.1, np.float32))  # predicted exactly: no gradient

    def program(first_batch):
        strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
            model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        model.set_weights([kernel, bias])
        data = md.Dataset.from_tensor_slices((x, y)).batch(3)
        if first_batch is not None:
            data = md.Dataset.from_tensor_slices(first_batch).batch(2).concatenate(data)
        history = model.fit(data, epochs=1, verbose=0)
        return model.get_weights(), history.history["loss"][0]

    weights, loss = program(exact)
    err = x @ kernel + bias - y
    grads = [(2 * x[part].T @ err[part] / len(part), 2 * err[part].sum(0) / len(part)) for part in ([0, 1], [2])]
    np.testing.assert_allclose(weights[0], kernel - 0.1 * (grads[0][0] + grads[1][0]) / 2, rtol=1e-6)
    np.testing.assert_allclose(weights[1], bias - 0.1 * (grads[0][1] + grads[1][1]) / 2, rtol=1e-6)
    assert loss == pytest.approx(float((err ** 2).sum() / 5), rel=1e-6)
    with pytest.raises(errors.InvalidArgumentError, match="(?s)Input 0: \\[2,2\\] != input 1: \\[1,2\\].*Fix: Keras"):
        program(None)


def test_training_is_bit_identical_across_scheduler_seeds():
    runs = [SimCluster(workers=2, devices_per_worker=2, seed=s).run(train_program, 2, 16, "sgd").values()
            for s in range(4)]
    reference = [w.tobytes() for w in runs[0][0][0]]
    for run in runs:
        for weights, _, _ in run:
            assert [w.tobytes() for w in weights] == reference


def test_backup_and_restore_after_a_worker_crash_matches_an_uninterrupted_run(tmp_path):
    backup = lambda: [keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))]  # noqa: E731
    uninterrupted = SimCluster(workers=2).run(train_program, 4, 16, "adam").values()[0]
    # 4 steps per epoch: step 10 is in epoch 3; epochs 1 and 2 are backed up.
    crashed = SimCluster(workers=2, faults=[Crash(1, at_step=10)]).run(train_program, 4, 16, "adam", backup)
    assert isinstance(crashed[1], errors.SimulatedCrash) and isinstance(crashed[0], errors.UnavailableError)
    assert (tmp_path / "backup" / "chief").is_dir()
    resumed = SimCluster(workers=2).run(train_program, 4, 16, "adam", backup).values()
    for weights, _, epochs in resumed:
        assert epochs == [2, 3]
        assert [w.tobytes() for w in weights] == [w.tobytes() for w in uninterrupted[0]]
    assert not (tmp_path / "backup" / "chief").exists()


class WeightLog(keras.callbacks.Callback):
    """Appends the model's weights to ``log[task_id]`` after every batch (``when="batch"``) or once the
    training begins (``when="begin"``, i.e. after BackupAndRestore restored them)."""

    def __init__(self, log: dict, when: str) -> None:
        super().__init__()
        self.log, self.when = log, when

    def _record(self) -> None:
        task = self.model.distribute_strategy.cluster_resolver.task_id
        self.log.setdefault(task, []).append([w.numpy().tobytes() for w in self.model.weights])

    def on_train_begin(self, logs=None):
        if self.when == "begin":
            self._record()

    def on_train_batch_end(self, batch, logs=None):
        if self.when == "batch":
            self._record()


def test_backup_every_n_batches_restarts_the_interrupted_epoch_from_the_mid_epoch_weights(tmp_path):
    # TF 2.21 (Keras 3): save_freq=3 saves after global batches 3, 6 and 9 (4 per epoch); the crash at step 10
    # resumes at epoch 2 (the interrupted one, from its start) with the weights saved after batch 9.
    backup = str(tmp_path / "backup")
    after_batch: dict = {}
    restored: dict = {}
    crashed = SimCluster(workers=2, faults=[Crash(1, at_step=10)]).run(
        train_program, 4, 16, "adam",
        lambda: [keras.callbacks.BackupAndRestore(backup, save_freq=3), WeightLog(after_batch, "batch")])
    assert isinstance(crashed[1], errors.SimulatedCrash)
    assert len(after_batch[0]) >= 9
    resumed = SimCluster(workers=2).run(
        train_program, 4, 16, "adam",
        lambda: [keras.callbacks.BackupAndRestore(backup, save_freq=3), WeightLog(restored, "begin")])
    assert [epochs for _, _, epochs in resumed.values()] == [[2, 3], [2, 3]]
    assert restored[0] == restored[1] == [after_batch[0][8]]


def test_backup_and_restore_rejects_a_bad_save_freq(tmp_path):
    with pytest.raises(ValueError, match="save_freq=0"):
        keras.callbacks.BackupAndRestore(str(tmp_path), save_freq=0)
    with pytest.raises(ValueError, match="Empty `backup_dir`"):
        keras.callbacks.BackupAndRestore("")


def test_compute_average_loss_matches_tf():
    assert float(ml.nn.compute_average_loss(np.array([1.0, 2.0, 3.0], np.float32))) == 2.0
    assert float(ml.nn.compute_average_loss([1.0, 2.0, 3.0], global_batch_size=6)) == 1.0
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    per_replica = strategy.run(lambda: ml.nn.compute_average_loss(np.array([1.0, 2.0, 3.0], np.float32)))
    assert [float(v) for v in strategy.experimental_local_results(per_replica)] == [1.0, 1.0]
    with strategy.scope(), pytest.raises(RuntimeError, match="cross replica context"):
        ml.nn.compute_average_loss([1.0, 2.0])
    assert ml.nn.compute_average_loss([1.0], global_batch_size=0) == 0.0  # TF's div_no_nan
    assert ml.nn.compute_average_loss(np.zeros(0, np.float32), global_batch_size=0) == 0.0  # every replica empty
    with pytest.raises(errors.InvalidArgumentError, match="global_batch_size must be non-negative"):
        ml.nn.compute_average_loss([1.0], global_batch_size=-1)
    average = ml.nn.compute_average_loss(np.array([1, 2, 3]), global_batch_size=3)
    assert average.dtype == np.float64 and average == 2.0


def test_custom_loop_with_loss_and_gradients_matches_fit():
    def custom():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = build_model("sgd")
        ds = strategy.experimental_distribute_dataset(md.Dataset.from_tensor_slices((X[:48], Y[:48])).batch(16))

        def step(batch):
            loss, grads = model.loss_and_gradients(batch[0], batch[1], global_batch_size=16)
            model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        for batch in ds:
            strategy.run(step, args=(batch,))
        return [w.numpy() for w in model.weights]

    custom_weights = SimCluster(workers=2, devices_per_worker=2).run(custom).values()[0]
    fit_weights = SimCluster(workers=1).run(_fit_on, (X[:48], Y[:48])).values()[0]
    for a, b in zip(custom_weights, fit_weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def _fit_on(data):
    strategy = ml.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = build_model("sgd")
    model.fit(md.Dataset.from_tensor_slices(data).batch(16), epochs=1, verbose=0)
    return [w.numpy() for w in model.weights]


def test_a_metric_called_like_a_function_updates_and_returns_its_result():
    """``metric(y_true, y_pred)`` is ``update_state`` then ``result`` (values recorded from Keras 3 on TF 2.21)."""
    accuracy = keras.metrics.SparseCategoricalAccuracy()
    assert float(accuracy([1, 0], [[0.1, 0.9], [0.8, 0.2]])) == 1.0
    assert float(accuracy([1], [[0.9, 0.1]])) == pytest.approx(2 / 3)
    mean = keras.metrics.Mean()
    assert (float(mean(3.0)), float(mean([1.0, 2.0], sample_weight=[1.0, 0.0]))) == (3.0, 2.0)


def test_metrics_aggregate_over_every_replica():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            mean = keras.metrics.Mean()
        strategy.run(lambda: mean.update_state(float(ml.get_replica_context().replica_id_in_sync_group)))
        return float(mean.result())

    assert SimCluster(workers=2, devices_per_worker=2).run(program).values() == [1.5, 1.5]


def test_optimizers_follow_their_formulas():
    g = np.array([0.5, -1.0], np.float32)
    v = ml.Variable(np.array([1.0, 2.0], np.float32))
    adam = keras.optimizers.Adam(0.1)
    for _ in range(2):
        adam.apply_gradients([(g, v)])
    m = vv = np.zeros(2)
    ref = np.array([1.0, 2.0])
    for t in (1, 2):
        m = m + (g - m) * 0.1
        vv = vv + (g * g - vv) * 0.001
        ref = ref - m * (0.1 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)) / (np.sqrt(vv) + 1e-7)
    np.testing.assert_allclose(v.numpy(), ref, rtol=1e-5)
    assert int(adam.iterations.numpy()) == 2
    w = ml.Variable(np.array([1.0], np.float32))
    sgd = keras.optimizers.SGD(0.1, momentum=0.5)
    for _ in range(2):
        sgd.apply_gradients([(np.array([1.0], np.float32), w)])
    np.testing.assert_allclose(w.numpy(), [1.0 - 0.1 - 0.15], rtol=1e-6)


def test_mse_regression_with_numpy_inputs():
    x = RNG.standard_normal((64, 3)).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 0.5], np.float32)
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    history = model.fit(x, y, batch_size=16, epochs=30, verbose=0)
    assert history.history["loss"][-1] < 1e-3
    assert model.evaluate(x, y, verbose=0) < 1e-3
    assert model.predict(x[:5]).shape == (5, 1)


def test_keras_details_found_by_fuzzing_against_tf():
    # Probabilities are clipped before the cross-entropy renormalises them (TF: 1.0986 = log 3).
    loss = keras.losses.SparseCategoricalCrossentropy(reduction=None)([0], np.array([[2.0, 1.0, 1.0]], np.float32))
    assert float(loss[0]) == pytest.approx(np.log(3.0), rel=1e-6)
    assert float(keras.losses.sparse_categorical_crossentropy([0], np.array([[-50.0, 80.0, 3.0]], np.float32))[0]) \
        == pytest.approx(16.81, abs=0.01)
    assert isinstance(keras.losses.get("MeanSquaredError"), keras.losses.MeanSquaredError)
    compiled = CompileMetrics(["acc", "accuracy", "acc"], ["acc", "acc"])
    compiled.build((None,), (None, 3))
    assert [m.name for m in compiled.metrics] == ["acc", "accuracy", "acc", "acc", "acc"]  # metrics keep their names
    assert list(compiled.result()) == ["acc", "accuracy", "acc_1", "weighted_acc", "weighted_acc_1"]
    opt = keras.optimizers.SGD(0.1)
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, ml.Variable(1.0))])
    with pytest.raises(ValueError, match="You must call `compile\\(\\)`"):
        keras.Sequential([keras.layers.Dense(1, input_shape=(2,))]).fit(np.ones((2, 2)), np.ones((2, 1)))


def test_fit_with_validation_data_reports_val_metrics():
    model = build_model("sgd")
    history = model.fit(X[:32], Y[:32], batch_size=8, epochs=2, verbose=0, validation_data=(X[32:], Y[32:]))
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    val_loss, val_accuracy = model.evaluate(X[32:], Y[32:], verbose=0)
    assert history.history["val_loss"][-1] == pytest.approx(val_loss)
    assert history.history["val_accuracy"][-1] == pytest.approx(val_accuracy)


ELEMENTWISE_SHAPES = [((4, 3), (4, 3)), ((4, 1), (4,)), ((4,), (4, 1)), ((3,), (4, 3)), ((1, 3), (4, 3))]


@pytest.mark.parametrize(("loss", "true_shape", "pred_shape"), [
    *[(keras.losses.MeanSquaredError(), t, p) for t, p in ELEMENTWISE_SHAPES],
    *[(keras.losses.MeanAbsoluteError(), t, p) for t, p in ELEMENTWISE_SHAPES],
    (keras.losses.SparseCategoricalCrossentropy(from_logits=True), (4,), (4, 3)),
    (keras.losses.SparseCategoricalCrossentropy(from_logits=True), (4, 1), (4, 3)),
    (keras.losses.SparseCategoricalCrossentropy(), (4,), (4, 3)),
    *[(keras.losses.Huber(delta=0.6), t, p) for t, p in ELEMENTWISE_SHAPES],
    *[(keras.losses.BinaryCrossentropy(from_logits=logits, label_smoothing=0.2), t, p)
      for logits in (False, True) for t, p in (((4, 3), (4, 3)), ((4,), (4, 1)), ((4, 1), (4, 1, 1)))],
    (keras.losses.BinaryCrossentropy(axis=0), (4, 3), (4, 3)),
    *[(keras.losses.CategoricalCrossentropy(from_logits=logits, label_smoothing=0.1), t, p)
      for logits in (False, True) for t, p in (((4, 3), (4, 3)), ((2, 4, 3), (2, 4, 3)))],
    (keras.losses.CategoricalCrossentropy(axis=0), (4, 3), (4, 3)),
])
def test_loss_gradients_match_finite_differences(loss, true_shape, pred_shape):
    """``grad`` is the derivative of ``sum(call)`` after Keras' rank matching and broadcasting."""
    rng = np.random.default_rng(1)
    if isinstance(loss, keras.losses.SparseCategoricalCrossentropy):
        y_true = rng.integers(0, pred_shape[-1], true_shape)
        y_pred = rng.uniform(0.1, 0.8, pred_shape)
    elif isinstance(loss, keras.losses.CategoricalCrossentropy):  # one-hot: TF's logits gradient assumes sum 1
        y_true = np.moveaxis(np.eye(true_shape[loss.axis])[rng.integers(0, true_shape[loss.axis],
                                                                        np.delete(true_shape, loss.axis))], -1, loss.axis)
        y_pred = rng.uniform(0.1, 0.8, pred_shape)
    elif isinstance(loss, keras.losses.BinaryCrossentropy):
        y_true = rng.integers(0, 2, true_shape).astype(float)
        y_pred = rng.uniform(0.1, 0.8, pred_shape)
    else:
        y_true = rng.standard_normal(true_shape)
        y_pred = rng.standard_normal(pred_shape)
    analytic = loss.grad(y_true, y_pred)
    numeric = np.zeros_like(y_pred)
    for index in np.ndindex(*pred_shape):
        step = np.zeros_like(y_pred)
        step[index] = 1e-6
        numeric[index] = (loss.call(y_true, y_pred + step).sum() - loss.call(y_true, y_pred - step).sum()) / 2e-6
    assert analytic.shape == y_pred.shape
    np.testing.assert_allclose(analytic, numeric, rtol=1e-4, atol=1e-6)


def test_scale_regularization_loss_divides_by_the_replicas_as_tf():
    """Values and dtypes observed on TF 2.21 with MirroredStrategy over 2 CPUs."""
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def scaled(loss):
        return [np.asarray(v) for v in strategy.experimental_local_results(
            strategy.run(lambda: ml.nn.scale_regularization_loss(loss)))]
    for loss, dtype, value in ((np.float32(3.0), np.float32, 1.5), ([np.float32(3.0), np.float32(1.0)], np.float32, 2.0),
                               (np.array([1.0, 2.0]), np.float64, 1.5), (3, np.float64, 1.5), (3.0, np.float32, 1.5)):
        assert [(v.dtype, float(v)) for v in scaled(loss)] == [(np.dtype(dtype), value)] * 2
    with strategy.scope(), pytest.raises(RuntimeError, match="in cross replica context"):
        ml.nn.scale_regularization_loss(3.0)
    assert float(ml.nn.scale_regularization_loss(np.float32(3.0))) == 3.0


def test_compute_average_loss_fixes_weight_ranks_as_tf():
    """Values and errors observed on TF 2.21 (MirroredStrategy over 2 CPUs, global batch 8 or 4)."""
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    losses = np.array([1.0, 2.0, 3.0, 4.0], np.float32)

    def average(per_example, weight, size):
        out = strategy.run(lambda: ml.nn.compute_average_loss(per_example, sample_weight=weight, global_batch_size=size))
        return float(np.asarray(strategy.experimental_local_results(out)[0]))
    assert average(losses, np.array([[1.0], [0.0], [2.0], [1.0]]), 8) == 1.375
    assert average(np.ones((2, 3), np.float32), np.array([1.0, 2.0]), 4) == 2.25
    assert average(np.ones((2, 1), np.float32), np.array([1.0, 2.0]), 4) == 0.75
    with pytest.raises(errors.InvalidArgumentError, match=r"Can not squeeze dim\[1\], expected a dimension of 1, got 4"):
        average(losses, np.array([[1.0, 0.0, 2.0, 1.0]]), 8)
    with pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[4\] vs. \[2\]"):
        average(losses, np.array([1.0, 2.0]), 8)
    with pytest.raises(TypeError, match="global_batch_size must be an integer"):
        average(losses, None, 8.0)
    with pytest.raises(ValueError, match=r"global_batch_size must be scalar..  Expected scalar shape, saw shape: \(1,\)"):
        average(losses, None, np.array([8]))


def test_gradient_tape_follows_models_losses_and_regularizers_and_explains_the_rest():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, kernel_regularizer=keras.regularizers.L2(0.1))])
    x, y = RNG.standard_normal((4, 3)).astype(np.float32), np.array([0, 1, 1, 0])
    assert isinstance(model(x), np.ndarray)  # no tape: a plain array
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def loss_of(weights):
        model.set_weights(weights)
        return float(ml.nn.compute_average_loss(loss_fn(y, model(x)), global_batch_size=8) + model.losses[0] * 0.5)

    start = [w.copy() for w in model.get_weights()]
    model.set_weights(start)
    with ml.GradientTape() as tape:
        loss = ml.nn.compute_average_loss(loss_fn(y, model(x)), global_batch_size=8) + ml.add_n(model.losses) * 0.5
    grads = tape.gradient(loss, model.trainable_variables)
    for i, grad in enumerate(grads):
        numeric = np.zeros_like(start[i])
        for index in np.ndindex(*start[i].shape):
            plus, minus = [w.copy() for w in start], [w.copy() for w in start]
            plus[i][index] += 1e-3
            minus[i][index] -= 1e-3
            numeric[index] = (loss_of(plus) - loss_of(minus)) / 2e-3
        np.testing.assert_allclose(grad, numeric, rtol=2e-2, atol=1e-4)
    with pytest.raises(RuntimeError, match="non-persistent GradientTape"):
        tape.gradient(loss, model.trainable_variables)
    with ml.GradientTape() as tape:
        plain = float(np.square(np.asarray(model(x))).sum())
    with pytest.raises(ValueError, match="Python number .* was converted out of the tape"):
        tape.gradient(plain, model.trainable_variables)
    with ml.GradientTape() as tape:
        cut = np.square(np.asarray(model(x))).sum(keepdims=True)  # a NumPy function: no gradient flows, as in TF
    assert tape.gradient(cut, model.trainable_variables) == [None] * len(model.trainable_variables)
    with pytest.raises(ValueError, match="No gradients provided for any variable.\nFix: compute the loss inside"):
        keras.optimizers.SGD().apply_gradients(zip([None, None], model.trainable_variables))


def test_sigmoid_outputs_remember_their_logits_only_while_they_live():
    """The logits link (Keras' ``_keras_logits``) belongs to the returned array: copies have none, and the link
    goes when the array does (so the table does not grow with every model call)."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="sigmoid")])
    model.set_weights([np.array([[20.0], [20.0]], np.float32), np.zeros(1, np.float32)])
    x, y = np.ones((2, 2), np.float32), np.zeros((2, 1), np.float32)
    before = len(keras.activations._LOGITS)
    out = model(x)
    assert keras.activations.logits_of(out) is not None and keras.activations.logits_of(out.copy()) is None
    bce = keras.losses.BinaryCrossentropy()
    assert float(bce(y, out)) == pytest.approx(40.0, rel=1e-6)          # from the logits: no clipping
    clipped = -np.log(np.float32(1) - np.float32(1 - 1e-7))              # probabilities clipped to 1 - 1e-7
    assert float(bce(y, out.copy())) == pytest.approx(clipped, rel=1e-6)
    del out
    assert len(keras.activations._LOGITS) == before


def test_predict_on_a_cluster_gathers_every_replicas_outputs_on_every_worker():
    """2 workers x 2 devices: each worker gets all 10 predictions (a partial last batch included), in Keras 3's
    replica order; the same rows as predicting locally."""
    x = RNG.standard_normal((10, 6)).astype(np.float32)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = build_model()
        dataset = md.Dataset.from_tensor_slices(x).batch(4)
        return model.predict(dataset, verbose=0), model.predict(x, verbose=0)
    for gathered, local in SimCluster(workers=2, devices_per_worker=2).run(program).values():
        assert gathered.shape == (10, 3)
        np.testing.assert_allclose(np.sort(gathered, axis=0), np.sort(local, axis=0), rtol=1e-5, atol=1e-6)


def test_fit_evaluate_and_predict_print_nothing_with_verbose_0(capsys):
    model = build_model("sgd")
    model.fit(X[:16], Y[:16], batch_size=8, epochs=2, verbose=0, validation_data=(X[16:24], Y[16:24]))
    model.evaluate(X[:8], Y[:8], verbose=0)
    model.predict(md.Dataset.from_tensor_slices(X[:8]).batch(4), verbose=0)
    assert capsys.readouterr().out == ""


def test_batch_logs_hold_the_running_metrics_and_are_read_only_when_looked_at():
    model = build_model("sgd")
    reads = []
    results = model._results
    model._results = lambda: reads.append(1) or results()
    seen = []
    batches = keras.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: seen.append(dict(logs)))
    history = model.fit(X[:32], Y[:32], batch_size=8, epochs=2, verbose=0, callbacks=[batches])
    assert [sorted(logs) for logs in seen] == [["accuracy", "loss"]] * 8
    assert [seen[3]["loss"], seen[7]["loss"]] == history.history["loss"]  # an epoch's last batch: its result
    reads.clear()
    model.fit(X[:32], Y[:32], batch_size=8, epochs=1, verbose=0, callbacks=[keras.callbacks.Callback()])
    assert len(reads) == 1  # the epoch's logs only


def dropout_program():
    strategy = ml.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(6,),
                                                     kernel_initializer=keras.initializers.GlorotUniform(seed=1)),
                                  keras.layers.Dropout(0.4),
                                  keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(seed=2))])
        model.compile(optimizer=keras.optimizers.SGD(0.1), metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(md.Dataset.from_tensor_slices((X[:48], Y[:48])).batch(12), epochs=3, verbose=0)
    return model.get_weights(), history.history["loss"], model.predict(X[:4], verbose=0)


def test_dropout_trains_deterministically_on_a_cluster_and_is_the_identity_at_inference():
    runs = [SimCluster(workers=2, devices_per_worker=2, seed=seed).run(dropout_program).values() for seed in (1, 2)]
    for weights, losses, predictions in runs[0] + runs[1]:
        for a, b in zip(weights, runs[0][0][0]):
            np.testing.assert_array_equal(a, b)
        assert losses == runs[0][0][1] and losses[-1] < losses[0]
        np.testing.assert_array_equal(predictions, runs[0][0][2])
    layer = keras.layers.Dropout(0.25, seed=4)
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    out, mask = layer._forward(x, training=True)
    dx, _ = layer._backward(mask, np.ones_like(x))
    np.testing.assert_array_equal(dx, np.where(out != 0, np.float32(1) / np.float32(0.75), 0))  # dropped: no gradient


def test_weights_files_are_checked_and_saved_by_every_worker(tmp_path):
    """save_weights/load_weights in mirrorlab's format under Keras' .weights.h5 name (a deliberate difference: no
    h5py): counts and shapes are checked, foreign files named clearly, and a cluster's workers may all save."""
    path = tmp_path / "w.weights.h5"
    model = build_model()
    model.save_weights(path)
    other = keras.Sequential([keras.layers.Dense(8, input_shape=(6,)), keras.layers.Dense(4)])
    with pytest.raises(ValueError, match="could not be loaded"):
        other.load_weights(path)
    with pytest.raises(FileExistsError, match="overwrite=False"):
        model.save_weights(path, overwrite=False)
    (tmp_path / "keras.weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n")
    with pytest.raises(ValueError, match="not a weights file written by mirrorlab"):
        model.load_weights(tmp_path / "keras.weights.h5")
    with pytest.raises(ValueError, match="legacy HDF5 model files"):
        keras.callbacks.ModelCheckpoint(tmp_path / "m.h5")  # Keras would write an HDF5 model through h5py

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            trained = build_model()
        checkpoint = keras.callbacks.ModelCheckpoint(str(tmp_path / "c{epoch}.weights.h5"), save_weights_only=True)
        trained.fit(md.Dataset.from_tensor_slices((X[:24], Y[:24])).batch(8), epochs=2, verbose=0,
                    callbacks=[checkpoint])
        return trained.get_weights()
    weights = SimCluster(workers=2, devices_per_worker=1).run(program).values()[0]
    restored = build_model()
    restored.load_weights(tmp_path / "c2.weights.h5")
    for a, b in zip(restored.get_weights(), weights):
        np.testing.assert_array_equal(a, b)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c1.weights.h5", "c2.weights.h5", "keras.weights.h5",
                                                          "w.weights.h5"]


def test_an_uncompiled_model_has_no_optimizer_attribute_as_keras_3():
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    assert not hasattr(model, "optimizer") and model.loss is None
    with pytest.raises(ValueError, match="You must call `compile\\(\\)`"):
        model.fit(X[:4, :3], Y[:4], verbose=0)
    model.compile("sgd", "mse")
    assert type(model.optimizer).__name__ == "SGD"


@pytest.mark.parametrize(("shuffle", "warns"), [(True, True), ("batch", True), (False, False)])
def test_fit_warns_that_shuffle_does_not_apply_to_a_dataset_as_keras(shuffle, warns):
    model = build_model("sgd")
    dataset = md.Dataset.from_tensor_slices((X, Y)).batch(16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(dataset, verbose=0, shuffle=shuffle)
        model.fit(X, Y, verbose=0, shuffle=shuffle)  # arrays are shuffled: nothing to warn about
        model.evaluate(dataset, verbose=0)
    assert [str(w.message) for w in caught] == warns * [
        "`shuffle=True` was passed, but will be ignored since the data `x` was provided as a tf.data.Dataset. The "
        "Dataset is expected to already be shuffled (via `.shuffle(buffer_size)`)."]


def test_automatic_names_count_per_worker_process_as_on_real_workers():
    """Each real worker is its own process, so each names its first Dense ``dense``: simulated workers (threads of one
    process) count on their own too, and ``clear_session`` starts again."""
    def program():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1), keras.layers.Dense(1)])
        names = [layer.name for layer in model.layers]
        keras.backend.clear_session()
        return names, keras.layers.Dense(1).name, keras.optimizers.RMSprop().name

    outside = keras.layers.Dense(1).name  # the test process counts apart from the simulated workers
    assert SimCluster(workers=2, devices_per_worker=1, seed=4).run(program).values() == [
        (["dense", "dense_1"], "dense", "rm_sprop")] * 2
    keras.backend.clear_session()
    assert outside.startswith("dense") and keras.layers.Dense(1).name == "dense"


def image_task(count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random 6x6 one-channel images, labelled by whether their top half is the brighter."""
    rng = np.random.default_rng(5)
    images = rng.random((count, 6, 6, 1)).astype(np.float32)
    return images, (images[:, :3].mean(axis=(1, 2, 3)) > images[:, 3:].mean(axis=(1, 2, 3))).astype(np.int64)


def cnn_program(layers, data, optimizer, epochs):
    """A simulated worker's program: fit ``Sequential([Input((6, 6, 1)), *layers()])`` (built in the strategy's
    scope) on ``data`` in global batches of 8; returns the weights and the history."""
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.Input((6, 6, 1)), *layers()])
            model.compile(optimizer=optimizer(), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(md.Dataset.from_tensor_slices(data).batch(8), epochs=epochs, verbose=0)
        return model.get_weights(), history.history
    return program


def test_a_pooling_cnn_trains_on_a_cluster_as_on_one_device():
    """The CNN of TF's "Distributed training with Keras" tutorial (Conv2D, MaxPooling2D, Flatten, Dense), shrunk:
    fit on 2 workers x 2 devices ends with the weights of fit on one device, and the loss falls."""
    images, labels = image_task(32)
    program = cnn_program(lambda: [
        keras.layers.Conv2D(4, 3, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(3)),
        keras.layers.MaxPooling2D(), keras.layers.Flatten(),
        keras.layers.Dense(2, kernel_initializer=keras.initializers.GlorotUniform(4))],
        (images, labels), lambda: keras.optimizers.SGD(0.5), epochs=4)
    single = SimCluster(workers=1).run(program).values()[0]
    for weights, history in SimCluster(workers=2, devices_per_worker=2, seed=1).run(program).values():
        for a, b in zip(weights, single[0]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(history["loss"], single[1]["loss"], rtol=1e-4)
    assert single[1]["loss"][-1] < single[1]["loss"][0]
    assert keras.layers.MaxPooling2D(7)(images[:1]).shape == (1, 0, 0, 1)  # a direct call: empty, as Keras'


def test_batch_normalization_keeps_a_moving_statistics_copy_per_replica_as_on_tf():
    """On 2 workers x 2 devices each replica normalizes its own batch and moves its own copy of the moving mean (as
    TF's ON_WRITE/NONE variables do), so the copies differ; both workers hold the same four copies, and a model
    model given the saved weights (the first replica's copy) infers with the moving statistics."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, kernel_initializer="ones"),
                                      keras.layers.BatchNormalization(momentum=0.5), keras.layers.Dense(2)])
            model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(md.Dataset.from_tensor_slices((x, y)).batch(8), epochs=1, verbose=0)
        copies = [np.asarray(c) for c in strategy.experimental_local_results(model.layers[1].moving_mean)]
        return copies, model.get_weights()

    results = SimCluster(workers=2, devices_per_worker=2, seed=3).run(program).values()
    copies, weights = results[0]
    assert len({c.tobytes() for c in copies}) == 2  # each worker: its 2 replicas' copies differ
    assert results[1][0][0].tobytes() != copies[0].tobytes()  # worker 1's replicas saw other batches
    np.testing.assert_array_equal(weights[4], copies[0])  # get_weights reads the first replica's copy
    single = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.BatchNormalization(),
                               keras.layers.Dense(2)])
    single.set_weights(weights)
    w1, b1, gamma, beta, mean, variance, w2, b2 = weights
    expected = ((x[:2] @ w1 + b1 - mean) / np.sqrt(variance + 1e-3) * gamma + beta) @ w2 + b2
    np.testing.assert_allclose(single.predict(x[:2], verbose=0), expected, rtol=1e-5, atol=1e-6)


def test_synchronized_batch_normalization_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"synchronized=True.*not built.*\nFix: use synchronized=False"):
        keras.layers.BatchNormalization(synchronized=True)
    assert keras.layers.BatchNormalization(synchronized=False).name.startswith("batch_normalization")


def test_divergent_moving_statistics_are_reported_once_at_the_users_fit_call(caplog):
    """Replica threads running only mirrorlab's step report the user's ``fit`` line (the ``strategy.run`` caller),
    and the message for a layer's own state says it is TF's behaviour rather than asking for an aggregation."""
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((6,)), keras.layers.BatchNormalization(), keras.layers.Dense(3)])
        model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    line = sys._getframe().f_lineno + 2  # the fit call's line
    with caplog.at_level("WARNING", logger="mirrorlab"):
        model.fit(X[:16], Y[:16], batch_size=8, epochs=2, verbose=0)
    reports = [r.getMessage() for r in caplog.records if "moving_mean" in r.getMessage()]
    assert len(reports) == 1  # once per variable, not per step
    assert f"test_keras.py:{line} in test_divergent" in reports[0] and "as in TF" in reports[0]


def test_compile_takes_keras_3s_signature_and_defaults_to_rmsprop():
    """Keras 3's argument order and defaults (values recorded from Keras 3 on TF 2.21); loss weights are refused
    with the fix, and so is a steps_per_execution that is not a positive integer (where Keras' loop fails on it)."""
    x, y = np.ones((4, 2), np.float32), np.zeros((4, 1), np.float32)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_initializer="ones")])
    model.compile(loss="mse", run_eagerly=True, jit_compile=False)
    assert type(model.optimizer).__name__ == "RMSprop" and model.run_eagerly is True
    assert [round(v, 5) for v in model.fit(x, y, epochs=2, verbose=0).history["loss"]] == [4.0, 3.96214]
    model.compile("adam", "mse", None, ["mae"])
    assert model.evaluate(x, y, verbose=0, return_dict=True) == pytest.approx({"loss": 3.9348526, "mae": 1.9836463})
    with pytest.raises(NotImplementedError, match="loss_weights.*\nFix: "):
        model.compile("sgd", "mse", loss_weights=[2.0])
    for bad, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError), ("auto", TypeError)):
        model.compile("sgd", "mse", steps_per_execution=bad)
        with pytest.raises(error, match=f"steps_per_execution={bad!r}(.|\n)*\nFix: "):
            model.fit(x, y, verbose=0)


def test_csv_logger_writes_keras_rows_and_appends_without_a_second_header(tmp_path):
    """Keras 3's CSV: epoch, then the sorted log names (val_ columns of NA without validation); append continues."""
    x = np.arange(24, dtype=np.float32).reshape(8, 3) / 10
    y = np.ones((8, 2), np.float32)
    path = tmp_path / "log.csv"
    for append, validation, separator in ((False, None, ","), (True, (x[:4], y[:4]), ","), (True, None, ";")):
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, validation_data=validation,
                  callbacks=[keras.callbacks.CSVLogger(path, separator=separator, append=append)])
    rows = path.read_text().splitlines()
    assert rows[0] == "epoch,loss,mae,val_loss,val_mae" and len(rows) == 7
    assert [row.split(",")[0] for row in rows[1:5]] == ["0", "1", "0", "1"]
    assert rows[1].endswith(",NA,NA") and "NA" not in rows[3] and rows[5].startswith("0;") and rows[6].endswith(";NA;NA")


def test_precision_and_recall_count_over_every_worker():
    """Precision/Recall keep ON_READ SUM counts: each simulated worker counts its own examples, a read sums the
    cluster, so every worker reports the precision and recall of all the examples."""
    y_true = np.array([1, 0, 1, 1, 0, 1, 0, 0])
    y_pred = np.array([0.9, 0.8, 0.3, 0.6, 0.1, 0.7, 0.55, 0.2], np.float32)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            metrics = [ml.keras.metrics.Precision(), ml.keras.metrics.Recall(thresholds=[0.25, 0.5])]
        mine = slice(4 * strategy.cluster_resolver.task_id, 4 * strategy.cluster_resolver.task_id + 4)
        for metric in metrics:
            strategy.run(lambda m=metric: m.update_state(y_true[mine], y_pred[mine]))
        return [np.asarray(m.result()).tolist() for m in metrics]

    predicted = y_pred > 0.5
    precision = (predicted & (y_true == 1)).sum() / predicted.sum()
    recall = [((y_pred > t) & (y_true == 1)).sum() / (y_true == 1).sum() for t in (0.25, 0.5)]
    for result in SimCluster(workers=2, devices_per_worker=1, seed=5).run(program).values():
        assert result[0] == pytest.approx(precision) and result[1] == pytest.approx(recall)


def test_confusion_metrics_serialize_as_keras_metrics():
    """Configs name them in ``keras.metrics`` (as Keras does), so a saved model's compile config reloads them."""
    for metric in (keras.metrics.Precision(thresholds=[0.2, 0.7]), keras.metrics.Recall(top_k=1),
                   keras.metrics.AUC(curve="PR", num_thresholds=9)):
        config = keras.metrics.serialize(metric)
        assert config["module"] == "keras.metrics" and config["registered_name"] is None
        restored = keras.metrics.deserialize(config)
        assert type(restored) is type(metric) and restored.get_config() == metric.get_config()


@pytest.mark.parametrize("first, shape", [("dense", (6,)), ("conv", (5, 5, 2))])
def test_a_tape_skips_the_input_gradient_of_a_layer_fed_a_plain_array(monkeypatch, first, shape):
    """No tape can watch a plain array, so the first layer's input gradient (for Dense a third product as wide as
    the input, for Conv2D a transposed convolution) is not computed; the weights' gradients are the same as when
    it is."""
    layer = (keras.layers.Dense(5, activation="relu") if first == "dense"
             else keras.layers.Conv2D(3, 2, activation="relu"))
    model = keras.Sequential([keras.Input(shape), layer, keras.layers.Flatten(), keras.layers.Dense(3)])
    x = RNG.standard_normal((4, *shape)).astype(np.float32)
    asked: list[tuple[bool, bool]] = []  # (input_grad, whether no input gradient came back)
    kind = type(layer)
    real = kind._backward_from_logits

    def spy(self, cache, dz, input_grad=True):
        out = real(self, cache, dz, input_grad)
        asked.append((input_grad, out[0] is None))
        return out

    def grads():
        with ml.GradientTape() as tape:
            loss = ml.reduce_sum(model(x) ** 2)
        return tape.gradient(loss, model.trainable_variables)

    monkeypatch.setattr(kind, "_backward_from_logits", spy)
    skipped = grads()
    assert asked[-1] == (False, True)  # the first layer (the last to run backward) was fed the plain array
    monkeypatch.setattr(kind, "_backward_from_logits", lambda self, cache, dz, input_grad=True: real(self, cache, dz))
    for a, b in zip(skipped, grads()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
