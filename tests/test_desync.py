"""Two different collectives never pair up silently: each carries what it is for and the user's call site."""

from __future__ import annotations

import pytest

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.collective.message import Fingerprint, Header
from mirrorlab.sim import SimCluster


def _reduce(strategy, value: float) -> float:
    return float(strategy.reduce("sum", strategy.run(lambda: tf.constant(value)), axis=None))


def _all_reduce(strategy, value: float) -> float:
    return float(strategy.reduce("mean", strategy.run(
        lambda: tf.distribute.get_replica_context().all_reduce("sum", tf.constant(value))), axis=None))


def _mismatch(result) -> errors.CollectiveMismatchError:
    root = result[result.root_cause]
    assert isinstance(root, errors.CollectiveMismatchError), result.report()
    return root


@pytest.mark.parametrize("seed", range(3))
def test_reduce_and_all_reduce_in_opposite_orders_is_a_mismatch_naming_both_sites(seed):
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended._rank == 0:
            return _reduce(strategy, 20.0), _all_reduce(strategy, 2.0)
        return _all_reduce(strategy, 2.0), _reduce(strategy, 20.0)

    text = str(_mismatch(SimCluster(workers=2, seed=seed).run(program)))
    assert "paired two different collectives" in text
    assert "reduce at test_desync.py:" in text and "all_reduce at test_desync.py:" in text
    assert "in _reduce on worker" in text and "in <lambda> on worker" in text


def test_a_reduce_only_on_the_chief_is_a_mismatch_not_a_wrong_value():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended.should_checkpoint:
            float(strategy.reduce("sum", strategy.run(lambda: tf.constant(2.0)), axis=None))
        return float(strategy.reduce("sum", strategy.run(lambda: tf.constant(3.0)), axis=None))

    result = SimCluster(workers=2).run(program)
    assert not result.ok and 8.0 not in list(result)
    text = str(_mismatch(result))
    assert "test_desync.py:" in text and "MIRRORLAB_CHECK_CALL_SITES=0" in text


def test_a_variable_created_only_on_the_chief_is_a_mismatch_naming_the_variables():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            if strategy.extended.should_checkpoint:
                tf.Variable(1.0, name="only_on_chief")
            shared = tf.Variable(7.0, name="shared")
        return float(shared.numpy())

    result = SimCluster(workers=2).run(program)
    assert 1.0 not in list(result)
    text = str(_mismatch(result))
    assert "creation of variable 'only_on_chief'" in text and "creation of variable 'shared'" in text


def test_opting_out_of_call_sites_lets_identical_code_run_from_different_lines(monkeypatch):
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended._rank == 0:
            return _reduce(strategy, 1.0)
        return float(strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None))

    assert isinstance(_mismatch(SimCluster(workers=2).run(program)), errors.CollectiveMismatchError)
    monkeypatch.setenv("MIRRORLAB_CHECK_CALL_SITES", "0")
    assert SimCluster(workers=2).run(program).values() == [2.0, 2.0]


def test_opting_out_still_compares_what_each_collective_is_for(monkeypatch):
    monkeypatch.setenv("MIRRORLAB_CHECK_CALL_SITES", "0")

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.extended._rank == 0:
            return _reduce(strategy, 2.0)
        return _all_reduce(strategy, 2.0)

    assert "paired two different collectives" in str(_mismatch(SimCluster(workers=2).run(program)))


def test_the_identity_travels_in_every_header_as_json():
    header = Header(3, Fingerprint("all_reduce", "float32", (2,), "SUM"), 1, 0, "train.py:9 in step", "reduce")
    assert Header.from_json(header.to_json()) == header
    legacy = {k: v for k, v in header.to_json().items() if k != "kind"}
    assert Header.from_json(legacy).kind == ""
