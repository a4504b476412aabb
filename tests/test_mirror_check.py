"""The optional check of mirrored copies (issue 26): a MirroredVariable whose copies differ after a replica-context
update with aggregation NONE raises MirroredCopiesDifferError naming the variable, replicas, values, call site and
fix; on by default in SimCluster, off elsewhere unless asked for; nothing changes where copies stay equal."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.sim import SimCluster

FIXES = ("aggregation=tf.VariableAggregation.MEAN or SUM", "ONLY_FIRST_REPLICA", "cross-replica context",
         "SimCluster(check_mirrors=False)")


def _replica_id() -> int:
    return tf.distribute.get_replica_context().replica_id_in_sync_group


def assign_replica_values(values: list[float], name: str = "v"):
    """A program: each replica assigns ``values[its replica id]`` to an aggregation-NONE variable; returns the copies."""
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = tf.Variable(0.0, name=name)
        strategy.run(lambda: v.assign(values[_replica_id()]))
        return [float(np.asarray(c)) for c in strategy.experimental_local_results(v)]
    return program


def test_local_copies_that_differ_are_named_with_values_call_site_and_fix():
    line = sys._getframe().f_lineno + 6  # the update's line, in the program below

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = tf.Variable(tf.zeros([3, 4]), name="weights")
        strategy.run(lambda: v.assign_add(tf.ones([3, 4]) * float(_replica_id())))

    result = SimCluster(workers=1, devices_per_worker=3).run(program)
    with pytest.raises(errors.MirroredCopiesDifferError) as caught:
        result.values()
    message = caught.value.message
    assert isinstance(caught.value, errors.FailedPreconditionError)  # catchable as a TF error class
    assert "mirrored variable 'weights:0' differ after step 1" in message
    assert f"test_mirror_check.py:{line} in <lambda>" in message
    for k in range(3):
        assert f"replica {k} (/job:worker/replica:0/task:0/device:CPU:{k}): float32[3, 4] starting [{k}., " in message
    assert "replica 2 (/job:worker/replica:0/task:0/device:CPU:2): " in message
    assert "12 of 12 elements differ from replica 0's, by at most 2" in message
    assert all(fix in message for fix in FIXES)


def test_copies_that_differ_across_workers_are_found_in_the_simulator():
    """One replica per worker (the usual MWMS): only a comparison across workers can see it."""
    result = SimCluster(workers=2).run(assign_replica_values([3.0, 7.0]))
    error = result[result.root_cause]  # the second worker to finish the step compares with the first one's copies
    assert isinstance(error, errors.MirroredCopiesDifferError)
    assert "worker 0 (/job:worker/replica:0/task:0), replica 0: 3.0" in error.message
    assert "worker 1 (/job:worker/replica:0/task:1), replica 1: 7.0" in error.message
    assert all(fix in error.message for fix in FIXES)


def test_copies_that_stay_equal_change_nothing():
    """Aggregation NONE with every replica writing the same value: same values and byte-identical trace."""
    program = assign_replica_values([5.0] * 4)
    checked = SimCluster(workers=2, devices_per_worker=2, seed=3).run(program)
    unchecked = SimCluster(workers=2, devices_per_worker=2, seed=3, check_mirrors=False).run(program)
    assert checked.values() == unchecked.values() == [[5.0, 5.0], [5.0, 5.0]]
    assert checked.trace.to_jsonl() == unchecked.trace.to_jsonl()


def test_the_check_can_be_turned_off_where_copies_are_meant_to_differ():
    values = SimCluster(workers=2, devices_per_worker=2, check_mirrors=False).run(
        assign_replica_values([0.0, 1.0, 2.0, 3.0])).values()
    assert values == [[0.0, 1.0], [2.0, 3.0]]  # TF's behaviour: each copy keeps its replica's value

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        strategy.extended.check_mirrored_copies = False
        with strategy.scope():
            v = tf.Variable(0.0)
        strategy.run(lambda: v.assign(float(_replica_id())))
        return [float(np.asarray(c)) for c in strategy.experimental_local_results(v)]

    assert SimCluster(workers=1, devices_per_worker=2).run(program).values() == [[0.0, 1.0]]


def test_outside_the_simulator_the_check_is_off_unless_asked_for(monkeypatch):
    monkeypatch.delenv("MIRRORLAB_CHECK_MIRRORS", raising=False)

    def diverge(strategy):
        with strategy.scope():
            v = tf.Variable(0.0)
        strategy.run(lambda: v.assign(float(_replica_id())))

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.extended.check_mirrored_copies is False
    diverge(strategy)  # TF accepts it
    strategy.extended.check_mirrored_copies = True
    with pytest.raises(errors.MirroredCopiesDifferError, match="replica 1 .*: 1.0"):
        diverge(strategy)
    monkeypatch.setenv("MIRRORLAB_CHECK_MIRRORS", "1")
    with pytest.raises(errors.MirroredCopiesDifferError):
        diverge(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))


def test_bad_settings_are_refused_with_the_fix(monkeypatch):
    monkeypatch.setenv("MIRRORLAB_CHECK_MIRRORS", "yes")
    with pytest.raises(ValueError, match="MIRRORLAB_CHECK_MIRRORS='yes' is neither 0 nor 1. Fix: set it to 1"):
        tf.distribute.MirroredStrategy(["/cpu:0"])
    monkeypatch.delenv("MIRRORLAB_CHECK_MIRRORS")
    with pytest.raises(TypeError, match="check_mirrored_copies = 'on': expected True or False"):
        tf.distribute.MirroredStrategy(["/cpu:0"]).extended.check_mirrored_copies = "on"
    with pytest.raises(ValueError, match="check_mirrors='on' must be True or False"):
        SimCluster(workers=1, check_mirrors="on")


@settings(max_examples=20, deadline=None)
@given(workers=st.integers(1, 2), devices=st.integers(1, 2), seed=st.integers(0, 3), data=st.data())
def test_the_check_raises_exactly_when_some_copies_differ(workers, devices, seed, data):
    values = data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=workers * devices,
                                max_size=workers * devices))
    result = SimCluster(workers=workers, devices_per_worker=devices, seed=seed).run(assign_replica_values(values))
    if len(set(values)) == 1:
        assert result.values() == [values[w * devices:(w + 1) * devices] for w in range(workers)]
    else:
        with pytest.raises(errors.MirroredCopiesDifferError):
            result.values()
