"""``OneDeviceStrategy``: TF 2.21's behaviour (observed with tensorflow-cpu 2.21.0): a scope of its own, plain
variables that remember it, run on one device, values handed back as given, Keras and checkpoints unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab.tf as ml


@pytest.fixture()
def strategy():
    return ml.distribute.OneDeviceStrategy("/cpu:0")


def test_one_device_strategy_has_one_replica_on_its_device(strategy):
    """num_replicas_in_sync 1, its canonical device for workers and parameters, no cluster resolver."""
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    assert strategy.num_replicas_in_sync == 1 and strategy.cluster_resolver is None
    assert strategy.extended.worker_devices == strategy.extended.parameter_devices == (device,)
    assert ml.distribute.OneDeviceStrategy("/gpu:0").extended.worker_devices == (
        "/job:localhost/replica:0/task:0/device:GPU:0",)
    with pytest.raises(ValueError):
        ml.distribute.OneDeviceStrategy("/foo:0")


def test_variables_in_its_scope_are_plain_but_created_in_scope(strategy):
    """Variables (ON_WRITE and ON_READ) are plain ones; the strategy knows them; its scope is cross-replica."""
    with strategy.scope():
        assert ml.distribute.get_strategy() is strategy and ml.distribute.in_cross_replica_context()
        v = ml.Variable(1.0)
        w = ml.Variable(2.0, synchronization=ml.VariableSynchronization.ON_READ,
                        aggregation=ml.VariableAggregation.SUM)
    assert type(v) is ml.Variable and type(w) is ml.Variable
    assert w.synchronization == ml.VariableSynchronization.ON_READ
    assert strategy.extended.variable_created_in_scope(v)
    assert not strategy.extended.variable_created_in_scope(ml.Variable(3.0))
    assert strategy.experimental_local_results(v) == (v,)
    with pytest.raises(RuntimeError, match='Need to be inside "with strategy.scope\\(\\)"'):
        strategy.extended.colocate_vars_with(v)
    with strategy.scope(), strategy.extended.colocate_vars_with(v):
        assert type(ml.Variable(4.0)) is ml.Variable


def test_run_reduce_and_gather_hand_values_back(strategy):
    """run calls fn once (int32 replica id, the device); reduce without axis is the identity, with one it
    reduces the tensor; gather gives the value; values from a function are not wrapped."""
    def fn(x):
        ctx = ml.get_replica_context()
        return ctx.replica_id_in_sync_group, ctx.all_reduce("SUM", x), ctx.devices

    rid, summed, devices = strategy.run(fn, args=(np.array([1.0, 2.0], np.float32),))
    assert np.asarray(rid).dtype == np.int32 and int(rid) == 0
    np.testing.assert_array_equal(summed, [1.0, 2.0])
    assert devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)
    assert strategy.reduce("SUM", 3.0, axis=None) == 3.0
    np.testing.assert_array_equal(strategy.reduce("MEAN", np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), axis=1),
                                  [1.5, 3.5])
    assert np.isnan(strategy.reduce("MEAN", np.zeros([0], np.float32), axis=0))
    np.testing.assert_array_equal(strategy.gather(np.array([[1.0, 2.0]]), axis=1), [[1.0, 2.0]])
    assert strategy.experimental_distribute_values_from_function(lambda c: c.replica_id_in_sync_group) == 0
    batches = [np.asarray(b).tolist() for b in strategy.experimental_distribute_dataset(ml.data.Dataset.range(7).batch(3))]
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]


def test_keras_fit_under_one_device_strategy_matches_tf():
    """A Dense model compiled and fit in its scope: TF 2.21's losses, predictions and evaluation."""
    keras = ml.keras
    strategy = ml.distribute.OneDeviceStrategy("/cpu:0")
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(16, 2)
    y = (x[:, :1] * 2 - x[:, 1:]).astype(np.float32)
    with strategy.scope():
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
    history = model.fit(ml.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=2, verbose=0).history
    np.testing.assert_allclose(history["loss"], [0.47646, 0.29515], atol=1e-5)
    np.testing.assert_allclose(history["mae"], [0.59155, 0.4526], atol=1e-5)
    np.testing.assert_allclose(model.predict(x[:3], verbose=0).ravel(), [-0.19435, -0.17481, -0.15527], atol=1e-5)
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), [0.17869, 0.34591], atol=1e-5)
