"""Embedding, LayerNormalization and Rescaling: their gradients against hand computations and finite differences,
sparse (IndexedSlices) gradients through the tape and the optimizers, and training on simulated clusters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab import errors
from mirrorlab.tf import keras

from keras_programs import single_and_cluster_runs

RNG = np.random.default_rng(8)
TOKENS = RNG.integers(0, 9, (48, 5)).astype(np.int32)  # index 9 of the 10-row table is never looked up
LABELS = (TOKENS.sum(axis=1) % 3).astype(np.int64)


def token_model() -> keras.Sequential:
    return keras.Sequential([keras.Input((5,), dtype="int32"),
                             keras.layers.Embedding(10, 4, embeddings_initializer=keras.initializers.RandomUniform(
                                 -0.5, 0.5, seed=3)),
                             keras.layers.LayerNormalization(), keras.layers.Flatten(),
                             keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(2))])


def test_embedding_and_layer_normalization_train_on_a_cluster_as_on_one_device():
    """Sparse gradients are gathered (not summed) across the 4 replicas of 2 workers and give the global update."""
    weights, losses = single_and_cluster_runs(token_model, TOKENS, LABELS)
    table = weights[0]
    start = keras.initializers.RandomUniform(-0.5, 0.5, seed=3)((10, 4), np.float32)
    np.testing.assert_array_equal(table[9], start[9])  # a row no example looks up gets no update
    assert not np.allclose(table[:9], start[:9])
    assert losses[1] < losses[0]


def _tape_gradient(layer, inputs, weights):
    """d(sum(layer(inputs) * weights)) / d(the layer's trainable variables)."""
    with ml.GradientTape() as tape:
        loss = ml.reduce_sum(layer(inputs) * weights)
    return tape.gradient(loss, layer.trainable_variables)


def test_embedding_gradient_is_indexed_slices_with_repeated_rows_kept_apart():
    layer = keras.layers.Embedding(5, 2)
    indices = np.array([[1, 4], [1, -1]])  # -1 is row 4, as Keras' take counts it
    upstream = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    grad, = _tape_gradient(layer, indices, upstream)
    assert isinstance(grad, ml.IndexedSlices)
    np.testing.assert_array_equal(grad.indices, [1, 4, 1, 4])
    np.testing.assert_array_equal(grad.values, upstream.reshape(4, 2))
    expected = np.zeros((5, 2), np.float32)
    np.add.at(expected, [1, 4, 1, 4], upstream.reshape(4, 2))
    np.testing.assert_array_equal(ml.convert_to_tensor(grad), expected)


def test_two_lookups_concatenate_and_a_regularizer_makes_the_gradient_dense():
    layer = keras.layers.Embedding(4, 3)
    with ml.GradientTape() as tape:
        loss = ml.reduce_sum(layer(np.array([0, 2]))) + ml.reduce_sum(layer(np.array([2], np.int64)))
    grad, = tape.gradient(loss, layer.trainable_variables)
    assert isinstance(grad, ml.IndexedSlices) and grad.indices.dtype == np.int64  # int32 and int64 indices met
    assert sorted(grad.indices.tolist()) == [0, 2, 2]
    regularized = keras.layers.Embedding(4, 3, embeddings_regularizer=keras.regularizers.L2(0.5))
    with ml.GradientTape() as tape:
        loss = ml.reduce_sum(regularized(np.array([3]))) + ml.add_n(regularized.losses)
    grad, = tape.gradient(loss, regularized.trainable_variables)
    table = regularized.embeddings.numpy()
    np.testing.assert_allclose(grad, table + np.eye(4, dtype=np.float32)[3][:, None], rtol=1e-6)


def _one_step(optimizer, grad):
    var = ml.Variable(np.ones((3, 2), np.float32))
    optimizer.apply_gradients([(grad, var)])
    return var.numpy()


def test_optimizers_apply_sparse_gradients_as_keras_ops_treat_them():
    """SGD subtracts row by row; Adam's second moment sums the rows' squares (not the square of their sum)."""
    rows = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    repeated = ml.IndexedSlices(rows, np.array([2, 2]), np.array([3, 2], np.int32))
    np.testing.assert_allclose(_one_step(keras.optimizers.SGD(0.5), repeated),
                               [[1, 1], [1, 1], [1 - 0.5 * 4, 1 - 0.5 * 1]])
    beta_2 = 0.999
    updated = _one_step(keras.optimizers.Adam(0.1), repeated)
    m = (1 - 0.9) * rows.sum(axis=0)
    v = (1 - beta_2) * (rows ** 2).sum(axis=0)
    alpha = 0.1 * np.sqrt(1 - beta_2) / (1 - 0.9)
    np.testing.assert_allclose(updated[2], 1 - alpha * m / (np.sqrt(v) + 1e-7), rtol=1e-5)
    np.testing.assert_array_equal(updated[:2], np.ones((2, 2)))
    clipped = _one_step(keras.optimizers.SGD(1.0, clipvalue=1.5), repeated)  # clips each row's values
    np.testing.assert_allclose(clipped[2], [1 - (1 + 1.5), 1 - (1.5 - 1)])


def test_embedding_casts_indices_and_refuses_one_out_of_range_with_tfs_text():
    layer = keras.layers.Embedding(5, 3)
    by_int = layer(np.array([[1, 2], [4, 0]], np.int64))
    np.testing.assert_array_equal(layer(np.array([[1.7, 2.2], [4.0, 0.9]])), by_int)  # floats truncate to int32
    assert by_int.dtype == np.float32 and by_int.shape == (2, 2, 3)
    with pytest.raises(errors.InvalidArgumentError) as raised:
        layer(np.array([[1, 2], [7, 9]]))
    first, _, detail = str(raised.value).partition("\n\n")
    assert first == "Exception encountered when calling Embedding.call()."
    assert "indices[1,0] = 7 is not in [0, 5) [Op:GatherV2]" in detail and "Fix:" in detail


def test_embedding_refuses_mask_zero_and_names_the_fix():
    with pytest.raises(NotImplementedError, match="mask_zero=False"):
        keras.layers.Embedding(5, 3, mask_zero=True)


def test_embedding_weights_argument_sets_the_table_and_checks_its_shape():
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(keras.layers.Embedding(3, 2, weights=[table])(np.array([2])), table[2:])
    with pytest.raises(ValueError, match="not compatible"):
        keras.layers.Embedding(4, 2, weights=[table])


def test_symbolic_calls_give_keras_shapes_and_dtypes():
    tokens = keras.Input((7,), dtype="int64")
    embedded = keras.layers.Embedding(10, 4)(tokens)
    normalized = keras.layers.LayerNormalization(axis=(1, 2))(embedded)
    pixels = keras.Input((2, 2), dtype="uint8")
    scaled = keras.layers.Rescaling(1 / 255)(pixels)
    assert [embedded.shape, normalized.shape, scaled.shape] == [(None, 7, 4), (None, 7, 4), (None, 2, 2)]
    assert {np.dtype(t.dtype) for t in (embedded, normalized, scaled)} == {np.dtype(np.float32)}


def _finite_differences(f, value, step=1e-6):
    """The gradient of the scalar ``f`` at ``value`` by central differences."""
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        up, down = value.copy(), value.copy()
        up[index] += step
        down[index] -= step
        grad[index] = (f(up) - f(down)) / (2 * step)
    return grad


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(2, 4), min_size=2, max_size=3), data=st.data(),
       center=st.booleans(), scale=st.booleans())
