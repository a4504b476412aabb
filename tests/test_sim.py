"""The simulator's promises: determinism, virtual time, never hanging, fault hooks, TF_CONFIG per worker."""

from __future__ import annotations

import json
import os
import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab import errors
from mirrorlab.sim import Crash, Cut, Delay, Drop, SimCluster, Slow
from mirrorlab.trace import Trace


def training_program(steps: int = 3):
    strategy = ml.MultiWorkerMirroredStrategy()
    with strategy.scope():
        w = ml.Variable(np.ones(3, np.float32))

    def step(x):
        g = ml.get_replica_context().all_reduce("mean", x * w)
        w.assign_sub(0.1 * g)
        return np.sum(g)

    losses = []
    for _ in range(steps):
        x = strategy.experimental_distribute_values_from_function(
            lambda c: np.full(3, c.replica_id_in_sync_group + 1.0, np.float32))
        losses.append(float(strategy.reduce("sum", strategy.run(step, args=(x,)), axis=None)))
    return losses, w.numpy().tolist()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), workers=st.integers(1, 4), devices=st.integers(1, 3))
def test_same_seed_same_trace_bytes_and_results(seed, workers, devices):
    cluster = SimCluster(workers=workers, devices_per_worker=devices, seed=seed)
    a, b = cluster.run(training_program), cluster.run(training_program)
    assert a.trace.to_jsonl().encode() == b.trace.to_jsonl().encode()
    assert a.values() == b.values()


def test_different_seeds_explore_different_interleavings_with_the_same_results():
    runs = [SimCluster(workers=3, seed=s).run(training_program) for s in range(12)]
    assert len({r.trace.to_jsonl() for r in runs}) > 1
    assert all(r.values() == runs[0].values() for r in runs)


def test_trace_round_trips_and_names_every_collective():
    result = SimCluster(workers=2, devices_per_worker=2, seed=5).run(training_program, 1)
    trace = Trace.from_jsonl(result.trace.to_jsonl())
    assert trace.to_jsonl() == result.trace.to_jsonl()
    ops = {(e.worker, e.seq): e.op for e in trace}
    assert ops[(0, 1)] == ops[(1, 1)] == "barrier"
    reduces = [e for e in trace if e.op == "all_reduce" and e.worker == 1]
    assert {e.replica for e in reduces} == {2, 3}
    assert all(e.site.startswith("test_sim.py:") for e in reduces)
    assert {tuple(e.shape) for e in reduces} >= {(3,)}


def test_each_worker_sees_its_own_tf_config():
    def program():
        config = json.loads(os.environ["TF_CONFIG"])
        strategy = ml.MultiWorkerMirroredStrategy()
        return config["task"], strategy.extended._task_type, strategy.extended._task_id

    result = SimCluster(workers=3, chief=True).run(program).values()
    assert result == [({"type": "chief", "index": 0}, "chief", 0), ({"type": "worker", "index": 0}, "worker", 0),
                      ({"type": "worker", "index": 1}, "worker", 1)]
    assert "TF_CONFIG" not in os.environ or json.loads(os.environ["TF_CONFIG"]) != result[0][0]


def _seeded_draws() -> tuple:
    """Seed the process-wide generators, draw, let the other workers run (a collective), draw again."""
    np.random.seed(42)
    random.seed(7)
    first = (np.random.rand(3).tolist(), random.random())
    ml.distribute.MultiWorkerMirroredStrategy().reduce("SUM", ml.constant(1.0), axis=None)
    return first, np.random.rand(1).tolist(), random.random()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_worker_has_its_own_process_wide_random_state(seed):
    """Separate worker processes seeded alike draw alike; simulated workers share one process, so the simulator
    gives each its own ``random`` and ``np.random`` state, and puts the caller's back afterwards."""
    np.random.seed(42)
    random.seed(7)
    alone = ((np.random.rand(3).tolist(), random.random()), np.random.rand(1).tolist(), random.random())
    np.random.seed(5)
    random.seed(5)
    expected_host = (np.random.rand(), random.random())
    np.random.seed(5)
    random.seed(5)
    draws = SimCluster(workers=3, seed=seed).run(_seeded_draws).values()
    assert draws == [alone] * 3
    assert (np.random.rand(), random.random()) == expected_host


def test_unseeded_process_random_state_depends_on_the_worker_not_the_schedule():
    def draw() -> tuple:
        ml.distribute.MultiWorkerMirroredStrategy().reduce("SUM", ml.constant(1.0), axis=None)
        return np.random.rand(), random.random()

    runs = [SimCluster(workers=3, seed=seed).run(draw).values() for seed in (0, 1)]
    assert runs[0] == runs[1]
    assert len({value for value, _ in runs[0]}) == 3


def test_collective_only_the_chief_calls_ends_in_deadlock_error_not_a_hang():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        if strategy.extended.should_checkpoint:
            strategy.run(lambda: ml.get_replica_context().all_reduce("sum", ml.constant(1.0)))
        return "done"

    result = SimCluster(workers=2, seed=4).run(program)
    assert result[1] == "done"
    error = result[0]
    assert isinstance(error, errors.DeadlockError)
    text = str(error)
    assert "worker 0 (/job:worker/replica:0/task:0): waits for worker 1 in all_reduce(SUM) float32[] #2" in text
    assert "worker 1 (/job:worker/replica:0/task:1): finished its program (returned)" in text
    assert "test_sim.py" in text and "seed=4" in text and "SimCluster(workers=2, seed=4)" in text


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), workers=st.integers(2, 5), devices=st.integers(1, 2),
       bad=st.integers(0, 4), at=st.integers(0, 3),
       kind=st.sampled_from(["shape", "dtype", "op", "skip"]))
