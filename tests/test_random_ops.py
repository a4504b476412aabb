"""Random ops with TF's values (``mirrorlab.random``, ``random_kernels``, ``keras.random``): bits and digests recorded
from TensorFlow 2.21 on this CPU, the stateful ops' streams, and Keras' seeds (initializers, Dropout, replicas)."""

from __future__ import annotations

import hashlib
import platform
import random

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab.tf._kernels import libm
from mirrorlab.tf._kernels import random_kernels as kernels
from mirrorlab.sim import SimCluster

keras = ml.keras
GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
needs_glibc = pytest.mark.skipif(not GLIBC, reason="normals go through the C library's logf/sincosf: TF's bits were "
                                                   "recorded with glibc's")


@pytest.fixture(autouse=True)
def _no_global_seed_afterwards():
    """These tests set TF's global seed in the test process; later tests expect none."""
    yield
    ml.random.set_seed(None)


def _digest(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()[:16]


def test_stateless_uniform_gives_tensorflows_bits():
    assert ml.random.stateless_uniform([6], [1, 2]).view(np.uint32).tolist() == [
        1062736984, 1044686728, 1065289852, 1042562200, 1049313868, 1059470218]
    assert ml.random.stateless_uniform([4], [1, 2], dtype=ml.float16).view(np.uint16).tolist() == [
        14424, 13192, 11200, 15142]
    assert _digest(ml.random.stateless_uniform([100003], [3, 4], dtype=ml.float64)) == "847ab13e36441795"


@needs_glibc
def test_stateless_normals_give_tensorflows_bits():
    assert ml.random.stateless_normal([5], [1, 2]).view(np.uint32).tolist() == [
        1057704653, 1045715841, 1033283812, 1027486248, 3215366783]
    assert ml.random.stateless_normal([3], [1, 2], dtype=ml.float64).view(np.uint64).tolist() == [
        13817667380461884307, 4604846016580931118, 13832666858564119687]
    assert ml.random.stateless_truncated_normal([6], [1, 2]).view(np.uint32).tolist() == [
        1057704653, 1045715841, 1033283812, 1027486248, 1043086892, 3218583340]
    assert _digest(ml.random.stateless_normal([100003], [3, 4])) == "cd87f6ae4ffd7552"


@needs_glibc
def test_truncated_normal_groups_that_need_more_draws_match_tensorflow():
    """Group 1773 of this draw has fewer than 4 values within the bounds in its first 2 blocks (so does about one
    group in 100,000), and 18 groups of the float64 draw: both are drawn on as TF's kernel draws them."""
    values = ml.random.stateless_truncated_normal([7100], [30, 1])
    assert values[1773 * 4:1774 * 4].view(np.uint32).tolist() == [1060185188, 1063072405, 1035091486, 1070173179]
    assert _digest(values) == "ef27fae03d113a36"
    assert _digest(ml.random.stateless_truncated_normal([100001], [7, 8], dtype=ml.float64)) == "eadf2e1ededf11d5"


@needs_glibc
def test_stateful_ops_keep_their_stream_as_tensorflows_cached_kernels():
    ml.random.set_seed(11)
    values = np.concatenate([ml.random.normal([1001], seed=2), ml.random.normal([1001], seed=2),
                             ml.random.truncated_normal([999])])
    assert _digest(values) == "e75ae1df1928c061"


def test_set_seed_restarts_stateful_streams_and_seeds_repeat_only_then():
    ml.random.set_seed(3)
    first, second = ml.random.uniform([3], seed=1), ml.random.uniform([3], seed=1)
    assert not np.array_equal(first, second)
    ml.random.set_seed(3)
    np.testing.assert_array_equal(ml.random.uniform([3], seed=1), first)
    np.testing.assert_array_equal(ml.random.stateless_uniform([3], [5, 6]), ml.random.stateless_uniform([3], [5, 6]))


def test_random_op_arguments_are_checked_as_tf_checks_them():
    with pytest.raises(ml.errors.InvalidArgumentError, match=r"seed must have shape \[2\], not \[3\]"):
        ml.random.stateless_uniform([2], [1, 2, 3])
    with pytest.raises(ml.errors.InvalidArgumentError, match="Need minval < maxval, got 5 >= 5"):
        ml.random.stateless_uniform([2], [1, 2], 5, 5, ml.int32)
    with pytest.raises(ValueError, match="Must specify maxval for integer dtype tf.int32"):
        ml.random.uniform([2], dtype=ml.int32)
    with pytest.raises(ValueError, match="Philox"):
        ml.random.stateless_normal([2], [1, 2], alg="threefry")


def test_without_a_c_math_library_normals_are_within_two_ulps(monkeypatch):
    exact = ml.random.stateless_normal([2000], [9, 9])
    monkeypatch.setattr(libm, "_function", lambda *args: None)
    approximate = ml.random.stateless_normal([2000], [9, 9])
    ulps = np.abs(exact.view(np.int32).astype(np.int64) - approximate.view(np.int32).astype(np.int64))
    assert ulps.max() <= 2


def test_keras_default_seeds_come_from_pythons_random():
    """Keras draws an unseeded initializer's seed from ``random`` when the layer is made, so set_random_seed fixes
    the weights; an int seed folds into TF's int32 range."""
    keras.utils.set_random_seed(5)
    layer = keras.layers.Dense(3)
    layer.build((None, 4))
    expected_seed = random.Random(5).randint(1, int(1e9))
    limit = np.sqrt(3.0 / ((4 + 3) / 2.0))
    expected = ml.random.stateless_uniform((4, 3), [expected_seed % (2**31 - 2), 0], np.float32(-limit),
                                           np.float32(limit))
    np.testing.assert_array_equal(layer.kernel.numpy(), expected)
    np.testing.assert_array_equal(keras.random.uniform((3,), seed=2**31 + 5), keras.random.uniform((3,), seed=7))


def test_int_seeded_initializers_repeat_and_seed_generators_move_on():
    fixed = keras.initializers.HeNormal(seed=1)
    np.testing.assert_array_equal(fixed((3, 3)), fixed((3, 3)))
    moving = keras.initializers.HeNormal(seed=keras.random.SeedGenerator(1))
    first, second = moving((3, 3)), moving((3, 3))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, fixed((3, 3)))


