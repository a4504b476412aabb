"""Axis and dtype routing in reductions and gathers. TF 2.21's MirroredStrategy over CPUs sends int32 values to
one device instead of through collectives:
its gathers are a ConcatV2 (negative axes work, scalars fail), its all-reduces a local AddN, its errors
poison nothing, and a batch of several values with any int32 among them is refused. Expected values observed on TF 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab import errors


@pytest.fixture()
def strategy():
    return ml.MirroredStrategy(["/cpu:0", "/cpu:1"])


def per_replica(strategy, values):
    return strategy.experimental_distribute_values_from_function(lambda c: values[c.replica_id_in_sync_group])


def all_gather(strategy, value, axis):
    return strategy.run(lambda x: ml.get_replica_context().all_gather(x, axis=axis), args=(value,))


def all_reduce(strategy, value, op):
    return strategy.run(lambda x: ml.get_replica_context().all_reduce(op, x), args=(value,))


def test_int32_gathers_concatenate_on_one_device_and_accept_negative_axes(strategy):
    v = per_replica(strategy, [np.array([1, 2], np.int32), np.array([3], np.int32)])
    np.testing.assert_array_equal(strategy.gather(v, axis=-1), [1, 2, 3])
    for got in strategy.experimental_local_results(all_gather(strategy, v, -1)):
        np.testing.assert_array_equal(got, [1, 2, 3])
    f = per_replica(strategy, [np.array([1.0], np.float32), np.array([3.0], np.float32)])
    with pytest.raises(ValueError, match="Requires start <= limit when delta > 0: 0/-1"):
        strategy.gather(f, axis=-1)  # float32 goes through the collective, which rejects negative axes


@pytest.mark.parametrize("values, axis, message", [
    ([np.int32(1), np.int32(2)], 0, "ConcatOp : Can't concatenate scalars (use tf.stack instead)"),
    ([np.array([1, 2], np.int32), np.array([3], np.int32)], 1,
     "ConcatOp : Expected concatenating dimensions in the range [-1, 1), but got 1"),
    ([np.ones((1, 2), np.int32), np.ones((1, 3), np.int32)], 0,
     "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [1,2] vs. shape[1] = [1,3]"),
])
def test_int32_gather_errors_are_tf_concat_errors_and_poison_nothing(strategy, values, axis, message):
    with pytest.raises(errors.InvalidArgumentError) as info:
        all_gather(strategy, per_replica(strategy, values), axis)
    assert str(info.value).splitlines()[0] == message
    after = all_reduce(strategy, per_replica(strategy, [np.float32(1), np.float32(2)]), "sum")
    assert [float(x) for x in strategy.experimental_local_results(after)] == [3.0, 3.0]


def test_int32_all_reduce_is_a_local_addn(strategy):
    with pytest.raises(errors.InvalidArgumentError, match=r"AddN must have the same size and shape.  Input 0: \[2\]"):
        all_reduce(strategy, per_replica(strategy, [np.array([1, 2], np.int32), np.array([3], np.int32)]), "sum")
    mean = all_reduce(strategy, per_replica(strategy, [np.array([1, 2], np.int32), np.array([3, 4], np.int32)]),
                      "mean")
    for got in strategy.experimental_local_results(mean):
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, [2.0, 3.0])
    ids = strategy.run(lambda: ml.get_replica_context().replica_id_in_sync_group)
    total = strategy.run(lambda i: ml.get_replica_context().all_reduce("sum", i), args=(ids,))
    assert [int(x) for x in strategy.experimental_local_results(total)] == [1, 1]


def test_a_batch_mixing_int32_and_float_is_refused(strategy):
    v = strategy.experimental_distribute_values_from_function(
        lambda c: (np.array([c.replica_id_in_sync_group], np.int32), np.array([1.0], np.float32)))
    with pytest.raises(ValueError, match="must be either all on the host or all on the compute devices"):
        all_reduce(strategy, v, "sum")


@pytest.mark.parametrize("devices", [["/cpu:0", "/cpu:1"], ["/cpu:0"]])
def test_a_batch_of_several_values_refuses_any_int32_on_any_number_of_devices(devices):
    """TF gives each int32 value a ReductionToOneDevice of its own, so even two int32 values cannot be batched, on
    one device too; one int32 value, or floats only, still reduce."""
    s = ml.MirroredStrategy(devices)
    ints = s.experimental_distribute_values_from_function(lambda c: np.int32(c.replica_id_in_sync_group + 1))
    floats = s.experimental_distribute_values_from_function(lambda c: np.float32(2.0))
    for batch in ((ints, ints), (floats, ints)):
        with pytest.raises(ValueError, match="must be either all on the host or all on the compute devices"):
            all_reduce(s, batch, "sum")
        with pytest.raises(ValueError, match="must be either all on the host or all on the compute devices"):
            s.extended.batch_reduce_to("sum", [(value, value) for value in batch])
    n = len(devices)
    assert [int(x) for x in s.experimental_local_results(all_reduce(s, ints, "sum"))] == [n * (n + 1) // 2] * n
    for reduced in s.extended.batch_reduce_to("sum", [(floats, floats), (floats, floats)]):
        assert [float(x) for x in s.experimental_local_results(reduced)] == [2.0 * n] * n
    assert [int(x) for x in s.experimental_local_results(s.extended.batch_reduce_to("sum", [(ints, ints)])[0])] == \
        [n * (n + 1) // 2] * n


def test_multi_worker_strategy_keeps_int32_in_the_collectives():
    """MWMS has no one-device path: an int32 gather with a negative axis fails as the collective does."""
    from mirrorlab.sim import SimCluster

    def program():
        s = ml.MultiWorkerMirroredStrategy()
        v = s.experimental_distribute_values_from_function(lambda c: np.array([1, 2], np.int32))
        try:
            s.gather(v, axis=-1)
        except ValueError as exc:
            return str(exc).split(":")[0]
        return "gathered"

    assert SimCluster(workers=2).run(program).values() == ["Requires start <= limit when delta > 0"] * 2


def test_reduce_refuses_an_unhashable_axis_as_tf_does(strategy):
    """TF caches its per-axis reduce functions in a dict: axis=[0] fails with TypeError, axis=(0,) works."""
    v = per_replica(strategy, [np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)])
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        strategy.reduce("sum", v, axis=[0])
    assert float(strategy.reduce("sum", v, axis=(0,))) == 10.0


def test_numpy_scalars_keep_their_dtype_and_variable_reads_are_per_replica(strategy):
    """np.float64(1.0) is a float64 tensor in TF (only Python floats become float32), and a MirroredVariable read
    in every replica is a separate tensor per device, so run() returns one local result per replica."""
    with strategy.scope():
        v = ml.Variable(np.float64(1.0), aggregation=ml.VariableAggregation.SUM)
    assert v.dtype == np.float64
    reads = strategy.run(lambda: v.read_value())
    assert [float(x) for x in strategy.experimental_local_results(reads)] == [1.0, 1.0]
    assert strategy.run(lambda: v) is v  # the variable itself is the same object everywhere


def test_replica_id_is_an_int32_scalar_inside_run_and_a_plain_int_outside(strategy):
    ids = strategy.experimental_local_results(strategy.run(lambda: ml.get_replica_context().replica_id_in_sync_group))
    assert [np.asarray(i).dtype for i in ids] == [np.int32, np.int32] and [int(i) for i in ids] == [0, 1]
    assert type(ml.get_replica_context().replica_id_in_sync_group) is int
    values = strategy.experimental_distribute_values_from_function(lambda ctx: ctx.replica_id_in_sync_group)
    assert [type(v) for v in strategy.experimental_local_results(values)] == [int, int]  # ValueContext: ints


# -- the default strategy (outside any scope), as TF 2.21's _DefaultDistributionExtended ---------------------


def test_default_strategy_reduce_without_axis_hands_the_value_back_unchanged():
    """TF's default reduce_to is the identity: Python numbers, lists and arrays come back as given (same object)."""
    s = ml.distribute.get_strategy()
    for value in (3.0, 3, [1.0, 2.0], {"a": 1.0}, np.array([1.0, 2.0])):
        for op in ("SUM", "MEAN"):
            assert s.reduce(op, value, axis=None) is value


