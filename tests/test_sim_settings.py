"""Simulator settings and faults are checked where they are written: one clear ValueError per bad field."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.sim import Clog, Crash, Cut, Delay, Drop, Isolate, Preempt, SimCluster, Slow


@pytest.mark.parametrize("kwargs, field", [
    ({"heartbeat_timeout": None}, "heartbeat_timeout=None"),
    ({"heartbeat_timeout": 0}, "heartbeat_timeout=0"),
    ({"heartbeat_timeout": math.inf}, "heartbeat_timeout=inf"),
    ({"latency": math.nan}, "latency=nan"),
    ({"latency": -0.1}, "latency=-0.1"),
    ({"bandwidth": 0}, "bandwidth=0"),
    ({"seed": 1.5}, "seed=1.5"),
    ({"workers": True}, "workers=True"),
    ({"chief": "yes"}, "chief='yes'"),
    ({"faults": ["Crash(0, at_step=1)"]}, "not a fault"),
])
def test_bad_cluster_settings_are_refused_at_construction(kwargs, field):
    with pytest.raises(ValueError) as info:
        SimCluster(**{"workers": 2, **kwargs})
    assert field in str(info.value) and "Fix:" in str(info.value)


@pytest.mark.parametrize("make, field", [
    (lambda: Crash(0, at_step=0), "at_step=0"),
    (lambda: Crash(0, at_step=-1), "at_step=-1"),
    (lambda: Crash(0, at_collective=0), "at_collective=0"),
    (lambda: Crash(0, during_save=0), "during_save=0"),
    (lambda: Crash(-1, at_step=1), "worker=-1"),
    (lambda: Crash(0, at_step=1.5), "at_step=1.5"),
    (lambda: Preempt(0, at_step=0), "at_step=0"),
    (lambda: Slow(0, seconds_per_step=-1.0), "seconds_per_step=-1.0"),
    (lambda: Slow(0, seconds_per_collective=math.nan), "seconds_per_collective=nan"),
    (lambda: Delay(0, 1, math.inf), "seconds=inf"),
    (lambda: Delay(1, 1, 1.0), "src and dst are both worker 1"),
    (lambda: Drop(0, 1, probability=2.0), "probability=2.0"),
    (lambda: Drop(0, 1, probability=math.nan), "probability=nan"),
    (lambda: Drop(0, 1, after=-1), "after=-1"),
    (lambda: Cut(0, 0), "a and b are both worker 0"),
    (lambda: Clog(1, 1, 0.0, 1.0), "a and b are both worker 1"),
    (lambda: Clog(0, 1, -1.0, 1.0), "start=-1.0"),
    (lambda: Clog(0, 1, 0.0, 0.0), "seconds=0.0"),
    (lambda: Clog(0, 1, 0.0, math.inf), "seconds=inf"),
    (lambda: Isolate(-1, 1.0), "worker=-1"),
    (lambda: Isolate(0, math.nan), "start=nan"),
    (lambda: Isolate(0, 1.0, 0), "seconds=0"),
])
def test_bad_faults_are_refused_at_construction(make, field):
    with pytest.raises(ValueError) as info:
        make()
    assert field in str(info.value) and "Fix:" in str(info.value)


@settings(max_examples=40, deadline=None)
@given(probability=st.floats(allow_nan=True, allow_infinity=True), after=st.integers(-3, 3))
def test_drop_accepts_exactly_probabilities_and_counts(probability, after):
    valid = 0.0 <= probability <= 1.0 and after >= 0
    if valid:
        assert Drop(0, 1, probability, after).probability == probability
    else:
        with pytest.raises(ValueError, match=r"Drop\(src=0, dst=1"):
            Drop(0, 1, probability, after)


def test_fault_naming_a_worker_outside_the_cluster_is_refused_with_the_valid_range():
    with pytest.raises(ValueError, match=r"dst=3 is not a worker of this 3-worker cluster \(valid: 0\.\.2\)"):
        SimCluster(workers=3, chief=True, faults=[Drop(0, 3)])


def test_crash_at_the_first_step_fires():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return float(strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None))

    result = SimCluster(workers=2, faults=[Crash(1, at_step=1)]).run(program)
    assert isinstance(result[1], errors.SimulatedCrash) and "before step 1" in str(result[1])


def test_local_replica_desync_names_its_worker():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()

        def step():
            ctx = tf.distribute.get_replica_context()
            if ctx.replica_id_in_sync_group != 3:
                return ctx.all_reduce("sum", tf.constant(1.0))
            return 0.0

        return strategy.run(step)

    result = SimCluster(workers=2, devices_per_worker=2).run(program)
    assert isinstance(result[1], errors.CollectiveMismatchError)
    assert "local replicas of worker 1 (/job:worker/replica:0/task:1)" in str(result[1])
