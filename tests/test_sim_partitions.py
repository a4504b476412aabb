"""Partition modes of the simulator: ``Clog`` holds a link's messages for a while and delivers them in order;
``Isolate`` cuts every link of one worker from a virtual time on, for a while or for good."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlab import errors
from mirrorlab.sim import Clog, Isolate, SimCluster, Slow


def _sums(steps: int = 3) -> list[float]:
    """Each step all-reduces a different per-worker value, so a message taken out of order changes a result."""
    import mirrorlab.tf as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    context = tf.distribute.get_replica_context
    out = []
    for step in range(steps):
        value = strategy.run(lambda: tf.constant([float(step + 1), 10.0 * (step + 1)])
                             * tf.cast(context().replica_id_in_sync_group + 1, tf.float32))
        out += [float(x) for x in strategy.reduce("SUM", value, axis=None).numpy()]
    return out


def _stepping(workers: int, seconds: float) -> list[Slow]:
    """Every worker spends ``seconds`` of virtual time before each step, so steps happen at known times."""
    return [Slow(w, seconds_per_step=seconds) for w in range(workers)]


@settings(max_examples=15, deadline=None)
@given(workers=st.integers(2, 4), seed=st.integers(0, 2**16), start=st.sampled_from([0.0, 0.5, 1.5]),
       seconds=st.sampled_from([0.25, 2.0, 7.0]), data=st.data())
def test_a_clogged_link_delays_the_run_but_never_changes_its_results(workers, seed, start, seconds, data):
    a, b = data.draw(st.lists(st.integers(0, workers - 1), min_size=2, max_size=2, unique=True))
    plain = SimCluster(workers, seed=seed, faults=_stepping(workers, 1.0)).run(_sums)
    clogged = SimCluster(workers, seed=seed, faults=[*_stepping(workers, 1.0), Clog(a, b, start, seconds)]).run(_sums)
    assert clogged.values() == plain.values()
    assert clogged.network_losses == ""
    assert clogged.virtual_time >= plain.virtual_time


def test_a_clog_over_the_first_step_holds_its_messages_until_the_window_ends():
    result = SimCluster(2, faults=[Clog(0, 1, 0.0, 5.0)]).run(_sums, 1)
    assert result.values() == [[3.0, 30.0]] * 2
    assert result.virtual_time >= 5.0


def test_a_worker_isolated_for_good_fails_the_run_with_the_network_named():
    result = SimCluster(3, seed=1, faults=[*_stepping(3, 1.0), Isolate(2, 1.5)]).run(_sums)
    assert not result.ok
    for outcome in result:
        assert isinstance(outcome, errors.DeadlineExceededError), result.report()
    losses = result.network_losses
    assert "worker 0 -> worker 2" in losses or "worker 2 -> worker 0" in losses
    assert "Isolate(worker=2, start=1.5)" in losses and "The cause is the network" in losses


def test_an_isolation_between_messages_costs_nothing():
    """Strategy creation talks at t=0 and the first step at t=1: cutting worker 1 off in between loses nothing."""
    plain = SimCluster(3, faults=_stepping(3, 1.0)).run(_sums)
    isolated = SimCluster(3, faults=[*_stepping(3, 1.0), Isolate(1, 0.2, 0.5)]).run(_sums)
    assert isolated.values() == plain.values() and isolated.network_losses == ""


def test_an_isolation_that_starts_after_the_run_costs_nothing():
    assert SimCluster(2, faults=[Isolate(1, 100.0)]).run(_sums).ok
