"""The small tf.* helpers that training scripts call: constant, dtypes, io.gfile (values observed on TF 2.21)."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab.tf as ml


@pytest.mark.parametrize(("args", "dtype", "shape", "value"), [
    ((1.5,), "float32", (), 1.5), ((1,), "int32", (), 1), ((np.float64(2.0),), "float64", (), 2.0),
    (([1, 2],), "int32", (2,), [1, 2]), ((3.0, None, [2, 2]), "float32", (2, 2), [[3.0, 3.0], [3.0, 3.0]]),
    ((np.array([1.0]), ml.dtypes.int64), "int64", (1,), [1]), ((1, ml.dtypes.float32), "float32", (), 1.0),
    ((True, ml.dtypes.int32), "int32", (), 1),
])
def test_constant_converts_as_tf(args, dtype, shape, value):
    result = ml.constant(*args)
    assert (result.dtype.name, result.shape, result.tolist()) == (dtype, shape, value)


@pytest.mark.parametrize("args", [(1.0, ml.dtypes.int64), ([1.0, 2.0], ml.dtypes.int32), (1, ml.dtypes.bool)])
def test_constant_refuses_python_values_tf_refuses(args):
    with pytest.raises(TypeError, match="Cannot convert .* to EagerTensor of dtype"):
        ml.constant(*args)


def test_gfile_directory_helpers(tmp_path):
    nested = tmp_path / "a" / "workertemp_1"
    ml.io.gfile.makedirs(str(nested))
    ml.io.gfile.makedirs(str(nested))  # existing is fine
    (nested / "f").write_text("x")
    assert ml.io.gfile.exists(str(nested / "f")) and ml.io.gfile.isdir(str(nested))
    assert ml.io.gfile.listdir(str(nested)) == ["f"] and ml.io.gfile.glob(str(nested / "*")) == [str(nested / "f")]
    with pytest.raises(FileExistsError):
        ml.io.gfile.copy(str(nested / "f"), str(nested / "f"))
    ml.io.gfile.rmtree(str(nested))
    assert not nested.exists()


def test_tensor_functions_differentiate_trainable_variables_in_each_replica():
    """tf.matmul/reduce_sum/sigmoid on a mirrored variable inside strategy.run: each replica's tape gives the gradient
    of its own batch, keyed by the distributed variable the program holds."""
    strategy = ml.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():
        w = ml.Variable(np.array([[1.0], [-1.0]], np.float32))
    batches = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.array([[1.0, 2.0]], np.float32) * (ctx.replica_id_in_sync_group + 1))

    def step(x):
        with ml.GradientTape() as tape:
            loss = ml.reduce_sum(ml.sigmoid(ml.matmul(x, w)))
        return tape.gradient(loss, w)

    grads = strategy.experimental_local_results(strategy.run(step, args=(batches,)))
    for k, grad in enumerate(grads):
        x = np.array([[1.0, 2.0]], np.float32) * (k + 1)
        s = 1 / (1 + np.exp(-(x @ np.array([[1.0], [-1.0]]))))
        np.testing.assert_allclose(grad, x.T @ (s * (1 - s)), rtol=1e-6)


def test_functions_without_a_gradient_give_plain_values_and_the_others_differentiate_on_a_tape():
    """As TF: comparisons, argmax and integer casts give plain values (no gradient flows through them, the tape's
    None); reduce_max differentiates; a non-trainable variable is not watched; a tracked value's operators compare
    element-wise."""
    v = ml.Variable(np.array([0.5, -2.0], np.float32))
    frozen = ml.Variable(np.array([0.5, -2.0], np.float32), trainable=False)
    with ml.GradientTape(persistent=True) as tape:
        doubled = ml.multiply(v, 2.0)
        assert ml.argmax(doubled).tolist() == 0 and ml.greater(doubled, 0.0).tolist() == [True, False]
        assert (doubled > 0).tolist() == [True, False] and (doubled == 1.0).tolist() == [True, False]
        assert isinstance(ml.cast(doubled, ml.int32), np.ndarray)
        top = ml.reduce_max(doubled)
        plain = ml.reduce_sum(frozen)  # not trainable: not watched, as in TF
    assert isinstance(plain, np.ndarray) and tape.gradient(ml.reduce_sum(doubled), v).tolist() == [2.0, 2.0]
    assert tape.gradient(top, v).tolist() == [2.0, 0.0]


def test_watch_names_variables_and_refuses_tensors_with_a_fix():
    """A model's weights are watched only when asked (watch_accessed_variables=False), a watched variable's
    gradient flows, and watching a plain tensor (which the tape cannot follow) says what to do instead."""
    model = ml.keras.Sequential([ml.keras.Input((2,)), ml.keras.layers.Dense(1)])
    x = np.ones((3, 2), np.float32)
    with ml.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(model.trainable_variables[1])
        loss = ml.reduce_sum(model(x))
    assert tape.watched_variables() == (model.trainable_variables[1],)
    kernel, bias = tape.gradient(loss, model.trainable_variables)
    assert kernel is None and bias.tolist() == [3.0]
    with ml.GradientTape() as tape:
        loss = ml.reduce_sum(model(x))
    assert [g.shape for g in tape.gradient(loss, model.trainable_variables)] == [(2, 1), (1,)]
    assert len(tape.watched_variables()) == 2
    with ml.GradientTape() as tape, pytest.raises(TypeError, match=r"follows variables, not tensors.*\nFix: hold "):
        tape.watch(x)


def test_custom_loop_with_variable_operators_trains_like_the_whole_batch_on_a_simulated_cluster():
    """``x @ w + b`` and ``** 2`` on mirrored variables inside strategy.run on 2 workers x 2 devices: each replica's tape
    follows the variables' own operators, the optimizer all-reduces, and every step equals full-batch gradient
    descent computed in plain NumPy."""
    from mirrorlab.sim import SimCluster
    rng = np.random.default_rng(7)
    x_all = rng.normal(size=(8, 3)).astype(np.float32)
    y_all = rng.normal(size=(8, 1)).astype(np.float32)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            w = ml.Variable(np.zeros((3, 1), np.float32))
            b = ml.Variable(np.float32(0.5))
            opt = ml.keras.optimizers.SGD(0.1)
        batch = strategy.experimental_distribute_values_from_function(  # replica r gets rows 2r and 2r + 1
            lambda ctx: tuple(a[2 * ctx.replica_id_in_sync_group:][:2] for a in (x_all, y_all)))

        def step(x, y):
            with ml.GradientTape() as tape:
                per_example = ml.reduce_sum((x @ w + b - y) ** 2, axis=1)
                loss = ml.nn.compute_average_loss(per_example, global_batch_size=8)
            grads = tape.gradient(loss, [w, b])
            opt.apply_gradients(zip(grads, [w, b]))
            return loss

        losses = [float(strategy.reduce(ml.distribute.ReduceOp.SUM, strategy.run(step, args=batch), axis=None))
                  for _ in range(3)]
        return losses, np.asarray(w).copy(), float(np.asarray(b))

    results = SimCluster(workers=2, devices_per_worker=2, seed=3).run(program)
    w, b = np.zeros((3, 1), np.float32), np.float32(0.5)
    expected = []
    for _ in range(3):
        error = x_all @ w + b - y_all
        expected.append(float(np.mean(np.sum(error ** 2, axis=1))))
        w = w - np.float32(0.1) * (x_all.T @ (2 * error) / 8)
        b = b - np.float32(0.1) * np.float32(np.sum(2 * error) / 8)
    for losses, final_w, final_b in results:
        np.testing.assert_allclose(losses, expected, rtol=1e-5)
        np.testing.assert_allclose(final_w, w, rtol=1e-5, atol=1e-6)
        assert final_b == pytest.approx(float(b), rel=1e-5)


class TinyDense(ml.Module):
    def __init__(self, inputs, outputs, name=None):
        super().__init__(name=name)
        self.w = ml.Variable(np.ones((inputs, outputs), np.float32), name="w")
        self.b = ml.Variable(np.zeros(outputs, np.float32), name="b")
        self._hidden = ml.Variable(1.0, trainable=False, name="h")

    def __call__(self, x):
        return ml.nn.relu(x @ self.w + self.b)


class TinyMLP(ml.Module):
    def __init__(self):
        super().__init__()
        self.zlayer = TinyDense(2, 3)
        self.layers = [TinyDense(3, 2, name="first"), {"b": TinyDense(2, 1), "a": ml.Variable(2.0, name="a")}]
        self.alias = self.zlayer
        self.count = ml.Variable(0, name="count")
        self.parent = self  # a cycle ends the walk

    def __call__(self, x):
        return self.layers[1]["b"](self.layers[0](self.zlayer(x)))


def test_module_finds_variables_submodules_and_checkpoint_keys_as_tf(tmp_path):
    """tf.Module as observed on TF 2.21: names in snake case, the walk in sorted attribute order (own variables
    before submodules', each object once), gradients of a module's trainable variables (None for unused and integer
    ones), checkpoint keys of every attribute holding state (private ones too, an alias under its first name)."""
    m = TinyMLP()
    assert (m.name, TinyDense(1, 1).name, ml.Module().name, ml.Module(name="ok_name").name) == \
        ("tiny_mlp", "tiny_dense", "module", "ok_name")
    assert [s.name for s in m.submodules] == ["tiny_dense", "first", "tiny_dense"]
    assert [v.name for v in m.variables] == ["count:0", "a:0"] + ["h:0", "b:0", "w:0"] * 3
    assert [v.name for v in m.trainable_variables] == ["count:0", "a:0"] + ["b:0", "w:0"] * 3
    assert [v.name for v in m.non_trainable_variables] == ["h:0"] * 3
    for bad in ("1abc", "a-b", ""):
        with pytest.raises(ValueError, match=f"{bad!r} is not a valid module name. Module names must be valid Python"):
            ml.Module(name=bad)
    with ml.GradientTape() as tape:
        y = ml.reduce_sum(m(np.ones((2, 2), np.float32)))
    grads = tape.gradient(y, m.trainable_variables)
    assert [None if g is None else np.asarray(g).tolist() for g in grads] == [
        None, None, [4.0, 4.0, 4.0], [[4.0] * 3] * 2, [2.0, 2.0], [[4.0, 4.0]] * 3, [2.0], [[12.0], [12.0]]]
    path = ml.train.Checkpoint(model=m).write(str(tmp_path / "ckpt"))
    assert sorted(name for name, _ in ml.train.list_variables(path)) == ["_CHECKPOINTABLE_OBJECT_GRAPH"] + [
        f"model/{key}/.ATTRIBUTES/VARIABLE_VALUE" for key in (
            "count", "layers/0/_hidden", "layers/0/b", "layers/0/w", "layers/1/a", "layers/1/b/_hidden",
            "layers/1/b/b", "layers/1/b/w", "zlayer/_hidden", "zlayer/b", "zlayer/w")]


def test_module_variables_mirror_under_a_strategy_and_train_in_replicas():
    """A module built in a strategy's scope holds mirrored variables; a replica's tape differentiates them."""
    strategy = ml.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():
        layer = TinyDense(2, 1)
    assert all(isinstance(v, ml.MirroredVariable) for v in layer.trainable_variables)

    def step(x):
        with ml.GradientTape() as tape:
            loss = ml.reduce_sum(layer(x))
        return tape.gradient(loss, layer.trainable_variables)

    per_replica = strategy.run(step, args=(np.array([[1.0, 2.0]], np.float32),))
    b, w = (strategy.experimental_local_results(g) for g in per_replica)
    assert [np.asarray(g).tolist() for g in b] == [[1.0], [1.0]]
    assert [np.asarray(g).tolist() for g in w] == [[[1.0], [2.0]], [[1.0], [2.0]]]
