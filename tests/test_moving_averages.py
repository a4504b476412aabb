"""``ml.train.ExponentialMovingAverage`` against TF 2.21's (values observed with tensorflow-cpu 2.21.0)."""

from __future__ import annotations

import numpy as np
import pytest

import mirrorlab.tf as ml


def test_shadows_start_at_the_value_and_decay_in_float32():
    """The shadow starts at the variable's value; ``1 - decay`` is a float32 difference (0.9 -> 0.10000002), cast
    to the variable's dtype; names and dtypes as TF's."""
    v, w = ml.Variable([1.0, 2.0]), ml.Variable(3.0, dtype=ml.float64)
    ema = ml.train.ExponentialMovingAverage(0.9)
    ema.apply([v, w])
    assert ema.average(v).numpy().tolist() == [1.0, 2.0] and not ema.average(v).trainable
    assert ema.average(w).dtype == np.float64 and ema.average(v).name == "Variable/ExponentialMovingAverage:0"
    v.assign([2.0, 4.0])
    w.assign(5.0)
    ema.apply([v, w])
    assert ema.average(v).numpy().tolist() == [np.float32(1.100000023841858), np.float32(2.200000047683716)]
    assert float(ema.average(w).numpy()) == 3.200000047683716
    assert ema.average_name(v) == "Variable/ExponentialMovingAverage" and ema.average(ml.Variable(1.0)) is None


def test_num_updates_lowers_the_decay_early_on():
    """decay = min(decay, (1 + n) / (10 + n)): TF's 3.6153846 after three steps of +1 from 1."""
    n, u = ml.Variable(0), ml.Variable(1.0)
    ema = ml.train.ExponentialMovingAverage(0.999, num_updates=n)
    for _ in range(3):
        u.assign_add(1.0)
        n.assign_add(1)
        ema.apply([u])
    assert float(ema.average(u).numpy()) == pytest.approx(3.615384578704834, abs=0)


def test_apply_refuses_integers_and_tensors_as_tf():
    ema = ml.train.ExponentialMovingAverage(0.9)
    with pytest.raises(TypeError, match="The variables must be half, float, or double"):
        ema.apply([ml.Variable(1)])
    with pytest.raises(TypeError, match="does not support non-Variable tensors"):
        ema.apply([ml.constant(1.0)])


def test_distributed_variables_get_mirrored_shadows_updated_in_scope_and_in_run():
    """Under MirroredStrategy: a mirrored shadow (aggregation NONE); cross-replica and replica-context updates give
    TF's values on every copy; outside the scope TF fails (mirrorlab says why)."""
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        m = ml.Variable([1.0, 1.0])
        ema = ml.train.ExponentialMovingAverage(0.5)
        ema.apply([m])
    shadow = ema.average(m)
    assert type(shadow).__name__ == "MirroredVariable" and shadow.aggregation == ml.VariableAggregation.NONE
    m.assign([3.0, 5.0])
    with pytest.raises(TypeError, match="outside its strategy's scope"):
        ema.apply([m])
    with strategy.scope():
        ema.apply([m])
    assert [x.numpy().tolist() for x in strategy.experimental_local_results(shadow)] == [[2.0, 3.0], [2.0, 3.0]]
    strategy.run(lambda: ema.apply([m]))
    assert [x.numpy().tolist() for x in strategy.experimental_local_results(shadow)] == [[2.5, 4.0], [2.5, 4.0]]
    made_in_run = ml.train.ExponentialMovingAverage(0.5)
    strategy.run(lambda: made_in_run.apply([m]))
    assert type(made_in_run.average(m)).__name__ == "MirroredVariable"


def test_moving_averages_on_a_simulated_cluster_agree_on_every_worker():
    """In strategy.run on 2 workers x 2 devices the update goes through merge_call: every copy on every worker
    ends with the same shadow."""
    from mirrorlab.sim import SimCluster

    def program() -> list:
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = ml.Variable([1.0, 2.0])
            ema = ml.train.ExponentialMovingAverage(0.75)
        def step() -> None:
            v.assign_add([1.0, 1.0])  # (aggregation NONE: each replica adds to its own copy)
            ema.apply([v])

        for _ in range(3):
            strategy.run(step)
        return [x.numpy().tolist() for x in strategy.experimental_local_results(ema.average(v))]

    results = SimCluster(workers=2, devices_per_worker=2, seed=1).run(program).values()
    expected = np.float32([2.0, 3.0])  # (the first apply makes the shadow from the value after the first add)
    for step in range(3):
        value = np.float32([2.0, 3.0]) + step
        expected = expected - (expected - value) * (np.float32(1.0) - np.float32(0.75))
    assert results[0] == results[1] == [expected.tolist()] * 2
