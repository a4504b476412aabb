"""``mirrorlab.tensor``: TF's dtype names, from arrays, dtypes and dtype-likes, the same on every (cached) call."""

from __future__ import annotations

import numpy as np
import pytest

from mirrorlab.tensor import IndexedSlices, dtype_name

CASES = [
    (np.zeros(2, np.float32), "float32"), (np.dtype(">f4"), "float32"), ("float64", "float64"), (float, "float64"),
    (bool, "bool"), (np.int64(3), "int64"), (np.dtype("complex64"), "complex64"), (np.zeros(1, "U3"), "string"),
    (np.array(b"x"), "string"), (np.zeros(1, object), "string"), ("S3", "string"),
    (np.dtype("M8[ns]"), "datetime64[ns]"), (IndexedSlices(np.ones(2, np.float16), np.arange(2)), "float16"),
]


@pytest.mark.parametrize("value, name", CASES)
def test_dtype_name_spells_dtypes_as_tf_on_every_call(value, name):
    assert [dtype_name(value), dtype_name(value)] == [name, name]


def test_dtype_name_refuses_what_is_not_a_dtype():
    with pytest.raises(TypeError):
        dtype_name("no such dtype")


def _handed_out() -> dict:
    """Values a TF program calls ``.numpy()`` on, from each place mirrorlab hands values out."""
    import mirrorlab.tf as ml

    strategy = ml.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    per_replica = strategy.run(lambda: ml.constant([1.0, 2.0]))
    metric = ml.keras.metrics.Mean()
    metric.update_state([1.0, 3.0])
    var = ml.Variable(3.0)
    with ml.GradientTape() as tape:
        y = var * var
    batch = next(iter(strategy.experimental_distribute_dataset(ml.data.Dataset.range(4).batch(4))))
    return {"reduce": strategy.reduce("SUM", per_replica, axis=None), "gather": strategy.gather(per_replica, 0),
            "local": strategy.experimental_local_results(per_replica)[1],
            "local_batch": strategy.experimental_local_results(batch)[0],
            "constant": ml.constant(2.0), "op": ml.reduce_mean([1.0, 2.0]), "nn": ml.nn.softmax([1.0, 2.0]),
            "random": ml.random.stateless_uniform([2], [1, 2]), "element": next(iter(ml.data.Dataset.range(3))),
            "variable_read": var.read_value(), "gradient": tape.gradient(y, var), "metric": metric.result(),
            "loss": ml.keras.losses.MeanSquaredError()([1.0, 2.0], [1.5, 2.0])}


def test_handed_out_values_have_tfs_numpy_and_stay_numpy_arrays():
    for where, value in _handed_out().items():
        assert isinstance(value, np.ndarray), where
        result = value.numpy()
        assert type(result) is np.ndarray if value.ndim else isinstance(result, np.generic), where
        np.testing.assert_array_equal(result, np.asarray(value))
        assert repr(value) == repr(np.asarray(value)), where  # prints as a NumPy array


def test_numpy_gives_a_writable_copy_and_scalars_as_tf_does():
    import mirrorlab.tf as ml

    value = ml.constant([1.0, 2.0])
    copy = value.numpy()
    copy[0] = 5.0
    assert value[0] == 1.0
    assert ml.constant(2.5).numpy() == np.float32(2.5) and type(ml.constant(2.5).numpy()) is np.float32
    assert ml.constant("ab").numpy() == b"ab"
    assert list(ml.data.Dataset.range(2).as_numpy_iterator()) == [0, 1]


def test_integer_floordiv_and_mod_by_zero_raise_as_tfs_kernels():
    """TF's FloorDiv/FloorMod kernels refuse an integer divisor of 0 (NumPy would give 0); floats give inf/nan."""
    import mirrorlab.tf as ml

    a = ml.constant([7, -7], dtype=ml.int64)
    with pytest.raises(ml.errors.InvalidArgumentError, match=r"Integer division by zero \[Op:FloorDiv\]"):
        a // ml.constant([2, 0], dtype=ml.int64)
    with pytest.raises(ml.errors.InvalidArgumentError, match=r"\[Op:FloorMod\]"):
        a % 0
    with pytest.raises(ml.errors.InvalidArgumentError, match="FloorDiv"):
        7 // (a * 0)
    with pytest.raises(ml.errors.InvalidArgumentError, match="FloorMod"):
        ml.Variable(3) % 0
    assert (a // 2).tolist() == [3, -4] and (a % 3).tolist() == [1, 2]
    assert np.isinf(ml.constant(5.0) // 0.0) and np.isnan(ml.constant(5.0) % 0.0)
    found = ml.data.Dataset.range(3).map(lambda x: 6 // (x - 1))
    with pytest.raises(ml.errors.InvalidArgumentError, match="FloorDiv"):
        list(found)
