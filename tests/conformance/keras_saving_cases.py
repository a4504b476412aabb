"""Keras conformance cases for configs and whole-model saving: ``get_config``, ``serialize_keras_object``,
``from_config`` round trips, ``to_json``, and ``model.save``/``load_model`` of a ``.keras`` file followed by more
training (registered into ``KERAS_CASES``; recorded with the other Keras cases).

Configs are compared with Keras' ``shared_object_id`` keys removed (Keras numbers shared objects by their Python
``id``, which differs on every run).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from .keras_cases import KerasEnv, Result, attempt, case


def _stable(config: Any) -> Any:
    """``config`` as JSON holds it (tuples as lists), without Keras' ``shared_object_id`` keys (run-dependent object
    ids)."""
    if isinstance(config, dict):
        return {key: _stable(value) for key, value in config.items() if key != "shared_object_id"}
    if isinstance(config, (list, tuple)):
        return [_stable(value) for value in config]
    return config


def _serialized(env: KerasEnv, make: Any) -> Any:
    """``serialize_keras_object`` of what ``make()`` returns (or the error either raised)."""
    return attempt(lambda: _stable(env.keras.saving.serialize_keras_object(make())))


@case
def config_of_layers(env: KerasEnv) -> Result:
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again
    layers = {
        "dense_default": lambda: k.layers.Dense(3, name="d"),
        "dense_options": lambda: k.layers.Dense(5, activation="softmax", use_bias=False, name="d",
                                                kernel_initializer=k.initializers.HeNormal(seed=3),
                                                bias_initializer="ones", kernel_regularizer=k.regularizers.L1L2(0.1, 0.2),
                                                bias_regularizer="l1"),
        "dense_input_shape": lambda: k.layers.Dense(2, input_shape=(4,), name="d"),
        "conv2d": lambda: k.layers.Conv2D(4, 3, strides=2, padding="same", activation="relu", name="c"),
        "conv2d_tuple": lambda: k.layers.Conv2D(2, (2, 3), kernel_initializer="he_uniform", name="c"),
        "flatten": lambda: k.layers.Flatten(name="f"),
        "reshape": lambda: k.layers.Reshape((2, -1), name="r"),
        "activation": lambda: k.layers.Activation("tanh", name="a"),
        "dropout": lambda: k.layers.Dropout(0.25, seed=7, name="dr"),
        "dropout_noise_shape": lambda: k.layers.Dropout(0.5, noise_shape=(None, 1), name="dr"),
        "input_layer": lambda: k.layers.InputLayer(shape=(3, 2), name="i"),
        "input_layer_batch": lambda: k.layers.InputLayer(batch_shape=(8, 3), dtype="int32", name="i"),
        "max_pool": lambda: k.layers.MaxPooling2D(name="p"),
        "average_pool": lambda: k.layers.AveragePooling2D(3, strides=1, padding="same", name="p"),
        "global_average_pool": lambda: k.layers.GlobalAveragePooling2D(keepdims=True, name="g"),
        "global_max_pool": lambda: k.layers.GlobalMaxPooling2D(name="g"),
        "batch_norm": lambda: k.layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name="bn"),
        "layer_norm": lambda: k.layers.LayerNormalization(axis=[1, 2], center=False, name="ln"),
        "embedding": lambda: k.layers.Embedding(10, 4, name="e"),
        "rescaling": lambda: k.layers.Rescaling(1 / 255, offset=-1.0, name="s"),
        "add": lambda: k.layers.Add(name="m"),
        "concatenate": lambda: k.layers.Concatenate(axis=1, name="m"),
        "subtract": lambda: k.layers.Subtract(name="m"),
        "dense_float64": lambda: k.layers.Dense(2, dtype="float64", name="d"),
        "not_trainable": lambda: k.layers.Dense(2, trainable=False, name="d"),
    }
    out: Result = {name: _serialized(env, make) for name, make in layers.items()}
    dense = k.layers.Dense(3, name="d")
    out["unbuilt_build_config"] = attempt(lambda: dense.get_build_config())
    dense.build((None, 4))
    out["built"] = _stable(dense.get_config())
    out["build_config"] = attempt(lambda: dense.get_build_config())
    out["from_config"] = _stable(k.layers.Dense.from_config(dense.get_config()).get_config())
    return out


@case
def config_of_initializers_regularizers_activations(env: KerasEnv) -> Result:
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again
    made = {
        "glorot_uniform": lambda: k.initializers.GlorotUniform(),
        "glorot_seeded": lambda: k.initializers.GlorotNormal(seed=5),
        "he_normal": lambda: k.initializers.HeNormal(),
        "lecun_uniform": lambda: k.initializers.LecunUniform(seed=1),
        "variance_scaling": lambda: k.initializers.VarianceScaling(2.0, "fan_avg", "uniform", seed=2),
        "random_normal": lambda: k.initializers.RandomNormal(0.5, 2.0, seed=3),
        "truncated_normal": lambda: k.initializers.TruncatedNormal(stddev=0.1),
        "random_uniform": lambda: k.initializers.RandomUniform(-1.0, 1.0),
        "zeros": lambda: k.initializers.Zeros(),
        "ones": lambda: k.initializers.Ones(),
        "constant": lambda: k.initializers.Constant(0.5),
        "identity": lambda: k.initializers.Identity(2.0),
        "l1": lambda: k.regularizers.L1(0.3),
        "l2": lambda: k.regularizers.L2(),
        "l1l2": lambda: k.regularizers.L1L2(l1=0.1),
        "l1_l2_function": lambda: k.regularizers.l1_l2(0.1, 0.2),
    }
    out: Result = {name: _serialized(env, make) for name, make in made.items()}
    out["activations"] = {name: attempt(lambda name=name: k.activations.serialize(k.activations.get(name)))
                          for name in ("relu", "softmax", "sigmoid", "tanh", "linear", None)}
    out["initializer_get"] = attempt(lambda: _stable(k.initializers.serialize(
        k.initializers.get({"class_name": "RandomNormal", "config": {"stddev": 3.0, "seed": 4}}))))
    out["regularizer_get"] = attempt(lambda: _stable(k.regularizers.serialize(
        k.regularizers.get({"class_name": "L2", "config": {"l2": 0.5}}))))
    return out


@case
def config_of_optimizers_losses_metrics(env: KerasEnv) -> Result:
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again
    made = {
        "sgd": lambda: k.optimizers.SGD(0.1, momentum=0.9, nesterov=True, name="s"),
        "sgd_default": lambda: k.optimizers.SGD(),
        "adam": lambda: k.optimizers.Adam(0.01, beta_1=0.8, amsgrad=True, clipnorm=1.0),
        "rmsprop": lambda: k.optimizers.RMSprop(centered=True, weight_decay=0.01),
        "adam_schedule": lambda: k.optimizers.Adam(k.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9)),
        "mse": lambda: k.losses.MeanSquaredError(),
        "sparse_cce": lambda: k.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum"),
        "bce": lambda: k.losses.BinaryCrossentropy(label_smoothing=0.1),
        "cce": lambda: k.losses.CategoricalCrossentropy(axis=-1, name="c"),
        "huber": lambda: k.losses.Huber(delta=2.0),
        "mae": lambda: k.losses.MeanAbsoluteError(),
        "loss_function": lambda: k.losses.mean_squared_error,
        "loss_string": lambda: "mse",
        "metric_mean": lambda: k.metrics.Mean(name="m"),
        "metric_sca": lambda: k.metrics.SparseCategoricalAccuracy(),
        "metric_accuracy": lambda: k.metrics.Accuracy(),
        "metric_top_k": lambda: k.metrics.SparseTopKCategoricalAccuracy(k=3),
        "metric_bce": lambda: k.metrics.BinaryCrossentropy(from_logits=True),
        "schedule_piecewise": lambda: k.optimizers.schedules.PiecewiseConstantDecay([5, 10], [0.1, 0.05, 0.01]),
    }
    out: Result = {name: _serialized(env, make) for name, make in made.items()}
    adam = k.optimizers.Adam(0.01, beta_2=0.99)
    out["optimizer_from_config"] = _stable(k.optimizers.Adam.from_config(adam.get_config()).get_config())
    out["optimizer_deserialize"] = attempt(lambda: _stable(k.optimizers.serialize(k.optimizers.deserialize(
        k.optimizers.serialize(k.optimizers.SGD(0.3))))))
    out["loss_deserialize"] = attempt(lambda: _stable(k.losses.serialize(k.losses.deserialize(
        k.losses.serialize(k.losses.Huber(0.5))))))
    out["metric_deserialize"] = attempt(lambda: _stable(k.metrics.serialize(k.metrics.deserialize(
        k.metrics.serialize(k.metrics.Mean(name="x"))))))
    return out


def _tutorial_model(env: KerasEnv, compiled: bool = True) -> Any:
    """The Keras MWMS tutorial's CNN (smaller), compiled as the tutorial compiles it."""
    k = env.keras
    model = k.Sequential([k.Input(shape=(6, 6)), k.layers.Reshape(target_shape=(6, 6, 1)),
                          k.layers.Conv2D(3, 3, activation="relu"), k.layers.Flatten(),
                          k.layers.Dense(8, activation="relu"), k.layers.Dense(4)], name="cnn")
    if compiled:
        model.compile(loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),
                      optimizer=k.optimizers.SGD(learning_rate=0.001), metrics=["accuracy"])
    return model


