"""CuPy arrays stay on their GPUs through strategies, variables, collectives, checkpoints and Keras.

Without a GPU these run against ``fake_cupy`` (CuPy's device rules on NumPy storage, so results must
equal the NumPy path bit for bit); the ``gpu``-marked tests repeat the key ones on real CuPy.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab.tf import keras
from mirrorlab.placement import Placement, gpu_index
from mirrorlab.runtime import current_environment
from mirrorlab.sim import SimCluster

import fake_cupy
from keras_programs import tape_step
from test_keras import X, Y, build_model, cnn_program, image_task


@pytest.fixture
def cupy(monkeypatch):
    # This process's tf.config state saw no GPUs; the fake GPUs need a fresh one (restored afterwards).
    monkeypatch.delitem(current_environment().process_state, "tf.config", raising=False)
    return fake_cupy.install(monkeypatch)


def _real_cupy():
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    import cupy

    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA GPU")
    except Exception as exc:  # CuPy without a driver
        pytest.skip(f"no usable CUDA GPU: {exc}")
    return cupy


def _model(optimizer: str = "adam") -> keras.Sequential:
    return build_model(optimizer)


def _fit(strategy=None, to_device=None, optimizer: str = "adam"):
    """Train 2 epochs; returns host weights and the history."""
    x, y = (X, Y) if to_device is None else (to_device(X), to_device(Y))
    if strategy is None:
        model = _model(optimizer)
    else:
        with strategy.scope():
            model = _model(optimizer)
    history = model.fit(md.Dataset.from_tensor_slices((x, y)).batch(12), epochs=2, verbose=0)
    return [w.numpy() for w in model.weights], history.history, model


def _assert_same_training(a, b):
    """The same weights and logged metrics; a logged loss may differ in its last bit, since NumPy arrays add in TF's
    CPU order and device arrays in their own (summation.py)."""
    for wa, wb in zip(a[0], b[0]):
        assert isinstance(wa, np.ndarray) and isinstance(wb, np.ndarray)
        np.testing.assert_array_equal(wa, wb)
    logs_a, logs_b = (x[1] if isinstance(x[1], dict) else {"losses": x[1]} for x in (a, b))
    assert logs_a.keys() == logs_b.keys()
    for key in logs_a:
        np.testing.assert_allclose(np.asarray(logs_a[key], np.float64), np.asarray(logs_b[key], np.float64),
                                   rtol=1e-6)


def test_placement_names_gpus_and_is_the_identity_on_cpus(cupy):
    assert gpu_index("/job:worker/replica:0/task:1/device:GPU:3") == 3
    assert gpu_index("/gpu:2") == 2 and gpu_index("/device:CPU:0") is None
    cpu = Placement(["/cpu:0", "/cpu:1"])
    x = np.ones(3)
    assert not cpu.on_gpu and cpu.replicate(x) == [x, x] and cpu.put(x, 1) is x
    gpu = Placement(["/gpu:0", "/gpu:1"])
    copies = gpu.replicate(x)
    assert [c.device.id for c in copies] == [0, 1]
    assert [c.get().tolist() for c in copies] == [[1.0] * 3] * 2


def test_numpy_conversion_of_a_device_array_fails_loudly(cupy):
    # The fake must catch the bug class these tests exist for: a silent trip through NumPy.
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(cupy.asarray(np.ones(2)))
    with pytest.raises(TypeError, match="Unsupported type"):
        _ = cupy.asarray(np.ones(2)) + np.ones(2)
    with cupy.cuda.Device(1):
        other = cupy.asarray(np.ones(2))
    with pytest.raises(ValueError, match="current device"):
        _ = other + other


def test_fit_on_cupy_arrays_without_a_strategy_matches_numpy(cupy):
    host = _fit()
    device = _fit(to_device=cupy.asarray)
    _assert_same_training(device, host)
    assert all(type(w._read()).__module__ == "cupy" for w in device[2].weights)
    logits = cupy.asarray(X[:6] @ np.ones((6, 3), np.float32))
    per_example = keras.losses.sparse_categorical_crossentropy(cupy.asarray(Y[:6]), logits, from_logits=True)
    average = ml.nn.compute_average_loss(per_example, sample_weight=np.arange(6), global_batch_size=12)
    assert type(average).__module__ == "cupy"
    expected = ml.nn.compute_average_loss(keras.losses.sparse_categorical_crossentropy(
        Y[:6], X[:6] @ np.ones((6, 3), np.float32), from_logits=True), sample_weight=np.arange(6), global_batch_size=12)
    assert float(average) == float(expected)
    predicted = device[2].predict(cupy.asarray(X[:4]))
    assert type(predicted).__module__ == "cupy"
    np.testing.assert_array_equal(predicted.get(), host[2].predict(X[:4]))


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_mirrored_strategy_on_two_gpus_keeps_each_copy_on_its_gpu(cupy, optimizer):
    host = _fit(ml.MirroredStrategy(["/cpu:0", "/cpu:1"]), optimizer=optimizer)
    strategy = ml.MirroredStrategy(["/gpu:0", "/gpu:1"])
    device = _fit(strategy, optimizer=optimizer)
    _assert_same_training(device, host)
    for weight in device[2].weights:
        assert [c._read().device.id for c in weight.values] == [0, 1]


def test_run_reduce_and_on_read_variables_on_gpus(cupy):
    strategy = ml.MirroredStrategy(["/gpu:0", "/gpu:1", "/gpu:2"])
    with strategy.scope():
        total = ml.Variable(0.0, synchronization=ml.VariableSynchronization.ON_READ,
                            aggregation=ml.VariableAggregation.SUM)
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.full((2,), ctx.replica_id_in_sync_group + 1, np.float32))
    assert [v.device.id for v in values.values] == [0, 1, 2]

    def step(v):
        ctx = ml.get_replica_context()
        total.assign_add(v.sum())
        return ctx.all_reduce(ml.ReduceOp.SUM, v), ctx.all_gather(v, axis=0)

    summed, gathered = strategy.run(step, args=(values,))
    assert [s.device.id for s in summed.values] == [0, 1, 2]
    assert [g.device.id for g in gathered.values] == [0, 1, 2]
    assert summed.values[2].get().tolist() == [6.0, 6.0]
    assert gathered.values[1].get().tolist() == [1, 1, 2, 2, 3, 3]
    assert float(strategy.reduce("SUM", values, axis=0).get()) == 12.0
    assert float(strategy.reduce("MEAN", values, axis=None).get()[0]) == 2.0
    assert float(total.numpy()) == 12.0 and float(np.asarray(total)) == 12.0


def test_checkpoint_round_trip_of_gpu_variables(cupy, tmp_path):
    strategy = ml.MirroredStrategy(["/gpu:0", "/gpu:1"])
    with strategy.scope():
        v = ml.Variable(np.arange(3, dtype=np.float32))
        s = ml.Variable(0.0, synchronization=ml.VariableSynchronization.ON_READ,
                        aggregation=ml.VariableAggregation.SUM)
    strategy.run(lambda: s.assign_add(5.0))
    path = ml.train.Checkpoint(v=v, s=s).save(str(tmp_path / "ckpt"))
    assert ml.train.load_variable(path, "s/.ATTRIBUTES/VARIABLE_VALUE").tolist() == 10.0
    v.assign(np.zeros(3, np.float32))
    ml.train.Checkpoint(v=v, s=s).restore(path)
    assert [c._read().device.id for c in v.values] == [0, 1]
    assert [c.numpy().tolist() for c in v.values] == [[0.0, 1.0, 2.0]] * 2
    assert [float(c.numpy()) for c in s.values] == [5.0, 5.0]


def _cluster_fit():
    strategy = ml.MultiWorkerMirroredStrategy()
    return _fit(strategy)[:2]


def test_simulated_gpu_cluster_trains_like_the_cpu_cluster(cupy):
    cpu = SimCluster(workers=2, devices_per_worker=2).run(_cluster_fit).values()
    gpu = SimCluster(workers=2, devices_per_worker=2, device_type="GPU").run(_cluster_fit).values()
    for a, b in zip(gpu, cpu):
        _assert_same_training(a, b)


@pytest.mark.gpu
def test_real_cupy_fit_matches_numpy():
    cupy = _real_cupy()
    host = _fit()
    device = _fit(to_device=cupy.asarray)
    for a, b in zip(device[0], host[0]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_real_cupy_mirrored_strategy_on_every_gpu():
    cupy = _real_cupy()
    count = cupy.cuda.runtime.getDeviceCount()
    strategy = ml.MirroredStrategy([f"/gpu:{k}" for k in range(count)])
    host = _fit(ml.MirroredStrategy([f"/cpu:{k}" for k in range(count)]))
    device = _fit(strategy)
    for a, b in zip(device[0], host[0]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for weight in device[2].weights:
        assert [c._read().device.id for c in weight.values] == list(range(count))


def test_distributed_batches_arrive_on_each_replicas_gpu(cupy):
    strategy = ml.MirroredStrategy(["/gpu:0", "/gpu:1"])
    batches = list(strategy.experimental_distribute_dataset(md.Dataset.range(6).batch(3)))
    assert [[b.device.id for b in batch.values] for batch in batches] == [[0, 1], [0, 1]]
    assert [[b.get().tolist() for b in batch.values] for batch in batches] == [[[0, 1], [2]], [[3, 4], [5]]]


def test_strategies_default_to_every_visible_gpu(cupy):
    strategy = ml.MirroredStrategy()
    assert strategy.extended.worker_devices == tuple(f"/job:localhost/replica:0/task:0/device:GPU:{k}"
                                                     for k in range(fake_cupy.DEVICE_COUNT))
    with strategy.scope():
        v = ml.Variable(np.ones(2, np.float32))
    assert [c._read().device.id for c in v.values] == list(range(fake_cupy.DEVICE_COUNT))


def _custom_loop(strategy):
    """Three GradientTape steps of a regularized model with RMSprop; the host weights afterwards."""
    with strategy.scope():
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="relu",
                                                                        kernel_regularizer=keras.regularizers.L2(0.01)),
                                  keras.layers.Dense(3)])
        model.set_weights([np.full(w.shape, 0.1 * (i + 1), np.float32) for i, w in enumerate(model.get_weights())])
        optimizer = keras.optimizers.RMSprop(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    step = tape_step(model, optimizer, loss_fn, 12, regularized=True)

    dataset = strategy.experimental_distribute_dataset(md.Dataset.from_tensor_slices((X[:36], Y[:36])).batch(12))
    losses = [float(strategy.reduce("sum", strategy.run(step, args=(batch,)), axis=None)) for batch in dataset]
    return [w.numpy() for w in model.weights], losses, model


def test_gradient_tape_custom_loop_on_two_gpus_matches_the_cpus(cupy):
    host = _custom_loop(ml.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    device = _custom_loop(ml.MirroredStrategy(["/gpu:0", "/gpu:1"]))
    _assert_same_training(device, host)
    for weight in device[2].weights:
        assert [c._read().device.id for c in weight.values] == [0, 1]


def test_a_pooling_cnn_on_simulated_gpus_trains_like_on_cpus(cupy):
    """Conv2D and the four pooling layers keep every array on its replica's (fake) GPU and train bit for bit as on
    CPUs, on 2 workers x 2 devices."""
    program = cnn_program(lambda: [
        keras.layers.Conv2D(2, 3, activation="relu", padding="same"),
        keras.layers.MaxPooling2D(), keras.layers.AveragePooling2D(2, strides=1, padding="same"),
        keras.layers.GlobalMaxPooling2D(keepdims=True), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(2)],
        image_task(16), lambda: "sgd", epochs=2)
    cpu = SimCluster(workers=2, devices_per_worker=2).run(program).values()
    gpu = SimCluster(workers=2, devices_per_worker=2, device_type="GPU").run(program).values()
    for a, b in zip(gpu, cpu):
        _assert_same_training(a, b)
