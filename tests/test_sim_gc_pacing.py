"""A simulated run collects its young generation less often (``sim/gc_pacing.py``) and puts the caller's garbage
collection thresholds back when it ends, whether it succeeds or fails."""

from __future__ import annotations

import gc

import pytest

from mirrorlab.sim import SimCluster
from mirrorlab.sim.gc_pacing import YOUNG_THRESHOLD


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_a_run_raises_the_young_threshold_and_restores_the_callers(thresholds):
    gc.set_threshold(700, 11, 12)
    seen = SimCluster(2, seed=0).run(gc.get_threshold).values()
    assert seen == [(YOUNG_THRESHOLD, 11, 12)] * 2
    assert gc.get_threshold() == (700, 11, 12)


def test_a_failed_run_restores_them_too_and_automatic_collection_stays_off(thresholds):
    def program():
        raise ValueError(str(gc.get_threshold()))

    gc.set_threshold(0, 10, 10)
    result = SimCluster(2, seed=0).run(program)
    assert "(0, 10, 10)" in str(result.errors[0])
    assert gc.get_threshold() == (0, 10, 10)


def test_a_higher_threshold_of_the_caller_is_kept(thresholds):
    gc.set_threshold(50_000, 10, 10)
    assert SimCluster(2, seed=0).run(gc.get_threshold).values() == [(50_000, 10, 10)] * 2