def _functional_model(env: KerasEnv) -> Any:
    """Two inputs, a shared layer, a concatenation, one output."""
    k = env.keras
    a, b = k.Input((4,), name="a"), k.Input((3,), name="b")
    shared = k.layers.Dense(2, name="shared")
    joined = k.layers.Concatenate(name="cat")([shared(k.layers.Dense(4, name="pa")(a)),
                                               k.layers.Dense(2, name="pb")(b)])
    return k.Model([a, b], k.layers.Dense(1, name="out")(joined), name="fm")


@case
def config_of_models(env: KerasEnv) -> Result:
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again
    out: Result = {}
    sequential = _tutorial_model(env)
    out["sequential"] = _stable(sequential.get_config())
    out["sequential_serialized"] = _stable(k.saving.serialize_keras_object(sequential))
    out["sequential_compile_config"] = _stable(sequential.get_compile_config())
    out["sequential_build_config"] = sequential.get_build_config()
    unbuilt = k.Sequential([k.layers.Dense(3, name="x"), k.layers.Dense(1, name="y")], name="lazy")
    out["sequential_unbuilt"] = _stable(unbuilt.get_config())
    out["sequential_input_shape"] = _stable(k.Sequential([k.layers.Dense(2, input_shape=(5,), name="z")],
                                                         name="s").get_config())
    functional = _functional_model(env)
    out["functional"] = _stable(functional.get_config())
    out["functional_serialized"] = _stable({key: value for key, value in k.saving.serialize_keras_object(
        functional).items() if key != "config"})
    a = k.Input((3,), name="single")
    out["functional_single"] = _stable(k.Model(a, k.layers.Dense(2, name="o")(a), name="f1").get_config())
    x = k.Input((3,), name="x")
    with_ops = k.Model(x, k.ops.relu(k.layers.Dense(3, name="h")(x) * 2.0 + x), name="ops")
    out["functional_with_ops"] = _stable(with_ops.get_config())
    again_ops = k.Model.from_config(with_ops.get_config())
    probe = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    again_ops.set_weights(with_ops.get_weights())
    out["functional_with_ops_same_output"] = np.array_equal(np.asarray(with_ops(probe)), np.asarray(again_ops(probe)))
    rebuilt = k.Sequential.from_config(sequential.get_config())
    out["sequential_round_trip"] = _stable(rebuilt.get_config()) == out["sequential"]
    out["sequential_round_trip_weights"] = [[int(d) for d in w.shape] for w in rebuilt.weights]
    again = k.Model.from_config(functional.get_config())
    out["functional_round_trip"] = _stable(again.get_config()) == out["functional"]
    out["functional_round_trip_layers"] = [layer.name for layer in again.layers]
    out["model_from_json"] = attempt(lambda: _stable(k.models.model_from_json(sequential.to_json()).get_config())
                                     == out["sequential"])
    return out


