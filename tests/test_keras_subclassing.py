"""User-written Keras layers and models (subclasses of ``Layer`` and ``Model``) on mirrorlab and simulated clusters."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab.tf import keras
from mirrorlab.sim import SimCluster

from keras_programs import fit_program, single_and_cluster_runs, tape_step

RNG = np.random.default_rng(5)
X = RNG.standard_normal((48, 6)).astype(np.float32)
Y = np.argmax(X @ RNG.standard_normal((6, 3)), axis=1)


class Scale(keras.layers.Layer):
    """A layer with one weight of its own: ``x * scale``."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="scale")

    def call(self, x):
        return x * self.scale


class Net(keras.Model):
    """Dense -> Scale -> Dense, the second Dense held in a list (as Keras tracks lists of layers)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(8, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(1))
        self.scale = Scale()
        self.heads = [keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(2))]

    def call(self, x):
        return self.heads[0](self.scale(self.hidden(x)))


def sequential_twin() -> keras.Sequential:
    """The same network as ``Net`` with the Scale layer (all ones) left out."""
    return keras.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(6,),
                                                kernel_initializer=keras.initializers.GlorotUniform(1)),
                             keras.layers.Dense(3, kernel_initializer=keras.initializers.GlorotUniform(2))])


def test_a_subclassed_model_with_a_user_layer_trains_on_a_cluster_as_on_one_device():
    """The tape through the user layer and the layers it holds gives exact global gradients on every cluster shape."""
    single_weights, single_losses = single_and_cluster_runs(Net, X, Y)
    assert len(single_weights) == 5  # hidden kernel and bias, the user layer's scale, the listed head's kernel and bias
    assert not np.array_equal(single_weights[2], np.ones(8))  # the user layer's own weight trains
    assert single_losses[1] < single_losses[0]


def test_a_subclassed_model_without_extra_weights_equals_sequential_bit_for_bit():
    class Plain(keras.Model):
        def __init__(self):
            super().__init__()
            self.layers_in_order = sequential_twin().layers

        def call(self, x):
            for layer in self.layers_in_order:
                x = layer(x)
            return x
    keras.backend.clear_session()
    subclassed = SimCluster(workers=2, devices_per_worker=2, seed=1).run(fit_program, Plain, X, Y).values()
    keras.backend.clear_session()
    sequential = SimCluster(workers=2, devices_per_worker=2, seed=1).run(fit_program, sequential_twin, X, Y).values()
    for (w_sub, loss_sub), (w_seq, loss_seq) in zip(subclassed, sequential):
        assert loss_sub == loss_seq
        for a, b in zip(w_sub, w_seq):
            np.testing.assert_array_equal(a, b)


def test_a_first_call_inside_run_creates_mirrored_weights_on_every_replica():
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        net = Net()
    outputs = strategy.run(lambda: net(X[:2]))
    first, second = strategy.experimental_local_results(outputs)
    np.testing.assert_array_equal(first, second)
    assert all(isinstance(w, ml.MirroredVariable) for w in net.weights)
    assert [w.name for w in net.weights][:2] == ["net/dense/kernel:0", "net/dense/bias:0"]


def test_training_mode_reaches_layers_inside_calls_as_keras_call_context():
    seen = []

    class Probe(keras.layers.Layer):
        def call(self, x, training=None):
            seen.append(training)
            return x

    class Outer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.probe = Probe()

        def call(self, x):  # takes no training: the mode given to the outer call still reaches the probe
            return self.probe(x)
    outer = Outer()
    outer(X, training=True)
    outer(X)
    outer.probe(X, training=False)
    assert seen == [True, None, False]


def test_a_frozen_layer_is_not_trained():
    keras.backend.clear_session()
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        net = Net()
        net(X[:1])
        net.hidden.trainable = False
        net.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    frozen = [w.numpy() for w in net.hidden.weights]
    net.fit(X, Y, batch_size=12, verbose=0)
    assert len(net.trainable_variables) == 3 and len(net.non_trainable_variables) == 2
    for before, var in zip(frozen, net.hidden.weights):
        np.testing.assert_array_equal(before, var.numpy())


def test_add_weight_defaults_and_a_layer_without_call_explain_themselves():
    layer = keras.layers.Layer(name="plain")
    with ml.name_scope("outer"):
        floating = layer.add_weight(shape=(2, 2))
    counter = layer.add_weight(shape=(), dtype="int64")
    assert floating.name == "outer/plain/variable:0" and counter.numpy() == 0
    assert not np.all(floating.numpy() == 0)  # glorot_uniform for floats
    with pytest.raises(NotImplementedError, match="(?s)does not have a `call` method.*Fix: define call"):
        layer(X)
    with pytest.raises(TypeError, match="add_weight.*unexpected keyword arguments \\['shap'\\]"):
        layer.add_weight(shap=(1,))


def test_a_subclass_passing_inputs_and_outputs_to_model_becomes_a_functional_model_of_its_class():
    inputs = keras.Input((6,))

    class Wrapped(keras.Model):
        def __init__(self) -> None:
            super().__init__(inputs, keras.layers.Dense(2, kernel_initializer="ones")(inputs))
            self.extra = 3

        def doubled(self, x):
            return self(x) * 2.0

    model = Wrapped()
    assert isinstance(model, Wrapped) and model.extra == 3 and model.name.startswith("wrapped")
    np.testing.assert_array_equal(model.doubled(np.ones((1, 6), np.float32)), [[12.0, 12.0]])

    class Bare(keras.Model):
        pass
    with pytest.raises(TypeError, match="(?s)takes no positional arguments.*Fix: pass keras.Model"):
        Bare(5)  # neither inputs and outputs nor keywords


def test_a_custom_train_step_trains_on_a_simulated_cluster_with_cluster_wide_logs():
    """fit runs an overridden train_step on every replica of a 2 x 2 cluster; its batch logs are the cluster-wide
    mean of what the replicas return, and both workers end with the same weights as one device."""
    def program(x: np.ndarray, y: np.ndarray):
        strategy = ml.MultiWorkerMirroredStrategy()
        seen = []

        class Stepped(keras.Model):
            def train_step(self, data):
                xb, yb = data
                with ml.GradientTape() as tape:
                    loss = self.compute_loss(y=yb, y_pred=self(xb, training=True))
                self.optimizer.apply(tape.gradient(loss, self.trainable_variables), self.trainable_variables)
                replica = ml.get_replica_context().replica_id_in_sync_group
                return {"replica": np.float32(replica), "loss": loss}

        class Record(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                seen.append(dict(logs))

        with strategy.scope():
            inputs = keras.Input((6,))
            model = Stepped(inputs, keras.layers.Dense(3, kernel_initializer="zeros")(inputs))
            model.compile(optimizer=keras.optimizers.SGD(0.1),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(md.Dataset.from_tensor_slices((x, y)).batch(12), epochs=1, verbose=0, callbacks=[Record()])
        return [w.numpy() for w in model.trainable_variables], seen

    cluster = SimCluster(workers=2, devices_per_worker=2, seed=3).run(program, X, Y).values()
    single, = SimCluster(workers=1, devices_per_worker=1).run(program, X, Y).values()
    for weights, seen in cluster:
        assert [logs["replica"] for logs in seen] == [1.5] * len(seen)  # mean of replica ids 0..3
        for a, b in zip(weights, single[0], strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert cluster[0][1] == cluster[1][1]


def test_a_checkpoint_read_before_the_first_call_restores_the_weights_before_they_are_used(tmp_path):
    keras.backend.clear_session()
    trained = Net()
    trained(X[:2])
    path = ml.train.Checkpoint(model=trained).save(str(tmp_path / "ckpt"))
    fresh = Net()
    status = ml.train.Checkpoint(model=fresh).restore(path)
    np.testing.assert_array_equal(fresh(X[:2]), trained(X[:2]))  # the first call already sees the saved weights
    status.assert_existing_objects_matched()
    assert fresh.scale.built and [w.name for w in fresh.scale.weights] == ["net_1/scale_1/scale:0"]


def test_a_subclassed_models_own_build_runs_on_its_first_call_in_the_strategy_scope():
    class Biased(keras.Model):
        def __init__(self):
            super().__init__(name="biased")
            self.dense = keras.layers.Dense(2)

        def build(self, input_shape):
            self.offset = self.add_weight(shape=(2,), initializer="ones", name="offset")

        def call(self, x):
            return self.dense(x) + self.offset
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = Biased()
    assert not model.built
    model(X[:2])
    assert model.built and [w.name for w in model.weights][0] == "biased/offset:0"
    assert all(isinstance(w, ml.MirroredVariable) for w in model.weights)


def test_a_sequential_model_without_input_builds_inside_run_once_for_all_replicas():
    """TF's custom-training tutorial builds its Sequential model (no Input) on the first call inside ``run``: every
    replica builds it together, once, into mirrored weights, and the step trains as if it were built first."""
    x = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    y = np.array([0, 1, 1, 0])

    def train(build_first: bool) -> list:
        strategy = ml.MirroredStrategy(["CPU:0", "CPU:1"])
        with strategy.scope():
            model = keras.Sequential([keras.layers.Dense(3, kernel_initializer="ones"), keras.layers.Dense(
                2, kernel_initializer=keras.initializers.RandomUniform(-0.5, 0.5, seed=3))])
            if build_first:
                model.build((None, 2))
            optimizer = keras.optimizers.SGD(0.5)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

        step = tape_step(model, optimizer, loss_fn, 4)

        for batch in strategy.experimental_distribute_dataset(ml.data.Dataset.from_tensor_slices((x, y)).batch(4)):
            strategy.run(step, args=(batch,))
        assert all(isinstance(w, ml.MirroredVariable) for w in model.weights)
        assert len(model.weights) == 4
        return model.get_weights()

    for lazy, built in zip(train(False), train(True)):
        np.testing.assert_array_equal(lazy, built)
