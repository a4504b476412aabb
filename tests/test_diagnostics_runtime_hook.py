"""The checks at strategy start-up: TF's errors keep their class and gain the coded finding; accepted but
dangerous TF_CONFIGs warn."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import mirrorlab.tf as tf
from mirrorlab.backend.environment import BackendEnvironment
from test_diagnostics_properties import json_paths, mutate, valid_tf_configs
from mirrorlab.diagnostics.runtime_hook import TFConfigWarning


class ReachedBackend(Exception):
    """The strategy accepted the TF_CONFIG and asked the real backend for the cluster (stopped there: no network)."""


@pytest.fixture
def stop_at_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    def cluster_runtime(*args: object, **kwargs: object) -> None:
        raise ReachedBackend()
    monkeypatch.setattr(BackendEnvironment, "cluster_runtime", cluster_runtime)


@pytest.mark.parametrize("tf_config, error, code", [
    ('{"cluster": {"worker": ["h0:2222"]}, "task": null}', TypeError, "ML-CFG-002"),
    ('{"cluster": {"worker": ["h0:2222"]}, "task": {"type": "worker", "index": "zero"}}', ValueError, "ML-CFG-009"),
    ('{"cluster": {"worker": ["h0:2222"]}, "task": {"type": "worker", "index": 2}}', ValueError, "ML-CFG-010"),
    ('{"cluster": {"worker": ["h0:2222"]}, "task": {"type": "Worker", "index": 0}}', ValueError, "ML-CFG-008"),
    ('{"cluster": {"worker": ["h0:2222"]}', json.JSONDecodeError, "ML-CFG-001"),
    ('{"cluster": {"worker": "h0:2222"}, "task": {"type": "worker", "index": 0}}', TypeError, "ML-CFG-002"),
])
def test_errors_carry_the_coded_finding(monkeypatch: pytest.MonkeyPatch, tf_config: str, error: type,
                                        code: str) -> None:
    monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(error) as raised:
        tf.distribute.MultiWorkerMirroredStrategy()
    assert type(raised.value) is error
    assert code in str(raised.value) and "Fix:" in str(raised.value)


@pytest.mark.parametrize("tf_config, code", [
    ({"clsuter": {"worker": ["h0:2222", "h1:2222"]}, "task": {"type": "worker", "index": 0}}, "ML-CFG-004"),
    ({"cluster": {"worker": ["localhost:2222", "h1:2222"]}, "task": {"type": "worker", "index": 0}}, "ML-CFG-028"),
])
def test_accepted_dangers_warn(monkeypatch: pytest.MonkeyPatch, tf_config: dict, code: str,
                               stop_at_backend: None) -> None:
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    with pytest.warns(TFConfigWarning, match=code):
        try:
            tf.distribute.MultiWorkerMirroredStrategy()
        except ReachedBackend:  # a multi-worker TF_CONFIG reaches the real backend; the warning came first
            pass


def test_clean_tf_config_does_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TFConfigWarning)
        tf.distribute.MultiWorkerMirroredStrategy()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(valid_tf_configs(), st.data())
def test_mutated_tf_config_errors_always_carry_a_code(monkeypatch: pytest.MonkeyPatch, stop_at_backend: None,
                                                      config: dict, data: st.DataObject) -> None:
    """The issue's 2,000-mutation experiment: no raw builtin error without its coded finding."""
    for _ in range(data.draw(st.integers(1, 3))):
        if isinstance(config, (dict, list)) and json_paths(config)[1:]:
            config = mutate(config, data)
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TFConfigWarning)
        try:
            tf.distribute.MultiWorkerMirroredStrategy()
        except ReachedBackend:  # the config passed every check
            pass
        except (ValueError, TypeError, KeyError) as err:
            assert "ML-CFG-" in str(err), (config, err)


def test_sparse_worker_index_error_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": {"3": "h3:2222"}},
                                                "task": {"type": "worker", "index": 3}}))
    with pytest.raises(ValueError, match="exceeds the maximum id(.|\n)*ML-CFG-018"):
        tf.distribute.MultiWorkerMirroredStrategy()