def _in(directory: str, fn: Any) -> Any:
    """``attempt(fn)``, an error's message with ``directory`` (a temporary one) written as ``<dir>``."""
    result = attempt(fn)
    return type(result)(str(result).replace(directory, "<dir>")) if isinstance(result, Exception) else result


def _fit_data(rows: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(41)
    return rng.standard_normal((rows, 6, 6)).astype(np.float32), rng.integers(0, 4, rows)


def _set_known_weights(model: Any) -> None:
    rng = np.random.default_rng(42)
    model.set_weights([(rng.standard_normal(w.shape) * 0.3).astype(np.float32) for w in model.get_weights()])


@case
def model_save_and_load(env: KerasEnv) -> Result:
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again
    out: Result = {}
    x, y = _fit_data()
    with tempfile.TemporaryDirectory() as directory:
        model = _tutorial_model(env)
        _set_known_weights(model)
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        out["no_extension"] = _in(directory, lambda: model.save(os.path.join(directory, "keras-model")))
        path = os.path.join(directory, "m.keras")
        model.save(path)
        out["saved_files"] = sorted(os.listdir(directory))
        loaded = k.models.load_model(path)
        out["loaded_class"] = type(loaded).__name__
        out["loaded_name"] = loaded.name
        out["loaded_weights"] = [np.asarray(w) for w in loaded.get_weights()]
        out["same_weights"] = all(np.array_equal(a, b) for a, b in zip(model.get_weights(), loaded.get_weights()))
        out["loaded_iterations"] = int(np.asarray(loaded.optimizer.iterations))
        out["loaded_learning_rate"] = np.asarray(loaded.optimizer.learning_rate)
        out["loaded_optimizer"] = type(loaded.optimizer).__name__
        out["loaded_loss"] = type(loaded.loss).__name__
        out["loaded_compile_config"] = _stable(loaded.get_compile_config())
        out["predict"] = loaded.predict(x[:4], verbose=0)
        history = loaded.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        out["continued_history"] = {key: np.asarray(value, np.float32) for key, value in history.history.items()}
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        out["continued_difference"] = max(float(np.max(np.abs(a - b))) for a, b in
                                          zip(model.get_weights(), loaded.get_weights()))
        out["uncompiled"] = attempt(lambda: k.models.load_model(path, compile=False).optimizer)
        out["missing_file"] = _in(directory, lambda: k.models.load_model(os.path.join(directory, "absent.keras")))
        out["load_wrong_suffix"] = _in(directory, lambda: k.models.load_model(os.path.join(directory, "absent.txt")))
    return out


@case
def model_save_and_load_in_strategy(env: KerasEnv) -> Result:
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again
    out: Result = {}
    x, y = _fit_data(32)
    with tempfile.TemporaryDirectory() as directory:
        with env.strategy.scope():
            model = _tutorial_model(env)
            model.compile(loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),
                          optimizer=k.optimizers.Adam(learning_rate=0.01), metrics=["accuracy"])
        _set_known_weights(model)
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        path = os.path.join(directory, "model.keras")
        model.save(path)
        with env.strategy.scope():
            loaded = k.models.load_model(path)
        out["optimizer_variables"] = [np.asarray(v) for v in loaded.optimizer.variables]
        history = loaded.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        out["history"] = {key: np.asarray(value, np.float32) for key, value in history.history.items()}
        out["weights"] = [np.asarray(w) for w in loaded.get_weights()]
        out["continued_difference"] = max(float(np.max(np.abs(a - b))) for a, b in
                                          zip(model.get_weights(), loaded.get_weights()))
        functional = _functional_model(env)
        functional.compile(optimizer="adam", loss="mse")
        inputs = [np.ones((4, 4), np.float32), np.ones((4, 3), np.float32)]
        functional.fit(inputs, np.ones((4, 1), np.float32), verbose=0)
        functional.save(os.path.join(directory, "f.keras"))
        again = k.models.load_model(os.path.join(directory, "f.keras"))
        out["functional_same_prediction"] = np.array_equal(functional.predict(inputs, verbose=0),
                                                           again.predict(inputs, verbose=0))
        out["functional_optimizer_iterations"] = int(np.asarray(again.optimizer.iterations))
    return out


