"""``fault_schedules()`` draws every kind of fault, partition modes and ``Maybe`` included, and Hypothesis shrinks
a failing schedule to a minimal one."""

from __future__ import annotations

import pytest
from hypothesis import find, settings

from mirrorlab.sim import Clog, Crash, Cut, Delay, Drop, Isolate, Maybe, SimCluster, Slow
from mirrorlab.testing import fault_schedules

SEARCH = settings(database=None, derandomize=True, max_examples=300, deadline=None)


def _steps() -> list[float]:
    import mirrorlab.tf as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    return [float(strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)) for _ in range(3)]


@pytest.mark.parametrize("kind", [Crash, Slow, Delay, Drop, Cut, Clog, Isolate, Maybe])
def test_every_kind_is_drawn_and_a_schedule_needing_it_shrinks_to_that_one_fault(kind):
    plan = find(fault_schedules(3, max_faults=4), lambda p: any(isinstance(f, kind) for f in p), settings=SEARCH)
    assert len(plan) == 1 and isinstance(plan[0], kind)


def test_partial_drops_are_drawn():
    plan = find(fault_schedules(3), lambda p: any(isinstance(f, Drop) and f.probability < 1 for f in p),
                settings=SEARCH)
    assert len(plan) == 1


def test_a_schedule_that_fails_the_run_shrinks_to_the_simplest_failing_one():
    """The property "every worker returns" fails on many schedules; Hypothesis shrinks to one crash at step 1."""
    plan = find(fault_schedules(3, max_faults=4), lambda p: not SimCluster(3, faults=p).run(_steps).ok,
                settings=SEARCH)
    assert plan == [Crash(0, at_step=1)]


def test_a_schedule_that_loses_messages_shrinks_to_one_plain_network_fault():
    plan = find(fault_schedules(3, max_faults=4), lambda p: SimCluster(3, faults=p).run(_steps).network_losses != "",
                settings=SEARCH)
    assert len(plan) == 1 and isinstance(plan[0], (Drop, Cut, Isolate)), plan
