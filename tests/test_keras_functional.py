"""Functional Keras models (``keras.Model(inputs, outputs)`` over layers called on ``keras.Input``) on mirrorlab and
simulated clusters."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab.tf import keras
from mirrorlab.sim import SimCluster

from keras_programs import fit_program, single_and_cluster_runs

RNG = np.random.default_rng(11)
X = RNG.standard_normal((48, 6)).astype(np.float32)
Y = np.argmax(X @ RNG.standard_normal((6, 3)), axis=1)


def branched() -> keras.Model:
    """Two branches from one input (one through a shared layer used twice), joined by Concatenate and Add."""
    inputs = keras.Input((6,))
    shared = keras.layers.Dense(6, activation="tanh", kernel_initializer=keras.initializers.GlorotUniform(1))
    twice = shared(shared(inputs))
    wide = keras.layers.Dense(4, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(2))(inputs)
    joined = keras.layers.Concatenate()([twice, wide])
    head = keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(3))
    return keras.Model(inputs, keras.layers.Add()([head(joined), keras.layers.Dense(3)(inputs) * 0.5]))


def test_a_branched_functional_model_trains_on_a_cluster_as_on_one_device():
    """Gradients flow through both branches, the shared layer (used twice) and the merge layers, and sum exactly
    over replicas."""
    single_weights, single_losses = single_and_cluster_runs(branched, X, Y)
    assert len(single_weights) == 8  # the shared layer's kernel and bias once, then wide, head and the side Dense
    assert single_losses[1] < single_losses[0]


def test_a_chain_of_layers_as_a_functional_model_equals_sequential_bit_for_bit():
    def layers():
        return [keras.layers.Dense(8, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(1)),
                keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(2))]

    def functional():
        x = inputs = keras.Input((6,))
        for layer in layers():
            x = layer(x)
        return keras.Model(inputs, x)
    (seq_weights, seq_losses), = SimCluster(1, 2).run(fit_program, lambda: keras.Sequential(
        [keras.Input((6,)), *layers()]), X, Y).values()
    (fun_weights, fun_losses), = SimCluster(1, 2).run(fit_program, functional, X, Y).values()
    assert seq_losses == fun_losses
    for a, b in zip(seq_weights, fun_weights, strict=True):
        np.testing.assert_array_equal(a, b)


def test_graph_order_layers_and_symbolic_shapes_follow_keras():
    keras.backend.clear_session()
    a, b = keras.Input((2,), name="a"), keras.Input((3,), name="b")
    deep = keras.layers.Dense(2)(keras.layers.Dense(4)(b))
    model = keras.Model([a, b], keras.layers.Concatenate()([a, deep]))
    # deepest first (b, then the Dense(4) made second), ties in the order a walk from the output reaches them
    assert [layer.name for layer in model.layers] == ["b", "dense_1", "a", "dense", "concatenate"]
    assert model.input_shape == [(None, 2), (None, 3)] and model.output_shape == (None, 4)
    assert deep.shape == (None, 2) and model.output.name == "keras_tensor_2"  # (named inputs take no number)
    assert model.get_weights()[0].shape == (3, 4)


def test_multiple_inputs_by_list_and_dict_fit_and_predict():
    a, b = keras.Input((2,), name="a"), keras.Input((3,), name="b")
    model = keras.Model({"a": a, "b": b}, keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))
    xa, xb = X[:, :2], X[:, 2:5]
    np.testing.assert_array_equal(model({"a": xa, "b": xb}), np.concatenate([xa, xb], 1) @ model.get_weights()[0]
                                  + model.get_weights()[1])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    before = model.evaluate({"a": xa, "b": xb}, X[:, 5:], verbose=0)
    model.fit({"a": xa, "b": xb}, X[:, 5:], batch_size=8, epochs=3, verbose=0)
    assert model.evaluate({"a": xa, "b": xb}, X[:, 5:], verbose=0) < before
    assert model.predict({"a": xa, "b": xb}, verbose=0).shape == (48, 1)
    with pytest.raises(ValueError, match='Missing data for input "b"'):
        model({"a": xa})


def test_a_functional_model_nests_as_a_layer_and_checkpoints_round_trip(tmp_path):
    inner_in = keras.Input((6,))
    inner = keras.Model(inner_in, keras.layers.Dense(4, activation="relu")(inner_in), name="inner")
    outer_in = keras.Input((6,))
    outer = keras.Model(outer_in, keras.layers.Dense(2)(inner(outer_in)))
    assert [layer.name for layer in outer.layers][1] == "inner" and len(outer.weights) == 4
    expected = outer(X[:5])
    path = ml.train.Checkpoint(model=outer).save(str(tmp_path / "ckpt"))
    outer.set_weights([np.zeros_like(w) for w in outer.get_weights()])
    ml.train.Checkpoint(model=outer).restore(path).assert_existing_objects_matched()
    np.testing.assert_array_equal(outer(X[:5]), expected)


def test_operators_on_symbolic_tensors_are_graph_operations_but_not_layers():
    inputs = keras.Input((3,))
    model = keras.Model(inputs, 2.0 - keras.layers.Dense(3, kernel_initializer="ones", use_bias=False)(inputs) / 3.0)
    assert [type(layer).__name__ for layer in model.layers] == ["InputLayer", "Dense"]
    np.testing.assert_allclose(model(np.ones((1, 3), np.float32)), [[1.0, 1.0, 1.0]])
    with pytest.raises(TypeError, match="symbolic"):
        np.asarray(inputs)


def test_what_functional_models_refuse_names_the_fix():
    inputs = keras.Input((3,))
    two_heads = keras.Model(inputs, [keras.layers.Dense(1)(inputs), keras.layers.Dense(2)(inputs)])
    assert [out.shape for out in two_heads(np.ones((4, 3), np.float32))] == [(4, 1), (4, 2)]
    with pytest.raises(NotImplementedError, match="(?s)2 outputs.*Fix:"):
        two_heads.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="(?s)Output with path `` is not connected.*Fix: list every keras.Input"):
        keras.Model(inputs, keras.layers.Dense(1)(keras.Input((3,))))
    with pytest.raises(ValueError, match="Input 0 with name .* expected shape=\\(None, 3\\), found shape=\\(2, 4\\)"):
        keras.Model(inputs, keras.layers.Dense(1)(inputs))(np.ones((2, 4), np.float32))


def test_a_model_without_trainable_weights_fits_computing_only_the_loss():
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Activation("tanh")(inputs * 2.0))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    with pytest.warns(UserWarning, match="does not have any trainable weights"):
        history = model.fit(X[:8, :2], np.zeros((8, 2), np.float32), batch_size=4, epochs=2, verbose=0)
    expected = float(np.mean(np.tanh(X[:8, :2] * 2.0) ** 2))
    np.testing.assert_allclose(history.history["loss"], [expected, expected], rtol=1e-6)
    assert int(model.optimizer.iterations.numpy()) == 0  # no step applied gradients


def test_unknown_dimensions_beyond_the_batch_stay_unknown_through_the_graph():
    sequence = keras.Input((None, 3))
    hidden = keras.layers.Dense(4)(sequence)
    pooled = keras.ops.mean(hidden, axis=1)
    model = keras.Model(sequence, keras.layers.Dense(2)(pooled))
    assert hidden.shape == (None, None, 4) and pooled.shape == (None, 4) and model.output_shape == (None, 2)
    assert model(np.ones((2, 5, 3), np.float32)).shape == (2, 2)
    assert model(np.ones((1, 7, 3), np.float32)).shape == (1, 2)
