"""Sample weights, class weights and validation_split in ``fit``/``evaluate``: Keras 3's arithmetic checked by hand,
on a simulated cluster, and over random splits (the values against TF are in keras_cases.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab import errors
from mirrorlab.tf import keras
from mirrorlab.tf.keras.data_adapter import class_weight_map_fn, class_weight_to_sample_weights, train_validation_split
from mirrorlab.sim import SimCluster

RNG = np.random.default_rng(4)
X = RNG.standard_normal((16, 2)).astype(np.float32)
Y = RNG.standard_normal((16, 1)).astype(np.float32)
W = RNG.uniform(0, 3, 16).astype(np.float32)
KERNEL, BIAS = np.array([[0.5], [-0.25]], np.float32), np.array([0.1], np.float32)


def linear_model() -> keras.Model:
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", weighted_metrics=["mse"])
    model.set_weights([KERNEL, BIAS])
    return model


def test_sample_weights_scale_the_loss_over_the_batch_size_not_the_weights():
    # One global batch of 4 on 2 replicas: each replica's loss is sum(w * l) / 2 / 2, so the summed gradient is
    # sum(w * dl) / 4 and the loss metric sum(w * l) / 4; the weighted metric divides by sum(w) instead.
    x, y, w = X[:4], Y[:4], W[:4]
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = linear_model()
    history = model.fit(x, y, sample_weight=w, batch_size=4, shuffle=False, verbose=0).history
    err = x @ KERNEL + BIAS - y
    per_example = err[:, 0] ** 2
    np.testing.assert_allclose(model.get_weights()[0], KERNEL - 0.1 * 2 * x.T @ (w[:, None] * err) / 4, rtol=1e-6)
    assert history["loss"][0] == pytest.approx(float((w * per_example).sum() / 4), rel=1e-6)
    assert history["mse"][0] == pytest.approx(float((w * per_example).sum() / w.sum()), rel=1e-6)


def weighted_program(dataset_of_triples: bool) -> tuple[list[np.ndarray], dict]:
    strategy = ml.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = linear_model()
    if dataset_of_triples:
        history = model.fit(md.Dataset.from_tensor_slices((X, Y, W)).batch(8), epochs=2, verbose=0)
    else:
        history = model.fit(X, Y, sample_weight=W, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return model.get_weights(), history.history


def test_sample_weights_train_alike_on_a_cluster_and_on_one_device():
    single = SimCluster(workers=1).run(weighted_program, False).values()[0]
    for workers, devices in ((2, 2), (1, 4)):
        for triples in (False, True):
            for weights, history in SimCluster(workers=workers, devices_per_worker=devices).run(
                    weighted_program, triples).values():
                for a, b in zip(weights, single[0]):
                    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(history["loss"], single[1]["loss"], rtol=1e-5)


@settings(max_examples=60, deadline=None)
@given(samples=st.integers(1, 40), split=st.floats(-2.0, 3.0, allow_nan=False))
def test_validation_split_keeps_the_first_part_for_training(samples, split):
    x, y, w = np.arange(samples * 2).reshape(samples, 2), np.arange(samples), np.ones(samples)
    split_at = math.floor(samples * (1.0 - split))
    if split_at in (0, samples):
        with pytest.raises(ValueError, match="not sufficient to split it"):
            train_validation_split((x, y, w), split)
        return
    (xt, yt, wt), (xv, yv, wv) = train_validation_split((x, y, w), split)
    np.testing.assert_array_equal(yt, y[0:split_at])
    np.testing.assert_array_equal(yv, y[split_at:samples])
    assert len(xt) == len(yt) == len(wt) and len(xv) == len(yv) == len(wv)


def test_validation_split_passes_missing_weights_and_refuses_datasets():
    (_, _, train_weights), (_, _, validation_weights) = train_validation_split((np.ones((4, 1)), np.ones(4), None), 0.5)
    assert train_weights is None and validation_weights is None
    with pytest.raises(ValueError, match="only supported for tensors or NumPy arrays"):
        train_validation_split((md.Dataset.range(4), None, None), 0.5)


@pytest.mark.parametrize("labels", [np.array([0, 2, 1, 2]), np.array([[0], [2], [1], [2]]), np.eye(3)[[0, 2, 1, 2]],
                                    np.array([0.2, 1.6, 0.9, 2.4])])
def test_class_weights_read_sparse_column_one_hot_and_rounded_labels_alike(labels):
    class_weight = {0: 0.5, 1: 2.0, 2: 4.0}
    np.testing.assert_array_equal(class_weight_to_sample_weights(labels, class_weight), [0.5, 4.0, 2.0, 4.0])
    _, _, weights = class_weight_map_fn(class_weight)(np.zeros((4, 3)), labels)
    np.testing.assert_array_equal(weights, [0.5, 4.0, 2.0, 4.0])


def test_class_weights_of_missing_classes_weigh_one_for_arrays_and_fail_for_datasets():
    labels = np.array([0, 3, 1])
    np.testing.assert_array_equal(class_weight_to_sample_weights(labels, {1: 2.0}), [1.0, 1.0, 2.0])
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = 3 is not in \[0, 2\)"):
        class_weight_map_fn({1: 2.0})(np.zeros((3, 1)), labels)


def test_a_compiled_step_reduces_an_empty_batch_to_zero():
    loss = keras.losses.MeanSquaredError()
    empty = np.zeros((0, 1), np.float32)
    assert np.asarray(loss(empty, empty)).shape == (0,)  # eager Keras passes empty losses through
    assert float(np.asarray(loss.in_step(empty, empty, np.zeros(0)))) == 0.0
