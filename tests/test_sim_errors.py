"""Simulator errors lead with the root cause, name the network when it lost messages, and stay short."""

from __future__ import annotations

import traceback

import pytest

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.sim import Cut, Drop, SimCluster


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
    assert "worker 0: failed at test_sim_errors.py:18 in _key_error_on_worker_1: UnavailableError " \
           "(passed on from worker 1)" in notes


def test_root_cause_is_the_origin_even_when_a_lower_worker_detects_a_passed_on_error_first():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0 if strategy.extended._rank else [1.0, 2.0])),
                        axis=None)

    for seed in range(4):
        result = SimCluster(workers=3, seed=seed).run(program)
        root = result[result.root_cause]
        assert isinstance(root, errors.CollectiveShapeMismatchError)
        assert getattr(root, "passed_on_from", None) is None
        others = [e for w, e in result.errors.items() if w != result.root_cause]
        assert any(getattr(e, "passed_on_from", None) == result.root_cause for e in others)


def test_report_leads_with_the_root_cause_and_keeps_the_unhealthy_task_on_its_line():
    report = SimCluster(workers=2, seed=3).run(_key_error_on_worker_1).report()
    lines = report.splitlines()
    assert lines[1].startswith("root cause: worker 1 failed at test_sim_errors.py:17 in _key_error_on_worker_1: "
                               "KeyError")
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
