"""The checks at strategy start-up: TF's errors keep their class and gain the coded finding; accepted but
dangerous TF_CONFIGs warn."""

from __future__ import annotations

import json
import warnings

import pytest

import mirrorlab.tf as tf
from mirrorlab.diagnostics.runtime_hook import TFConfigWarning


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
def test_accepted_dangers_warn(monkeypatch: pytest.MonkeyPatch, tf_config: dict, code: str) -> None:
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    with pytest.warns(TFConfigWarning, match=code):
        try:
            tf.distribute.MultiWorkerMirroredStrategy()
        except RuntimeError as err:  # a real cluster needs the (future) backend; the warning came first
            assert "no real multi-process backend" in str(err)


def test_clean_tf_config_does_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TFConfigWarning)
        tf.distribute.MultiWorkerMirroredStrategy()