@case
def clone_model(env: KerasEnv) -> Result:
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again
    out: Result = {}
    seeded = k.Sequential([k.Input((4,)), k.layers.Dense(3, kernel_initializer=k.initializers.GlorotUniform(seed=3),
                                                         name="d"), k.layers.Dense(1, name="o")], name="s")
    seeded.compile(optimizer=k.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    copy = k.models.clone_model(seeded)
    out["sequential"] = {"class": type(copy).__name__, "name": copy.name, "layers": [l.name for l in copy.layers],
                         "same_config": _stable(copy.get_config()) == _stable(seeded.get_config()),
                         "new_layers": all(a is not b for a, b in zip(copy.layers, seeded.layers)),
                         "seeded_kernel_equal": np.array_equal(np.asarray(copy.layers[0].kernel),
                                                               np.asarray(seeded.layers[0].kernel)),
                         "optimizer": type(copy.optimizer).__name__, "new_optimizer": copy.optimizer is not
                         seeded.optimizer, "compile_config": _stable(copy.get_compile_config())}
    functional = _functional_model(env)
    again = k.models.clone_model(functional)
    out["functional"] = {"name": again.name, "layers": [layer.name for layer in again.layers],
                         "same_config": _stable(again.get_config()) == _stable(functional.get_config()),
                         "inputs_new": again.layers[0] is not functional.layers[0]}
    shared = k.models.clone_model(functional, clone_function=lambda layer: layer)
    out["reused_layers"] = [a is b for a, b in zip(shared.layers, functional.layers)]
    refused = attempt(lambda: k.models.clone_model(seeded, call_function=lambda layer, x: layer(x)))
    out["sequential_call_function"] = [type(refused).__name__, str(refused).split(" Received")[0]]  # (no reprs)
    out["bad_clone_function"] = attempt(lambda: k.models.clone_model(seeded, clone_function=3))
    return out


@case
def variable_paths(env: KerasEnv) -> Result:
    """Keras 3's ``path`` of weights (the layers' names, not TF's name scopes), optimizer variables and a seed
    generator's state, in and out of a strategy."""
    k, tf = env.keras, env.tf
    k.backend.clear_session()  # automatic names from 1 again
    with tf.name_scope("outer"):
        scoped = k.Sequential([k.Input((3,)), k.layers.Dense(2)])
        loose = k.layers.Dense(2)
        loose.build((None, 3))
    named = k.Sequential([k.layers.Dense(2), k.layers.BatchNormalization()], name="seq")
    named(np.ones((1, 3), np.float32))
    with env.strategy.scope():
        mirrored = k.Sequential([k.Input((3,)), k.layers.Dense(2, name="m")])
        optimizer = k.optimizers.SGD(momentum=0.5)
        optimizer.build(mirrored.trainable_variables)
    a = k.Input((3,), name="a")
    functional = k.Model(a, k.layers.Dense(1, name="f_out")(k.layers.Dense(2, name="f_hidden")(a)), name="fun")
    dropout = k.layers.Dropout(0.5, seed=1)
    return {"scoped": [w.path for w in scoped.weights], "loose": [w.path for w in loose.weights],
            "named": [w.path for w in named.weights], "mirrored": [w.path for w in mirrored.weights],
            "optimizer": [v.path for v in optimizer.variables], "functional": [w.path for w in functional.weights],
            "seed_generator": [v.path for v in dropout.variables]}


@case
def utils_to_categorical_and_normalize(env: KerasEnv) -> Result:
    u = env.keras.utils
    return {"ids": u.to_categorical([0, 2, 1]), "num_classes": u.to_categorical(np.array([1, 0]), num_classes=4),
            "column": u.to_categorical(np.array([[1], [3]])), "matrix": u.to_categorical(np.array([[0, 1], [2, 0]])),
            "negative": u.to_categorical([-1, 0], num_classes=3),
            "out_of_range": type(attempt(lambda: u.to_categorical([5], num_classes=3))).__name__,
            "normalize": u.normalize(np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)),
            "normalize_axis0_l1": u.normalize(np.array([[1.0, 2.0], [3.0, 2.0]]), axis=0, order=1)}


@case
def config_of_a_subclassed_layer(env: KerasEnv) -> Result:
    """Keras' automatic config of a Layer subclass without get_config: the constructor's plain arguments, defaults
    filled in, with the base layer's entries; and the build config of a layer Keras builds on its first call."""
    k = env.keras
    k.backend.clear_session()  # automatic names from 1 again

    class Plain(k.layers.Layer):
        def __init__(self, a: int = 1, b: str = "x", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.a = a

        def call(self, x: Any) -> Any:
            return x

    called = Plain(b="y")
    called(np.ones((2, 3), np.float32))
    return {"positional": _stable(Plain(7).get_config()), "keyword": _stable(called.get_config()),
            "build_config": called.get_build_config(), "round_trip": _stable(Plain.from_config(
                Plain(5, name="p").get_config()).get_config())}