def test_layer_normalization_gradients_match_finite_differences(shape, data, center, scale):
    axes = data.draw(st.sets(st.integers(1, len(shape) - 1), min_size=1))
    rng = np.random.default_rng(len(shape) * 7 + sum(axes))
    x = rng.uniform(-2, 2, shape)
    upstream = rng.uniform(-1, 1, shape)
    layer = keras.layers.LayerNormalization(axis=sorted(axes), epsilon=0.01, center=center, scale=scale,
                                            dtype="float64")
    layer.build(tuple(shape))
    for weight in layer.weights:
        weight.assign(rng.uniform(0.5, 1.5, weight.shape))
    source = ml.Variable(x)
    with ml.GradientTape() as tape:
        loss = ml.reduce_sum(layer(source * 1.0) * upstream)
    grads = tape.gradient(loss, [source, *layer.trainable_variables])

    def loss_at(value, var=None):
        if var is not None:
            saved = var.numpy()
            var.assign(value)
        result = float(np.sum(np.asarray(layer(x if var is not None else value)) * upstream))
        if var is not None:
            var.assign(saved)
        return result
    np.testing.assert_allclose(grads[0], _finite_differences(loss_at, x), rtol=1e-5, atol=1e-6)
    for grad, var in zip(grads[1:], layer.trainable_variables, strict=True):
        np.testing.assert_allclose(grad, _finite_differences(lambda v: loss_at(v, var), var.numpy()),
                                   rtol=1e-5, atol=1e-6)


def test_layer_normalization_weights_and_dtypes_follow_keras():
    layer = keras.layers.LayerNormalization(axis=(2, 1))
    out = layer(np.arange(24, dtype=np.float64).reshape(2, 3, 4))
    assert [w.name.split("/")[-1] for w in layer.weights] == ["gamma:0", "beta:0"]
    assert layer.gamma.shape == (3, 4) and layer.axis == [1, 2]
    assert out.dtype == np.float32  # computed in float64, then cast to the layer's dtype
    np.testing.assert_allclose(out.reshape(2, 12).mean(axis=1), 0, atol=1e-6)
    truncated = keras.layers.LayerNormalization()(np.array([[1, 2, 4]], np.int32))
    np.testing.assert_array_equal(truncated, [[-1.0, 0.0, 1.0]])  # integers cast back before the float32 output
    with pytest.raises(TypeError, match="'axis'"):
        keras.layers.LayerNormalization(axis="last")


def test_rescaling_casts_any_input_and_differentiates_by_its_scale():
    layer = keras.layers.Rescaling(np.array([0.5, 2.0]), offset=1.0)
    out = layer(np.array([[255, 4]], np.uint8))
    assert out.dtype == np.float32 and layer.weights == []
    np.testing.assert_array_equal(out, [[128.5, 9.0]])
    source = ml.Variable(np.ones((3, 2), np.float32))
    with ml.GradientTape() as tape:
        loss = ml.reduce_sum(layer(source * 1.0) * np.array([1.0, -3.0], np.float32))
    np.testing.assert_array_equal(tape.gradient(loss, source), np.tile([[0.5, -6.0]], (3, 1)))
