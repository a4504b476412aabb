"""tf.nn's softmax and cross-entropies, clipping by norm and tensor conversion beyond the recorded TF cases
(tests/conformance/ops_cases.py): properties over random inputs, gradients against finite differences, the TF
rounding rules of the kernels, conversion errors, IndexedSlices, and a classifier trained in simulated replicas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mirrorlab.tf as ml
from mirrorlab import errors
from mirrorlab.tf._kernels import nn_kernels

LOGITS = hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
                    elements=st.floats(-30, 30, width=32))


def _gradient(fn, value):
    """d(sum fn(v))/dv on a tape, for a float32 variable v holding ``value``."""
    v = ml.Variable(np.asarray(value, np.float32))
    with ml.GradientTape() as tape:
        loss = ml.reduce_sum(fn(v))
    return tape.gradient(loss, v)


def _numeric_gradient(fn, value, step=1e-2):
    """Central differences of sum(fn(x)) on float32 inputs, summed in float64."""
    value = np.asarray(value, np.float32)
    grad = np.zeros(value.shape, np.float64)
    for i in np.ndindex(value.shape):
        up, down = value.copy(), value.copy()
        up[i] += np.float32(step)
        down[i] -= np.float32(step)
        grad[i] = (np.sum(np.asarray(fn(up), np.float64)) - np.sum(np.asarray(fn(down), np.float64))) / \
            (float(up[i]) - float(down[i]))
    return grad


@settings(max_examples=60, deadline=None)
@given(LOGITS, st.integers(-3, 2))
def test_softmax_is_a_distribution_along_its_axis_and_exp_of_log_softmax(logits, axis):
    axis = axis % logits.ndim
    probabilities = ml.nn.softmax(logits, axis=axis)
    assert probabilities.dtype == np.float32 and probabilities.shape == logits.shape
    assert np.all(probabilities >= 0) and np.allclose(probabilities.sum(axis=axis), 1, atol=1e-5)
    assert np.allclose(np.exp(ml.nn.log_softmax(logits, axis=axis)), probabilities, atol=1e-6)
    assert np.allclose(ml.nn.softmax(logits + np.float32(7), axis=axis), probabilities, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, (2, 3), elements=st.floats(-5, 5, width=32)),
       hnp.arrays(np.int32, (2,), elements=st.integers(0, 2)))
def test_cross_entropies_agree_with_log_softmax_and_each_other(logits, labels):
    sparse = ml.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    dense = ml.nn.softmax_cross_entropy_with_logits(np.eye(3, dtype=np.float32)[labels], logits)
    expected = -np.take_along_axis(np.asarray(ml.nn.log_softmax(logits)), labels[:, None].astype(int), axis=1)[:, 0]
    assert np.allclose(sparse, expected, atol=1e-5) and np.allclose(dense, expected, atol=1e-5)


@pytest.mark.parametrize("fn", [
    lambda v: ml.nn.softmax(v) * np.array([1.0, -2.0, 0.5], np.float32),
    lambda v: ml.nn.log_softmax(v) * np.array([1.0, -2.0, 0.5], np.float32),
    lambda v: ml.nn.sparse_softmax_cross_entropy_with_logits([2], ml.reshape(v, (1, 3))),
    lambda v: ml.nn.softmax_cross_entropy_with_logits([[0.2, 0.3, 0.5]], ml.reshape(v, (1, 3))),
    lambda v: ml.nn.sigmoid_cross_entropy_with_logits(np.array([0.0, 1.0, 0.3], np.float32), v),
    lambda v: ml.nn.l2_loss(v),
    lambda v: ml.clip_by_norm(v, 1.0) * np.array([1.0, 2.0, 3.0], np.float32),
    lambda v: ml.clip_by_global_norm([v, v * 2.0], 1.0)[0][1],
    lambda v: ml.linalg.global_norm([v]),
])
def test_gradients_match_finite_differences(fn):
    value = [0.4, -1.3, 2.1]
    assert np.allclose(_gradient(fn, value), _numeric_gradient(fn, value), atol=2e-3)


def test_dense_cross_entropy_differentiates_the_labels_too():
    logits = np.array([1.0, -2.0, 0.5], np.float32)
    grad = _gradient(lambda v: ml.nn.softmax_cross_entropy_with_logits(v, logits), [0.2, 0.3, 0.5])
    assert np.array_equal(grad, -np.asarray(ml.nn.log_softmax(logits)))


def test_float16_logits_are_computed_in_float32_and_given_back_in_float16():
    logits = np.array([[1.0, 2.0], [0.0, 0.0]], np.float16)
    loss = ml.nn.sparse_softmax_cross_entropy_with_logits([1, 0], logits)
    assert loss.dtype == np.float16
    assert np.array_equal(loss, ml.nn.sparse_softmax_cross_entropy_with_logits([1, 0], logits.astype(np.float32))
                          .astype(np.float16))
    v = ml.Variable(logits)
    with ml.GradientTape() as tape:
        total = ml.reduce_sum(ml.nn.softmax_cross_entropy_with_logits([[0.0, 1.0], [1.0, 0.0]], v))
    assert tape.gradient(total, v).dtype == np.float16


def test_kernels_round_exp_correctly_and_flush_subnormal_results_as_tf():
    x = np.array([-100.0, -87.5, 0.3, 1.0], np.float32)
    rounded = np.exp(x.astype(np.float64)).astype(np.float32)  # correctly rounded, as glibc's expf
    assert np.array_equal(nn_kernels.exp(x), [0.0, 0.0, rounded[2], rounded[3]])
    assert np.array_equal(nn_kernels.softmax(np.array([0.0, -100.0], np.float32)), [1.0, 0.0])
    y = np.array([0.5, 2.0, 10.0, 123.25], np.float32)
    assert np.array_equal(nn_kernels.log(y), np.log(y.astype(np.float64)).astype(np.float32))


def test_sparse_label_errors_name_tf_s_label_in_tf_and_keras():
    logits = np.zeros((3, 2), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"label value of -2 .*Label values: 0 -1 -2 \["):
        ml.nn.sparse_softmax_cross_entropy_with_logits([0, -1, -2], logits)
    with pytest.raises(errors.InvalidArgumentError, match=r"label value of 5 .*Label values: 3 0 5 \[.*\nFix: "):
        ml.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(np.array([3, 0, 5]), logits)


def test_keras_clipnorm_is_clip_by_norm():
    v = ml.Variable(np.array([3.0, -4.0, 12.0], np.float32))
    ml.keras.optimizers.SGD(learning_rate=1.0, clipnorm=2.5).apply_gradients([(np.array([0.3, 4.0, -7.5],
                                                                                         np.float32), v)])
    expected = np.array([3.0, -4.0, 12.0], np.float32) - ml.clip_by_norm(np.array([0.3, 4.0, -7.5], np.float32), 2.5)
    assert np.array_equal(np.asarray(v), expected)


def test_stop_gradient_blocks_the_tape_and_reads_variables():
    v = ml.Variable([1.0, 2.0])
    with ml.GradientTape() as tape:
        blocked = ml.reduce_sum(ml.stop_gradient(v * 2.0))
    assert tape.gradient(blocked, v) is None
    with ml.GradientTape() as tape:
        half = ml.reduce_sum(ml.stop_gradient(v) * v)
    assert np.array_equal(tape.gradient(half, v), [1.0, 2.0])
    assert np.array_equal(ml.stop_gradient(v), [1.0, 2.0]) and isinstance(ml.stop_gradient(v), np.ndarray)


def test_clipping_keeps_indexed_slices_and_none():
    slices = ml.IndexedSlices(np.array([[3.0, 4.0]], np.float32), np.array([2]), np.array([5, 2]))
    clipped = ml.clip_by_norm(slices, 1.0)
    assert isinstance(clipped, ml.IndexedSlices) and clipped.indices.tolist() == [2]
    assert np.allclose(clipped.values, [[0.6, 0.8]])
    (first, second), norm = ml.clip_by_global_norm([slices, None], 2.5)
    assert second is None and np.allclose(first.values, [[1.5, 2.0]]) and float(norm) == 5.0


@settings(max_examples=50, deadline=None)
@given(st.lists(hnp.arrays(np.float32, st.integers(1, 4), elements=st.floats(-100, 100, width=32)), min_size=1,
                max_size=3), st.floats(0.1, 50))
def test_clip_by_global_norm_bounds_the_norm_and_keeps_small_lists(tensors, clip_norm):
    clipped, norm = ml.clip_by_global_norm(tensors, clip_norm)
    assert np.isclose(norm, np.sqrt(sum(np.sum(t.astype(np.float64) ** 2) for t in tensors)), rtol=1e-5)
    assert float(ml.linalg.global_norm(clipped)) <= clip_norm * (1 + 1e-5)
    if norm <= np.float32(clip_norm):
        assert all(np.allclose(c, t, rtol=1e-6) for c, t in zip(clipped, tensors))
    _, given_norm = ml.clip_by_global_norm(tensors, clip_norm, use_norm=np.float32(3.0))
    assert float(given_norm) == 3.0


def test_convert_to_tensor_refuses_another_dtype_for_variables_and_tape_values_only():
    v = ml.Variable([1.0, 2.0])
    with pytest.raises(ValueError, match=r"Incompatible type conversion requested to type float64 for `tf.Variable of "
                                         r"type float32.*\nFix: "):
        ml.convert_to_tensor(v, ml.float64)
    with ml.GradientTape() as tape:
        doubled = v * 2.0
        with pytest.raises(ValueError, match="Tensor conversion requested dtype float64 for Tensor with dtype float32"):
            ml.convert_to_tensor(doubled, ml.float64)
        assert ml.convert_to_tensor(doubled, dtype_hint=ml.float64) is doubled
        loss = ml.reduce_sum(ml.convert_to_tensor(v) * 3.0)
    assert np.array_equal(tape.gradient(loss, v), [3.0, 3.0])
    assert ml.convert_to_tensor(np.array([1.5], np.float32), ml.float64).dtype == np.float64  # arrays are cast
    with pytest.raises(ValueError, match="non-rectangular"):
        ml.convert_to_tensor([[1], [2, 3]])
    with pytest.raises(TypeError, match="Cannot convert 'a' to EagerTensor of dtype float"):
        ml.convert_to_tensor("a", ml.float32)


def test_is_tensor_says_yes_to_arrays_variables_and_tape_values_only():
    v = ml.Variable(1.0)
    with ml.GradientTape():
        tracked = v * 2.0
    assert all(ml.is_tensor(x) for x in (np.zeros(2), v, tracked, ml.constant([1, 2])))
    assert not any(ml.is_tensor(x) for x in (1.0, [1.0], np.float32(1.0), "a", None))


def test_softmax_classifier_trains_in_replicas_as_on_the_full_batch():
    """Sparse cross-entropy on 2x2 simulated replicas with compute_average_loss: the summed replica losses and the
    trained weights equal one full-batch tape step."""
    from mirrorlab.sim import SimCluster
    rng = np.random.default_rng(5)
    x_all = rng.normal(size=(8, 3)).astype(np.float32)
    y_all = rng.integers(0, 4, size=8).astype(np.int32)

    def step_on(w, x, y, batch):
        with ml.GradientTape() as tape:
            loss = ml.nn.compute_average_loss(ml.nn.sparse_softmax_cross_entropy_with_logits(y, x @ w),
                                              global_batch_size=batch)
        return loss, tape.gradient(loss, w)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            w = ml.Variable(np.zeros((3, 4), np.float32))
        batch = strategy.experimental_distribute_values_from_function(
            lambda ctx: tuple(a[2 * ctx.replica_id_in_sync_group:][:2] for a in (x_all, y_all)))

        def step(x, y):
            loss, grad = step_on(w, x, y, 8)
            w.assign_sub(0.5 * ml.get_replica_context().all_reduce(ml.distribute.ReduceOp.SUM, grad))
            return loss
        loss = strategy.reduce(ml.distribute.ReduceOp.SUM, strategy.run(step, args=batch), axis=None)
        return float(loss), np.asarray(w).copy()

    full = ml.Variable(np.zeros((3, 4), np.float32))
    loss, grad = step_on(full, x_all, y_all, 8)
    for replica_loss, weights in SimCluster(workers=2, devices_per_worker=2, seed=1).run(program).values():
        assert np.isclose(replica_loss, float(loss), rtol=1e-6)
        assert np.allclose(weights, -0.5 * np.asarray(grad), atol=1e-6)
