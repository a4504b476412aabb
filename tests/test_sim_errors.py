"""Simulator errors lead with the root cause, name the network when it lost messages, and stay short."""

from __future__ import annotations

import os
import re
import threading
import time
import traceback

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.runtime import clock
from mirrorlab.sim import Crash, Cut, Drop, SimCluster


def _key_error_on_worker_1():
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if strategy.extended._rank == 1:
        {}["missing"]
    strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None)
    return "ok"


def _two_reduces(steps: int = 2):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    return [float(strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None)) for _ in range(steps)]


def test_values_raises_the_originating_error_not_a_survivors_unavailable_error():
    result = SimCluster(workers=2).run(_key_error_on_worker_1)
    assert isinstance(result[0], errors.UnavailableError)
    assert result.root_cause == 1
    with pytest.raises(KeyError) as info:
        result.values()
    notes = "\n".join(info.value.__notes__)
    assert "worker 1 failed at test_sim_errors.py:" in notes
    assert "worker 1's error is the root cause" in notes
    assert re.search(r"worker 0: failed at test_sim_errors.py:\d+ in _key_error_on_worker_1: UnavailableError "
                     r"\(passed on from worker 1\)", notes)


def test_root_cause_is_the_origin_even_when_a_lower_worker_detects_a_passed_on_error_first():
    def program():  # RING: one-round gather-reduce would let every worker see the bad message itself
        options = tf.distribute.experimental.CommunicationOptions(implementation="RING")
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0 if strategy.extended._rank else [1.0, 2.0])),
                        axis=None)

    for seed in range(4):
        result = SimCluster(workers=3, seed=seed).run(program)
        root = result[result.root_cause]
        assert isinstance(root, errors.CollectiveShapeMismatchError)
        assert getattr(root, "passed_on_from", None) is None
        others = [e for w, e in result.errors.items() if w != result.root_cause]
        assert any(getattr(e, "passed_on_from", None) == result.root_cause for e in others)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), workers=st.integers(2, 4), bad=st.integers(0, 3), step=st.integers(1, 3),
       crash=st.booleans())
def test_the_failing_worker_is_the_root_cause_whoever_notices_first(seed, workers, bad, step, crash):
    bad %= workers

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        for k in range(1, 4):
            if not crash and strategy.extended._rank == bad and k == step:
                raise KeyError(f"worker {bad} broke")
            strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None)
        return "ok"

    faults = [Crash(bad, at_step=step)] if crash else []
    result = SimCluster(workers=workers, seed=seed, faults=faults).run(program)
    assert result.root_cause == bad
    assert result.report().splitlines()[1].startswith(f"root cause: worker {bad} ")
    with pytest.raises(errors.SimulatedCrash if crash else KeyError):
        result.values()
    assert all(getattr(e, "passed_on_from", bad) == bad for w, e in result.errors.items() if w != bad)


def test_report_leads_with_the_root_cause_and_keeps_the_unhealthy_task_on_its_line():
    report = SimCluster(workers=2, seed=3).run(_key_error_on_worker_1).report()
    lines = report.splitlines()
    assert re.match(r"root cause: worker 1 failed at test_sim_errors.py:\d+ in _key_error_on_worker_1: KeyError",
                    lines[1])
    worker0 = next(line for line in lines if line.startswith("  worker 0:"))
    assert worker0.endswith("The following tasks are unhealthy (stopped sending heartbeats): "
                            "/job:worker/replica:0/task:1")
    assert lines[-1].startswith("replay: mirrorlab.sim.SimCluster(workers=2, seed=3)")


def test_tracebacks_keep_only_user_frames_unless_asked(monkeypatch):
    def frames(result) -> list[str]:
        return [frame.filename for frame in traceback.extract_tb(result[0].__traceback__)]

    trimmed = frames(SimCluster(workers=2).run(_key_error_on_worker_1))
    assert trimmed and all(name.endswith("test_sim_errors.py") for name in trimmed)
    monkeypatch.setenv("MIRRORLAB_TRACEBACK", "1")
    full = frames(SimCluster(workers=2).run(_key_error_on_worker_1))
    assert len(full) > len(trimmed) + 3
    assert any(name.endswith("network.py") for name in full)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cut_is_diagnosed_as_the_network_not_as_mismatched_collectives(seed):
    result = SimCluster(workers=2, seed=seed, faults=[Cut(0, 1)]).run(_two_reduces)
    text = str(result[0])
    assert isinstance(result[0], errors.DeadlockError)
    assert "worker 0 -> worker 1: 1 of 1 lost (Cut(a=0, b=1))" in text
    assert "worker 1 -> worker 0: 1 of 1 lost (Cut(a=0, b=1))" in text
    assert "The cause is the network" in text and "firewall" in text
    assert "only some workers run" not in text
    assert "The cause is the network" in result.report()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_drop_is_diagnosed_as_the_network_whatever_error_it_causes(seed):
    result = SimCluster(workers=2, seed=seed, faults=[Drop(0, 1, 0.5)]).run(_two_reduces, 4)
    if result.ok:
        pytest.skip("this seed's coin flips dropped nothing")
    root = result[result.root_cause]
    shown = str(root) + "\n".join(getattr(root, "__notes__", []))
    assert "worker 0 -> worker 1: " in shown and "lost (Drop(src=0, dst=1, probability=0.5))" in shown
    assert "The cause is the network" in shown
    assert "only some workers run" not in str(root)