def test_dropout_states_are_variables_not_weights():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dropout(0.5),
                              keras.layers.Dense(1)])
    assert len(model.weights) == 4 and len(model.variables) == 5
    state = model.layers[1].seed_generator.state
    assert state.name.endswith("seed_generator_state:0") and not state.trainable
    assert any(v is state for v in model.non_trainable_variables)
    assert not any(w is state for w in model.non_trainable_weights)
    model(np.ones((2, 3), np.float32), training=True)
    assert state.numpy().tolist()[1] == 1


def _dropout_on_every_replica() -> list:
    keras.utils.set_random_seed(3)
    strategy = ml.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        layer = keras.layers.Dropout(0.5)
    ones = np.ones((4, 8), np.float32)
    steps = [strategy.experimental_local_results(strategy.run(lambda: layer(ones, training=True)))
             for _ in range(2)]
    return [[np.asarray(v) for v in step] for step in steps]


@pytest.mark.parametrize("seed", [0, 7])
def test_every_replica_of_every_worker_drops_the_same_inputs(seed):
    """Each replica advances its own copy of the layer's seed generator (a mirrored variable with aggregation NONE),
    so all replicas draw the same mask, and a new one each step, as TF's do."""
    workers = SimCluster(workers=2, devices_per_worker=2, seed=seed).run(_dropout_on_every_replica).values()
    steps = [[replica for worker in workers for replica in worker[step]] for step in range(2)]
    for replicas in steps:
        assert len(replicas) == 4 and all(np.array_equal(replica, replicas[0]) for replica in replicas)
    assert not np.array_equal(steps[0][0], steps[1][0])


def _unseeded_kernel() -> np.ndarray:
    strategy = ml.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    return model.weights[0].numpy()


def test_unseeded_weights_are_the_chiefs_and_do_not_depend_on_the_schedule():
    runs = [SimCluster(workers=2, seed=seed).run(_unseeded_kernel).values() for seed in (0, 1)]
    for run in runs:
        np.testing.assert_array_equal(run[0], run[1])
    np.testing.assert_array_equal(runs[0][0], runs[1][0])


def test_kernels_check_their_seed_and_types():
    with pytest.raises(ml.errors.InvalidArgumentError, match="Tseed"):
        kernels.stateless_stream([1.0, 2.0])
    with pytest.raises(ValueError, match="bfloat16"):
        kernels.float_dtype("int32")
