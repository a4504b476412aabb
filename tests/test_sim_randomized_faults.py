"""``Maybe``: randomized fault activation (FoundationDB's buggify). The seed alone decides which sites are enabled
and when they fire; the same seed replays the same activations, and the report says which sites fired."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlab import errors
from mirrorlab.sim import Crash, Cut, Drop, Maybe, SimCluster, Slow


def _steps(steps: int = 4) -> list[float]:
    import mirrorlab.tf as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    return [float(strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)) for _ in range(steps)]


@pytest.mark.parametrize("make, field", [
    (lambda: Maybe(Crash(0, at_step=1), enabled_probability=1.5), "enabled_probability=1.5"),
    (lambda: Maybe(Crash(0, at_step=1), fire_probability=math.nan), "fire_probability=nan"),
    (lambda: Maybe(Maybe(Crash(0, at_step=1))), "must be one fault"),
    (lambda: Maybe("Crash(0, at_step=1)"), "must be one fault"),
])
def test_bad_maybe_arguments_are_refused_at_construction(make, field):
    with pytest.raises(ValueError) as info:
        make()
    assert field in str(info.value) and "Fix:" in str(info.value)


def test_a_maybe_naming_a_worker_outside_the_cluster_is_refused():
    with pytest.raises(ValueError, match=r"worker=5 is not a worker of this 2-worker cluster"):
        SimCluster(2, faults=[Maybe(Crash(5, at_step=1))])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_same_seed_gives_the_same_activations_firings_and_results(seed):
    faults = [Maybe(Crash(1, at_step=3)), Maybe(Slow(0, seconds_per_step=1.0), 1.0, 0.5), Maybe(Cut(0, 1), 0.3)]
    first, second = (SimCluster(2, seed=seed, faults=faults).run(_steps) for _ in range(2))
    assert first.report() == second.report()
    assert first.randomized_faults == second.randomized_faults != ""
    assert [type(o) for o in first] == [type(o) for o in second] and first.virtual_time == second.virtual_time


def test_a_site_is_enabled_in_some_seeds_and_not_in_others_and_the_report_says_which():
    site = Maybe(Crash(1, at_step=2))
    reports = [SimCluster(2, seed=seed, faults=[site]).run(_steps) for seed in range(20)]
    enabled = [r for r in reports if "enabled, fired 1 time(s): worker 1 before step 2" in r.report()]
    disabled = [r for r in reports if "not enabled in this run" in r.report()]
    assert enabled and disabled and len(enabled) + len(disabled) == 20
    assert all(isinstance(r[1], errors.SimulatedCrash) for r in enabled)
    assert all(r.ok for r in disabled)
    assert enabled[0].replay.endswith(").run(test_sim_randomized_faults._steps)  # fired: "
                                      "Maybe(fault=Crash(worker=1, at_step=2)) x1")
    assert "# fired" not in disabled[0].replay
    failure = "\n".join(enabled[0][0].__notes__)  # the survivor's error names the randomized fault that fired
    assert "randomized faults (decided by the seed)" in failure and "Maybe(fault=Crash(worker=1, at_step=2))" in failure


def test_probabilities_zero_and_one_mean_never_and_always():
    assert SimCluster(2, faults=[Maybe(Crash(1, at_step=1), enabled_probability=0.0)]).run(_steps).ok
    always = SimCluster(2, faults=[Maybe(Crash(1, at_step=1), 1.0, 1.0)]).run(_steps)
    bare = SimCluster(2, faults=[Crash(1, at_step=1)]).run(_steps)
    assert [type(o) for o in always] == [type(o) for o in bare]
    assert SimCluster(2, faults=[Maybe(Crash(1, at_step=1), 1.0, 0.0)]).run(_steps).ok


def test_a_straggler_that_fires_at_some_steps_only():
    """Slow worker 0 by 1 s at each step it fires: the run's virtual time counts its firings."""
    result = SimCluster(2, seed=3, faults=[Maybe(Slow(0, seconds_per_step=1.0), 1.0, 0.5)]).run(_steps, 8)
    fired = int(result.randomized_faults.split("fired ")[1].split(" ")[0])
    assert 0 < fired < 8 and result.virtual_time == pytest.approx(fired)


def test_a_maybe_drop_names_itself_as_the_culprit_of_lost_messages():
    result = SimCluster(2, faults=[Maybe(Drop(0, 1), 1.0, 1.0)]).run(_steps)
    assert "Maybe(fault=Drop(src=0, dst=1), enabled_probability=1.0)" in result.network_losses
    assert "enabled, fired" in result.randomized_faults and "message 0 -> 1" in result.randomized_faults


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_removing_other_faults_keeps_a_sites_decision(seed):
    """What lets Hypothesis shrink a schedule: a site's enabling depends on the seed and itself only."""
    site = Maybe(Crash(1, at_step=2))
    alone = SimCluster(2, seed=seed, faults=[site]).run(_steps).randomized_faults
    among = SimCluster(2, seed=seed, faults=[Maybe(Slow(0, 1.0)), site]).run(_steps).randomized_faults
    assert alone.splitlines()[1] in among.splitlines()
