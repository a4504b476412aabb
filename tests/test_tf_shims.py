"""The small tf.* helpers that training scripts call: constant, dtypes, io.gfile (values observed on TF 2.21)."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab as ml


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


def test_tensor_functions_without_a_gradient_step_refuse_tracked_values_but_comparisons_take_them():
    v = ml.Variable(np.array([0.5, -2.0], np.float32))
    frozen = ml.Variable(np.array([0.5, -2.0], np.float32), trainable=False)
    with ml.GradientTape() as tape:
        doubled = ml.multiply(v, 2.0)
        assert ml.argmax(doubled).tolist() == 0 and ml.greater(doubled, 0.0).tolist() == [True, False]
        with pytest.raises(ml.errors.UnimplementedError, match="cannot differentiate through tf.reduce_max"):
            ml.reduce_max(doubled)
        plain = ml.reduce_sum(frozen)  # not trainable: not watched, as in TF
    assert isinstance(plain, np.ndarray) and tape.gradient(ml.reduce_sum(doubled), v).tolist() == [2.0, 2.0]
