"""``mirrorlab.testing``: the Hypothesis strategies make what they promise, the named shapes are TF's, and the
pytest plugin finds a planted bug (per-replica loss averaging) and prints a replay line that reproduces it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlab import errors
from mirrorlab.sim import Crash, Cut, Delay, Drop, SimCluster, Slow, WorkerSetup
from mirrorlab.testing import cluster_shapes, datasets, fault_schedules, global_batches, seeds, tf_configs
from mirrorlab.testing.combinations import ALL, by_name

pytest_plugins = ("pytester",)
EXAMPLE = Path(__file__).parent / "example_user_package"
FAULT_ENDINGS = (errors.SimulatedCrash, errors.UnavailableError, errors.DeadlineExceededError)


def _steps() -> list[float]:
    import mirrorlab.tf as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    for _ in range(3):
        strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
    return [1.0]


def test_named_shapes_follow_tensorflows_strategy_combinations():
    assert {(s.workers, s.devices_per_worker, s.chief) for s in ALL.values()} == {
        (2, 1, True), (2, 2, True), (4, 1, True), (1, 4, False), (1, 1, False)}
    assert by_name("multi_worker_mirrored_2x1_cpu").replicas == 2
    try:
        by_name("2x1_gpu")
    except ValueError as err:
        assert "Fix: use one of multi_worker_mirrored_2x1_cpu" in str(err)


@settings(max_examples=25, deadline=None)
@given(shape=cluster_shapes(max_workers=3), seed=seeds(), data=st.data())
def test_any_fault_schedule_ends_in_a_result_or_a_fault_error_never_a_hang(shape, seed, data):
    faults = data.draw(fault_schedules(shape.workers))
    result = shape.cluster(seed, faults).run(_steps)
    for outcome in result:
        assert outcome == [1.0] or isinstance(outcome, FAULT_ENDINGS), result.report()


@pytest.mark.parametrize("seed", range(4))
def test_a_partially_dropped_link_ends_in_a_lost_message_error_never_wrong_data(seed):
    """A lost message is waited for, not replaced by the next one: the run deadlocks naming the network. Workers
    that got every message they needed (a one-round gather-reduce needs none through the lossy link) finish with
    the right value."""
    result = SimCluster(3, seed=seed, faults=[Drop(1, 2, probability=0.5, after=2)]).run(_steps)
    if result.ok:  # this seed lost nothing the program needed
        assert result.values() == [[1.0]] * 3
        return
    assert "worker 1 -> worker 2" in result.network_losses
    assert isinstance(result[2], errors.DeadlineExceededError), result.report()  # the receiver of the lossy link
    for outcome in result:
        if outcome != [1.0]:
            assert isinstance(outcome, errors.DeadlineExceededError), result.report()
            assert "The cause is the network" in str(outcome)


@settings(max_examples=10, deadline=None)
@given(config=tf_configs(valid=True))
def test_valid_tf_configs_run_a_simulated_cluster(config):
    """Every worker gets the drawn cluster with its own task index: the strategy starts and trains."""
    parsed = json.loads(config)
    workers = len(parsed["cluster"]["worker"])
    setups = [WorkerSetup(k, environ={"TF_CONFIG": json.dumps({**parsed, "task": {"type": "worker", "index": k}})})
              for k in range(workers)]
    assert SimCluster(workers, setups=setups).run(_steps).values() == [[1.0]] * workers


@settings(max_examples=25, deadline=None)
@given(config=tf_configs(valid=False), seed=seeds())
def test_every_invalid_tf_config_fails_at_start_up_with_a_clear_error(config, seed):
    """One worker of a 2-worker cluster gets a broken TF_CONFIG: it fails when it creates its strategy."""
    result = SimCluster(2, seed=seed, setups=[WorkerSetup(1, environ={"TF_CONFIG": config})]).run(_steps)
    failure = result[1]
    assert isinstance(failure, (ValueError, errors.UnknownError, errors.UnavailableError)), (config, failure)
    assert "TF_CONFIG" in str(failure) or "task" in str(failure).lower(), (config, failure)


@given(replicas=st.integers(2, 8), data=st.data())
def test_global_batches_include_uneven_splits(replicas, data):
    batch = data.draw(global_batches(replicas))
    assert batch >= 1
    assert data.draw(global_batches(replicas).filter(lambda b: b % replicas != 0)) % replicas != 0


@given(data=datasets(max_examples=5))
def test_datasets_are_paired_finite_float32_rows(data):
    x, y = data
    assert x.dtype == y.dtype == np.float32 and len(x) == len(y) >= 1 and x.shape[1] == 2
    assert np.all(np.isfinite(x)) and np.all(np.isfinite(y))


def _user_package(pytester, average: str) -> None:
    shutil.copy(EXAMPLE / "user_training.py", pytester.path / "user_training.py")
    source = (EXAMPLE / "test_user_training.py").read_text()
    pytester.makepyfile(test_user=source.replace("train, batch", f"lambda b: train(b, average={average!r}), batch")
                        .replace("sim_cluster.run(train, 6)", f"sim_cluster.run(train, 6, average={average!r})"))


def test_plugin_runs_the_users_suite_over_named_shapes(pytester):
    _user_package(pytester, "global")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=5)


def test_plugin_finds_the_planted_per_replica_averaging_bug_and_prints_a_replay_line(pytester):
    _user_package(pytester, "per_replica")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", "-k", "single_device")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "mirrorlab replay" in text and "shape=ClusterShape(workers=" in text
    line = next(line for line in result.stdout.lines if line.startswith("replay: seed="))
    seed = int(re.search(r"seed=(\d+)", line).group(1))
    shape = re.search(r"SimCluster\(workers=(\d+)(?:, devices_per_worker=(\d+))?(, chief=True)?", line)
    batch = int(re.search(r"Draw 1: (\d+)", text).group(1))
    workers, devices = int(shape.group(1)), int(shape.group(2) or 1)
    assert (batch % (workers * devices)) != 0  # shrunk to an uneven split, the bug's trigger

    import sys
    sys.path.insert(0, str(EXAMPLE))
    try:
        from user_training import train
    finally:
        sys.path.remove(str(EXAMPLE))
    replayed = SimCluster(workers, devices_per_worker=devices, chief=bool(shape.group(3)), seed=seed).run(
        train, batch, average="per_replica").values()
    alone = SimCluster(1).run(train, batch, average="per_replica").values()[0]
    assert not np.allclose(replayed[0], alone, rtol=1e-5, atol=1e-6)


def test_the_plugin_is_registered_for_pytest_by_entry_point():
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="pytest11") if e.name == "mirrorlab"] == ["mirrorlab.testing.plugin"]


def test_the_marker_without_names_runs_every_named_shape(pytester):
    pytester.makepyfile(test_shapes="""
        import pytest

        @pytest.mark.cluster_shapes
        def test_shape(sim_cluster, cluster_shape):
            assert sim_cluster.shape is cluster_shape
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=len(ALL))
    assert all(f"test_shape[{name}] PASSED" in result.stdout.str() for name in ALL)
