"""Which environment a process gets, and the backend settings' errors."""

import json
import subprocess
import sys

import pytest

from mirrorlab.backend.settings import BackendSettings, devices_per_worker
from mirrorlab.runtime.binding import names_multi_worker_cluster

CLUSTER = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}


@pytest.mark.parametrize("tf_config, expected", [
    (json.dumps(CLUSTER), True),
    (json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "chief", "index": 0}}), True),
    (json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}), False),
    (json.dumps({"cluster": {"worker": ["a:1"], "evaluator": ["c:1"]}}), False),
    ("", False),
    ("{not json", False),
])
def test_a_multi_worker_tf_config_selects_the_backend(tf_config, expected):
    assert names_multi_worker_cluster(tf_config) is expected


def test_process_default_is_decided_by_tf_config_at_first_use():
    code = ("from mirrorlab.runtime import current_environment as c; e = c(); "
            "import os; os.environ.pop('TF_CONFIG'); print(type(e).__name__, c() is e)")
    out = subprocess.run([sys.executable, "-c", code], env={"TF_CONFIG": json.dumps(CLUSTER), "PATH": ""},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["BackendEnvironment", "True"], out.stderr


def test_settings_name_the_variable_and_the_fix():
    with pytest.raises(ValueError, match="MIRRORLAB_CLUSTER_TOKEN is not set.*mirrorlab launch"):
        BackendSettings.from_environ({})
    with pytest.raises(ValueError, match="MIRRORLAB_HEARTBEAT_TIMEOUT='soon' is not a positive number"):
        BackendSettings.from_environ({"MIRRORLAB_CLUSTER_TOKEN": "t", "MIRRORLAB_HEARTBEAT_TIMEOUT": "soon"})
    settings = BackendSettings.from_environ({"MIRRORLAB_CLUSTER_TOKEN": "t", "MIRRORLAB_RENDEZVOUS_TIMEOUT": "2.5"})
    assert (settings.rendezvous_timeout, settings.heartbeat_timeout) == (2.5, 5.0)
    with pytest.raises(ValueError, match="MIRRORLAB_DEVICES_PER_WORKER='0' is not a positive integer"):
        devices_per_worker({"MIRRORLAB_DEVICES_PER_WORKER": "0"})
    assert devices_per_worker({"MIRRORLAB_DEVICES_PER_WORKER": "3"}) == 3


def test_the_simulator_pins_blas_threads_as_real_workers_do(monkeypatch):
    from threadpoolctl import threadpool_info

    from mirrorlab.runtime.blas import pin_blas_threads
    from mirrorlab.sim import SimCluster

    monkeypatch.setenv("MIRRORLAB_BLAS_THREADS", "2")
    SimCluster(workers=1).run(lambda: None)
    assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {2}
    monkeypatch.setenv("MIRRORLAB_BLAS_THREADS", "many")
    with pytest.raises(ValueError, match="MIRRORLAB_BLAS_THREADS='many' is not a positive integer"):
        pin_blas_threads()
    monkeypatch.delenv("MIRRORLAB_BLAS_THREADS")
    assert pin_blas_threads() == 1


def test_fingerprint_entries_come_from_their_variable_and_are_compared_by_the_rendezvous():
    from mirrorlab.backend.rendezvous import WorkerFacts, mismatch_text
    from mirrorlab.backend.settings import fingerprint

    assert fingerprint({}) == {}
    assert fingerprint({"MIRRORLAB_FINGERPRINT": '{"tensorflow": "2.21.0"}'}) == {"tensorflow": "2.21.0"}
    for bad in ('["2.21"]', '{"tensorflow": 2.21}', "{not json"):
        with pytest.raises(ValueError, match="MIRRORLAB_FINGERPRINT=.* is not a JSON object of strings. Fix: e.g."):
            fingerprint({"MIRRORLAB_FINGERPRINT": bad})
    a = WorkerFacts("0.1.0", "{}", "/job:worker/replica:0/task:0", 1, 1, {"tensorflow": "2.21.0"})
    b = WorkerFacts("0.1.0", "{}", "/job:worker/replica:0/task:1", 1, 1, {"tensorflow": "2.20.0"})
    text = mismatch_text(1, b, 0, a)
    assert text == mismatch_text(0, a, 1, b)
    assert text.startswith("Rendezvous failed: worker 1 (/job:worker/replica:0/task:1) has tensorflow='2.20.0', "
                           "worker 0 (/job:worker/replica:0/task:0) has tensorflow='2.21.0'")
    assert "Fix: give every host the same tensorflow" in text
    assert mismatch_text(0, a, 1, WorkerFacts.from_json({**b.to_json(), "fingerprint": a.fingerprint})) is None
    missing = mismatch_text(0, a, 1, WorkerFacts.from_json({k: v for k, v in b.to_json().items() if k != "fingerprint"}))
    assert "has tensorflow=None" in missing
