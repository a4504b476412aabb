"""Greenlet and OS-thread carriers run the same interleaving; greenlets keep thread-locals apart and honour the
watchdog from the main thread (sim/carriers.py, sim/hang_interrupt.py, sim/greenlet_relay.py)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.sim import SimCluster
from mirrorlab.sim.carriers import GreenletCarrier, ThreadCarrier, choose_carrier

_mine = threading.local()  # a user's module-level thread-local: each simulated worker and replica sees its own


def _program(steps: int):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    out = []
    for step in range(steps):
        def replica_fn():
            ctx = tf.distribute.get_replica_context()
            _mine.value = (strategy.extended._rank, ctx.replica_id_in_sync_group)
            total = ctx.all_reduce("sum", tf.constant(float(step + ctx.replica_id_in_sync_group)))
            return total, _mine.value

        per_replica = strategy.run(replica_fn)
        results = strategy.experimental_local_results(per_replica)
        out.append([(float(total), value) for total, value in results])
    return out


def _on_other_thread(fn):
    box: list = []
    thread = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    thread.start()
    thread.join(60)
    assert box, "the run did not finish"
    return box[0]


def test_the_carrier_is_greenlets_on_the_main_thread_or_without_watchdog_else_os_threads():
    assert isinstance(choose_carrier(5.0), GreenletCarrier)
    assert isinstance(choose_carrier(None), GreenletCarrier)
    assert isinstance(_on_other_thread(lambda: choose_carrier(5.0)), ThreadCarrier)
    assert isinstance(_on_other_thread(lambda: choose_carrier(None)), GreenletCarrier)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), workers=st.integers(1, 4), devices=st.integers(1, 3))
def test_greenlets_and_os_threads_give_the_same_results_and_the_same_trace(seed, workers, devices):
    cluster = SimCluster(workers=workers, devices_per_worker=devices, seed=seed)
    by_greenlets = cluster.run(_program, 2)  # main thread: greenlets
    by_threads = _on_other_thread(lambda: cluster.run(_program, 2))  # watchdog off the main thread: OS threads
    assert by_greenlets.values() == by_threads.values()
    assert by_greenlets.trace.to_jsonl() == by_threads.trace.to_jsonl()
    for w, steps in enumerate(by_greenlets.values()):  # each replica read back its own thread-local
        for replicas in steps:
            assert [value for _, value in replicas] == [(w, w * devices + k) for k in range(devices)]


@pytest.mark.parametrize("workers, devices", [(2, 1), (1, 2)])
def test_a_worker_or_replica_blocked_in_real_time_on_the_main_thread_is_given_up(workers, devices):
    release = threading.Event()

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()

        def step():  # global replica 1 blocks: worker 1's only replica, or worker 0's second
            if tf.distribute.get_replica_context().replica_id_in_sync_group == 1:
                release.wait(30)  # bounded: a broken watchdog fails the test instead of hanging it
            return tf.constant(1.0)

        return float(strategy.reduce("sum", strategy.run(step), axis=None))

    start = time.monotonic()
    result = SimCluster(workers=workers, devices_per_worker=devices, watchdog=0.5).run(program)
    assert time.monotonic() - start < 20
    hung = workers - 1
    assert isinstance(result[hung], errors.HangError) and "release.wait(30)" in str(result[hung])
    if devices > 1:  # the replica greenlet's stack is shown under its name
        assert "/replica:1' (innermost last)" in str(result[hung])
    else:  # the other worker goes on, and learns of the hung one
        assert isinstance(result[0], errors.DeadlockError)
        assert "worker 1 (/job:worker/replica:0/task:1): hung outside mirrorlab" in str(result[0])


@pytest.mark.parametrize("workers", [2, 70])
def test_many_greenlet_workers_start_on_a_shallow_stack(workers):
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return float(strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None))

    assert SimCluster(workers=workers, seed=3).run(program).values() == [float(workers)] * workers