def test_desynced_program_always_ends_in_mismatch_or_deadlock(seed, workers, devices, bad, at, kind):
    bad %= workers

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        me = strategy.extended._rank
        for step in range(4):
            x = np.ones(4, np.float32)
            if me == bad and step == at:
                if kind == "skip":
                    continue
                if kind == "shape":
                    x = np.ones(2, np.float32)
                if kind == "dtype":
                    x = np.ones(4, np.float64)
                if kind == "op":
                    strategy.run(lambda: ml.get_replica_context().all_gather(x, axis=0))
                    continue
            strategy.run(lambda: ml.get_replica_context().all_reduce("sum", x))
        return "ok"

    started = time.monotonic()
    result = SimCluster(workers=workers, devices_per_worker=devices, seed=seed).run(program)
    assert time.monotonic() - started < 30
    assert not result.ok
    for w, outcome in enumerate(result):
        if outcome != "ok":
            assert isinstance(outcome, (errors.CollectiveMismatchError, errors.DeadlockError)), (w, outcome)
    if kind in ("shape", "dtype", "op"):
        assert any(isinstance(o, errors.CollectiveMismatchError) for o in result)


def test_shape_mismatch_across_workers_names_both_sides_and_poisons_later_collectives():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        me = strategy.extended._rank
        try:
            strategy.run(lambda: ml.get_replica_context().all_reduce("sum", np.ones(4 if me == 0 else 2)))
        except errors.InvalidArgumentError as first:
            try:
                strategy.reduce("sum", strategy.run(lambda: 1.0), axis=None)
            except errors.InvalidArgumentError as later:
                return str(first), str(later)
        return "no error"

    (first0, later0), (first1, later1) = SimCluster(workers=2).run(program).values()
    for text in (first0, first1):
        assert "Shape mismatch in the collective instance 2" in text
        assert "expected shape [4]" in text or "expected shape [2]" in text
        assert "worker 0 (/job:worker/replica:0/task:0): all_reduce(SUM) float64[4] #2" in text
        assert "worker 1 (/job:worker/replica:0/task:1): all_reduce(SUM) float64[2] #2" in text
    assert "Restart your program to reset" in later0 or "Shape mismatch" in later0


def test_timeout_is_virtual_and_raises_deadline_exceeded():
    def program():
        options = ml.CommunicationOptions(timeout_seconds=3.0)
        strategy = ml.MultiWorkerMirroredStrategy(communication_options=options)
        strategy.run(lambda: ml.get_replica_context().all_reduce("sum", ml.constant(1.0)))
        return "ok"

    started = time.monotonic()
    result = SimCluster(workers=2, faults=[Slow(1, seconds_per_step=60.0)]).run(program)
    assert time.monotonic() - started < 5
    assert isinstance(result[0], errors.DeadlineExceededError)
    assert str(result[0]).startswith("Collective has timed out during execution.")
    assert "worker 1" in str(result[0])
    assert result.virtual_time >= 3.0


def test_slow_worker_without_timeout_only_costs_virtual_time():
    result = SimCluster(workers=2, faults=[Slow(0, seconds_per_step=5.0)]).run(training_program, 2)
    assert result.ok and result.virtual_time == pytest.approx(10.0)


def test_crashed_worker_is_noticed_after_the_heartbeat_timeout():
    result = SimCluster(workers=3, faults=[Crash(2, at_step=2)]).run(training_program, 4)
    assert isinstance(result[2], errors.SimulatedCrash)
    for w in (0, 1):
        assert isinstance(result[w], errors.UnavailableError)
        assert "/job:worker/replica:0/task:2" in str(result[w])
        assert "stopped sending heartbeats" in str(result[w])
    assert result.virtual_time == pytest.approx(10.0)


def test_crash_at_collective_counts_collectives_from_one():
    result = SimCluster(workers=2, faults=[Crash(1, at_collective=1)]).run(training_program, 1)
    assert isinstance(result[1], errors.SimulatedCrash)
    assert "collective #1" in str(result[1])


def test_cut_pair_hangs_and_is_reported_as_deadlock():
    result = SimCluster(workers=2, faults=[Cut(0, 1)]).run(training_program, 1)
    assert all(isinstance(o, errors.DeadlockError) for o in result)
    assert "waits for worker" in str(result[0])


def test_delay_and_drop_faults():
    delayed = SimCluster(workers=2, faults=[Delay(0, 1, 2.5)]).run(training_program, 1)
    assert delayed.ok and delayed.virtual_time >= 2.5
    dropped = SimCluster(workers=2, faults=[Drop(1, 0, probability=1.0, after=2)]).run(training_program, 2)
    assert not dropped.ok


def test_fault_naming_a_missing_worker_is_rejected():
    with pytest.raises(ValueError, match=r"worker=5 is not a worker of this 2-worker cluster"):
        SimCluster(workers=2, faults=[Crash(5, at_step=1)])


def test_failure_carries_seed_and_replay_line():
    def program():
        raise KeyError("boom")

    result = SimCluster(workers=2, seed=99).run(program)
    with pytest.raises(KeyError) as info:
        result.values()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "seed=99" in notes and "SimCluster(workers=2, seed=99).run(" in notes
    assert "replay: mirrorlab.sim.SimCluster(workers=2, seed=99)" in result.report()


def test_replicas_that_disagree_locally_are_reported():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()

        def step():
            ctx = ml.get_replica_context()
            if ctx.replica_id_in_sync_group % 2 == 0:
                return ctx.all_reduce("sum", ml.constant(1.0))
            return 0.0

        return strategy.run(step)

    result = SimCluster(workers=1, devices_per_worker=2).run(program)
    assert isinstance(result[0], errors.CollectiveMismatchError)
    assert "returned from the replica function" in str(result[0])
