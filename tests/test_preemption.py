"""PreemptionCheckpointHandler: a termination notice on any worker makes every worker save after the same step and
exit; the restarted job restores and goes on to the weights of an uninterrupted run. The single-worker sequence
(notice in step 2, save after step 4, exit, restore with ``total_run_calls`` 4) was recorded from TF 2.21."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab import errors
from mirrorlab.sim import Crash, Preempt, SimCluster

STEPS = 8


class Exited(Exception):
    """Raised by the test's exit_fn (TF's default exits the process with code 42)."""


def _exit() -> None:
    raise Exited()


def _handler(strategy, directory, **config):
    with strategy.scope():
        v = ml.Variable(0.0)
    checkpoint = ml.train.Checkpoint(v=v)
    handler = ml.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, checkpoint, os.path.join(directory, "ckpt"),
        ml.distribute.experimental.TerminationConfig(**config))
    return v, checkpoint, handler


def test_a_notice_saves_after_the_next_step_and_a_restart_resumes_as_tf(tmp_path):
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    notices = iter([False, False, False, True])  # polled at each run: the 4th call (after 3 steps) sees it
    v, _, handler = _handler(strategy, str(tmp_path), exit_fn=_exit, termination_watcher_fn=lambda: next(notices))
    totals = []
    with pytest.raises(Exited):
        for _ in range(10):
            handler.run(lambda: v.assign_add(1.0))
            totals.append(int(handler.total_run_calls))
    assert totals == [1, 2, 3, 4] and float(v.numpy()) == 4.0  # TF trains one more step after the notice
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["checkpoint", "ckpt-1.index.json", "ckpt-1.npz"]
    keys = [key for key, _ in ml.train.list_variables(str(tmp_path / "ckpt" / "ckpt-1"))]
    assert "checkpointed_runs/.ATTRIBUTES/VARIABLE_VALUE" in keys
    v2, _, restored = _handler(strategy, str(tmp_path), exit_fn=_exit, termination_watcher_fn=lambda: False)
    assert restored.total_run_calls == 4 and float(v2.numpy()) == 4.0


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"),
                    reason="SIGTERM is caught on the main thread only")
def test_sigterm_is_a_notice(tmp_path):
    previous = signal.getsignal(signal.SIGTERM)
    try:
        v, _, handler = _handler(ml.MirroredStrategy(["/cpu:0"]), str(tmp_path), exit_fn=_exit)

        def step(i):
            v.assign_add(1.0)
            if i == 2:
                os.kill(os.getpid(), signal.SIGTERM)

        with pytest.raises(Exited):
            for i in range(10):
                handler.run(step, i)
        assert i == 4 and float(v.numpy()) == 4.0  # as TF 2.21: the save comes at the 5th call
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_checkpoint_without_a_directory_is_refused_with_the_fix():
    with pytest.raises(errors.InvalidArgumentError, match="checkpoint_dir must be passed(.|\n)*Fix: "):
        ml.distribute.experimental.PreemptionCheckpointHandler(None, ml.train.Checkpoint(v=ml.Variable(1.0)))
    with pytest.raises(NotImplementedError, match="grace_period(.|\n)*Fix: "):
        ml.distribute.experimental.TerminationConfig(grace_period=30)


def _training(directory):
    """A 2-worker job that trains STEPS steps through the handler (TF's restart code, 42, on a notice)."""

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            w = ml.Variable(np.ones(3, np.float32))
        checkpoint = ml.train.Checkpoint(w=w)
        handler = ml.distribute.experimental.PreemptionCheckpointHandler(
            strategy.cluster_resolver, checkpoint, os.path.join(directory, "ckpt"))
        start = int(handler.total_run_calls)

        def step(k):
            def replica(x):
                ml.get_replica_context().all_reduce("sum", x)
                w.assign(w * 0.9 + x)
            strategy.run(replica, args=(np.float32(k),))

        for k in range(start, STEPS):
            handler.run(step, k)
        return start, w.numpy()

    return program


def test_a_preempted_worker_makes_every_worker_save_the_same_step_and_the_restart_ends_as_without(tmp_path):
    uninterrupted = SimCluster(workers=2, devices_per_worker=2).run(_training(str(tmp_path / "plain"))).values()
    run = SimCluster(workers=2, devices_per_worker=2, faults=(Preempt(worker=1, at_step=3),)).run(
        _training(str(tmp_path / "job")))
    assert {w: (type(e).__name__, e.code) for w, e in run.errors.items()} == {0: ("SystemExit", 42),
                                                                             1: ("SystemExit", 42)}
    # noticed during step 3, shared at the 4th call, saved by every worker after step 4; the non-chief's
    # workertemp directory is gone
    assert sorted(os.listdir(tmp_path / "job")) == ["ckpt"]
    restarted = SimCluster(workers=2, devices_per_worker=2).run(_training(str(tmp_path / "job"))).values()
    assert [start for start, _ in restarted] == [4, 4]
    for (_, resumed), (_, plain) in zip(restarted, uninterrupted):
        np.testing.assert_array_equal(resumed, plain)


def test_a_crash_instead_of_a_notice_saves_nothing(tmp_path):
    run = SimCluster(workers=2, faults=(Crash(worker=1, at_step=3),)).run(_training(str(tmp_path / "job")))
    assert not run.ok and not (tmp_path / "job" / "ckpt").exists()


def test_a_multi_worker_handler_without_the_strategy_is_refused_with_the_fix(tmp_path):
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        checkpoint = ml.train.Checkpoint(v=ml.Variable(1.0))  # a plain variable, made outside the scope
        directory = str(tmp_path / f"ckpt{strategy.cluster_resolver.task_id}")
        ml.distribute.experimental.PreemptionCheckpointHandler(strategy.cluster_resolver, checkpoint, directory)

    run = SimCluster(workers=2).run(program)
    assert all(isinstance(e, ValueError) and "Fix: make the handler inside" in str(e) for e in run.errors.values())
    assert len(run.errors) == 2