def test_a_desync_without_lost_messages_still_blames_the_collectives():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended.should_checkpoint:
            strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None)

    result = SimCluster(workers=2).run(program)
    assert "only some workers run" in str(result[0]) and "network" not in str(result[0])
    assert "network" not in result.report()


def _run_bounded(cluster: SimCluster, program, *args, limit: float = 60.0):
    """``cluster.run(program, *args)`` on a daemon thread; fails the test (instead of hanging it) past ``limit``."""
    box: list = []
    thread = threading.Thread(target=lambda: box.append(cluster.run(program, *args)), daemon=True)
    thread.start()
    thread.join(limit)
    assert box, f"SimCluster.run did not return within {limit} s"
    return box[0]


def test_a_worker_blocked_outside_mirrorlab_is_reported_by_name_and_stack():
    release = threading.Event()

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended._rank == 1:
            release.wait()
        return float(strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None))

    try:
        result = _run_bounded(SimCluster(workers=2, watchdog=0.5), program)
    finally:
        release.set()
    assert result.root_cause == 1
    text = str(result[1])
    assert isinstance(result[1], errors.HangError)
    assert text.startswith("worker 1 (/job:worker/replica:0/task:1) has been blocked outside mirrorlab")
    assert "in program" in text and "release.wait()" in text and "SimCluster(watchdog=" in text
    assert isinstance(result[0], errors.DeadlockError)
    assert "worker 1 (/job:worker/replica:0/task:1): hung outside mirrorlab" in str(result[0])


def test_a_replica_blocked_outside_mirrorlab_shows_its_replica_thread():
    release = threading.Event()

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()

        def step():
            if tf.distribute.get_replica_context().replica_id_in_sync_group == 1:
                release.wait()
            return tf.constant(1.0)

        return strategy.run(step)

    try:
        result = _run_bounded(SimCluster(workers=1, devices_per_worker=2, watchdog=0.5), program)
    finally:
        release.set()
    assert isinstance(result[0], errors.HangError)
    assert "/replica:1' (innermost last)" in str(result[0]) and "release.wait()" in str(result[0])


@pytest.mark.parametrize("seed", range(4))
def test_workers_waiting_on_each_other_in_real_time_end_without_hanging(seed):
    ready = threading.Event()

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended._rank == 0:
            ready.wait()
        else:
            ready.set()
        return "ok"

    result = _run_bounded(SimCluster(workers=2, seed=seed, watchdog=0.5), program)
    ready.set()
    if not result.ok:  # worker 0 waited first, holding the simulation: reported, not waited on forever
        assert list(result.errors) == [0] and isinstance(result[0], errors.HangError)
        assert "ready.wait()" in str(result[0])


@pytest.mark.parametrize("seed", range(6))
def test_checkpoints_iterator_waiting_for_the_chiefs_save_finishes_under_every_seed(tmp_path, seed):
    def program(directory: str):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended.should_checkpoint:
            return tf.train.Checkpoint(v=tf.Variable(1.0)).save(os.path.join(directory, "ckpt"))
        return next(iter(tf.train.checkpoints_iterator(directory, timeout=600)))

    result = _run_bounded(SimCluster(workers=2, seed=seed), program, str(tmp_path))
    saved, seen = result.values()
    assert saved == seen == os.path.join(str(tmp_path), "ckpt-1")
    assert result.virtual_time < 600


def test_the_clock_is_the_wall_clock_outside_and_virtual_inside_a_simulation():
    before = time.time()
    assert before <= clock.now() <= time.time()

    def program():
        start = clock.now()
        clock.sleep(3600.0)
        return clock.now() - start

    started = time.monotonic()
    assert SimCluster(workers=2).run(program).values() == [3600.0, 3600.0]
    assert time.monotonic() - started < 60


def test_a_failed_run_carries_the_trace_analysis_coded_finding():
    """A user who never runs `mirrorlab trace analyze` still gets its finding: in values()'s error and report()."""
    import mirrorlab.tf as tf

    def chief_only_reduce():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.cluster_resolver.task_id == 0:
            strategy.reduce("SUM", tf.constant(1.0), axis=None)
        strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant([1.0, 2.0])))

    result = SimCluster(workers=3, seed=0).run(chief_only_reduce)
    with pytest.raises(errors.OpError) as raised:
        result.values()
    notes = "\n".join(getattr(raised.value, "__notes__", ()))
    assert "ML-TRC-001" in notes and "Fix:" in notes
    assert "ML-TRC-001" in result.report()
    assert SimCluster(workers=2, seed=0).run(lambda: None).findings == []


def test_a_peer_timeout_reaches_the_others_as_passed_on_not_as_their_own_wait():
    """Worker 0 (timeout 5 s) times out waiting for worker 2; worker 1 (timeout 50 s) is told at 5 s and must not
    claim it waited its own 50 s."""

    def program() -> object:
        task = tf.distribute.cluster_resolver.TFConfigClusterResolver().task_id
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=5.0 if task == 0 else 50.0)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        if task == 2:
            clock.sleep(100)
        return strategy.reduce("sum", tf.constant([1.0]), axis=None)

    first, second, late = SimCluster(workers=3).run(program)
    assert isinstance(first, errors.DeadlineExceededError) and "worker 0 (/job:worker/replica:0/task:0) waited 5.0 s" \
        in str(first)
    for passed_on in (second, late):
        assert isinstance(passed_on, errors.DeadlineExceededError), passed_on
        assert str(passed_on).startswith("Collective ops is aborted by: Collective has timed out"), passed_on
        assert "waited 5.0 s" in str(passed_on) and "waited 50.0 s" not in str(passed_on)
