"""Per-worker hosts on the simulator (``WorkerSetup``): their TF_CONFIG, environment and fingerprint, and the
start-up checks that fail at strategy creation naming both workers instead of hanging."""

from __future__ import annotations

import json
import os

import pytest

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.sim import SimCluster, WorkerSetup


def _sum_of_ones() -> float:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    return float(strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None))


def _tf_configs(addresses: list[str]) -> list[WorkerSetup]:
    return [WorkerSetup(w, environ={"TF_CONFIG": json.dumps({"cluster": {"worker": addresses},
                                                             "task": {"type": "worker", "index": w}})})
            for w in range(len(addresses))]


def test_a_worker_sees_its_own_environment_and_devices():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        return os.environ.get("LD_LIBRARY_PATH"), strategy.num_replicas_in_sync

    setups = [WorkerSetup(w, environ={"LD_LIBRARY_PATH": "/opt/cuda"}, devices=2) for w in range(2)]
    assert SimCluster(2, setups=setups).run(program).values() == [("/opt/cuda", 4)] * 2


def test_consistent_tf_configs_with_real_host_names_train():
    assert SimCluster(2, setups=_tf_configs(["a.example:1", "b.example:1"])).run(_sum_of_ones).values() == [2.0, 2.0]


@pytest.mark.parametrize("setup, key", [(WorkerSetup(1, fingerprint={"tensorflow": "2.20.0"}), "tensorflow"),
                                        (WorkerSetup(1, devices=2), "device_count"),
                                        (WorkerSetup(1, environ={"LD_LIBRARY_PATH": "/old"}), "LD_LIBRARY_PATH")])
def test_a_differing_worker_fails_at_start_up_naming_both_workers(setup, key):
    result = SimCluster(2, setups=[setup]).run(_sum_of_ones)
    for w, other in ((0, 1), (1, 0)):
        assert isinstance(result[w], errors.FailedPreconditionError)
        text = str(result[w])
        assert f"worker {w} (/job:worker/replica:0/task:{w}) has {key}=" in text
        assert f"worker {other} (/job:worker/replica:0/task:{other}) has {key}=" in text
        assert f"Fix: give every host the same {key}" in text
    assert len(result.trace) == 0  # stopped before any collective


def test_localhost_across_hosts_names_the_address_and_where_the_peer_listens():
    result = SimCluster(2, setups=_tf_configs(["localhost:12345", "localhost:12346"])).run(_sum_of_ones)
    assert isinstance(result[0], errors.UnavailableError)
    assert "says 'localhost:12346', which from its own host 'sim-worker-0' means sim-worker-0:12346" in str(result[0])
    assert "worker 1 listens on sim-worker-1:12346" in str(result[0])


def test_duplicate_addresses_cannot_start_a_server():
    result = SimCluster(2, setups=_tf_configs(["h.example:1", "h.example:1"])).run(_sum_of_ones)
    assert all(isinstance(e, errors.UnknownError) and "share the address 'h.example:1'" in str(e) for e in result)


def test_a_tf_config_of_another_cluster_shape_is_refused():
    result = SimCluster(2, setups=_tf_configs(["a:1", "b:1"])[:1]
                        + [WorkerSetup(1, environ={"TF_CONFIG": json.dumps(
                            {"cluster": {"worker": ["a:1", "b:1", "c:1"]}, "task": {"type": "worker", "index": 1}})})]
                        ).run(_sum_of_ones)
    assert isinstance(result[1], ValueError) and "runs in a cluster of {'worker': 2} tasks per job" in str(result[1])


def test_setups_must_name_distinct_workers_of_the_cluster():
    with pytest.raises(ValueError, match="worker=2 must be a worker of this 2-worker cluster"):
        SimCluster(2, setups=[WorkerSetup(2)])
    with pytest.raises(ValueError, match="at most one setup"):
        SimCluster(2, setups=[WorkerSetup(1), WorkerSetup(1)])
    with pytest.raises(ValueError, match="keys and values must be strings"):
        WorkerSetup(0, fingerprint={"cuda": 12})


def test_replay_line_rebuilds_the_setups():
    result = SimCluster(2, setups=[WorkerSetup(1, devices=2)]).run(_sum_of_ones)
    assert "setups=(WorkerSetup(worker=1, environ={}, devices=2, fingerprint={}),)" in result.replay