def test_default_strategy_reduce_along_an_axis_takes_a_list_as_one_tensor():
    """With an axis TF runs reduce_sum on the whole value: a list becomes one tensor (SUM of [1., 2.] is the float32
    3.0), MEAN then asks the list for its shape (AttributeError), a dict cannot be converted (TypeError)."""
    s = ml.distribute.get_strategy()
    total = s.reduce("SUM", [1.0, 2.0], axis=0)
    assert np.asarray(total).dtype == np.float32 and float(total) == 3.0
    assert int(s.reduce("SUM", (1, 2), axis=0)) == 3 and np.asarray(s.reduce("SUM", (1, 2), axis=0)).dtype == np.int32
    with pytest.raises(AttributeError, match="'list' object has no attribute 'shape'"):
        s.reduce("MEAN", [1.0, 2.0], axis=0)
    with pytest.raises(ValueError, match="Invalid reduction dimension 1 for input with 1 dimensions"):
        s.reduce("MEAN", [1.0, 2.0], axis=1)
    with pytest.raises(TypeError, match="Failed to convert elements of"):
        s.reduce("SUM", {"a": 1.0}, axis=0)
    np.testing.assert_array_equal(s.reduce("MEAN", np.array([[1., 2.], [3., 4.]]), axis=1), [1.5, 3.5])


def test_default_strategy_run_gives_an_int32_replica_id_but_its_context_outside_run_a_python_zero():
    """TF 2.21: ``run`` makes a replica context whose id is an int32 tensor; the default one's is the int 0."""
    s = ml.distribute.get_strategy()
    inside = s.run(lambda: ml.get_replica_context().replica_id_in_sync_group)
    assert np.asarray(inside).dtype == np.int32 and int(inside) == 0
    outside = ml.get_replica_context().replica_id_in_sync_group
    assert type(outside) is int and outside == 0


def test_default_strategy_collectives_take_python_numbers_as_tensors_and_update_plain_variables():
    """TF 2.21's default strategy: all_reduce/all_gather convert Python numbers (float32, int32); reduce_to hands
    the value back; extended.update calls fn once on a plain variable."""
    s = ml.distribute.get_strategy()
    summed = s.run(lambda: ml.get_replica_context().all_reduce("MEAN", [1.0, 2]))
    assert [np.asarray(x).dtype for x in summed] == [np.float32, np.int32]
    assert np.asarray(s.run(lambda: ml.get_replica_context().all_gather(1.0, 0))).dtype == np.float32
    assert s.extended.reduce_to("SUM", 2.0, "/cpu:0") == 2.0 and type(s.extended.reduce_to("SUM", 2.0, "/cpu:0")) is float
    v = ml.Variable(1.0)
    s.extended.update(v, lambda var, x: var.assign_add(x), args=(2.0,))
    assert float(v.numpy()) == 3.0
