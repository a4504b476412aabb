"""Property tests of TF 2.21's cross-replica semantics on random simulated clusters: reduce, ON_READ and
ON_WRITE variables, gather/all_gather and replica ids, against NumPy references built outside the cluster."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.sim import SimCluster

MAX_REPLICAS = 4 * 3

workers_st = st.integers(1, 4)
devices_st = st.integers(1, 3)
seed_st = st.integers(0, 2**16)
# Per-replica sizes of the first (or gathered) dimension: uneven, and 0 for empty replicas.
rows_st = st.lists(st.integers(0, 4), min_size=MAX_REPLICAS, max_size=MAX_REPLICAS)
tail_st = st.lists(st.integers(1, 3), max_size=2).map(tuple)
NO_ROWS = [0] * MAX_REPLICAS

AGGREGATIONS = ["SUM", "MEAN", "ONLY_FIRST_REPLICA", "NONE"]


def block(seed: int, replica: int, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 value replica ``replica`` contributes (reproducible outside the cluster)."""
    return np.random.default_rng([seed, replica]).standard_normal(shape).astype(np.float32)


def rank_from_tf_config() -> int:
    """This worker's rank in the collective group, from TF_CONFIG alone: the chief first, then the workers."""
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    if task["type"] == "chief":
        return 0
    return task["index"] + (1 if "chief" in config["cluster"] else 0)


def local_values(strategy: ml.Strategy, value) -> list[np.ndarray]:
    return [np.asarray(v) for v in strategy.experimental_local_results(value)]


# -- a. strategy.reduce -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(workers=workers_st, devices=devices_st, rows=rows_st, tail=tail_st, seed=seed_st, sim_seed=seed_st)
@example(workers=2, devices=2, rows=NO_ROWS, tail=(3,), seed=0, sim_seed=0)
@example(workers=1, devices=1, rows=NO_ROWS, tail=(), seed=0, sim_seed=0)
def test_reduce_along_axis0_is_the_global_mean_and_sum_of_all_examples(workers, devices, rows, tail, seed, sim_seed):
    """reduce(MEAN/SUM, axis=0) of uneven or empty per-replica batches equals mean/sum of their concatenation."""
    n = workers * devices

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        x = strategy.experimental_distribute_values_from_function(
            lambda ctx: block(seed, ctx.replica_id_in_sync_group, (rows[ctx.replica_id_in_sync_group], *tail)))
        return strategy.reduce("mean", x, axis=0), strategy.reduce("sum", x, axis=0)

    everything = np.concatenate([block(seed, r, (rows[r], *tail)) for r in range(n)], axis=0).astype(np.float64)
    expected_sum = everything.sum(axis=0)
    expected_mean = everything.sum(axis=0) / everything.shape[0] if everything.shape[0] else np.full(tail, np.nan)
    results = SimCluster(workers=workers, devices_per_worker=devices, seed=sim_seed).run(program).values()
    for mean, total in results:
        assert mean.dtype == np.float32 and total.dtype == np.float32
        assert mean.shape == tail and total.shape == tail
        if everything.shape[0] == 0:
            assert np.all(np.isnan(mean)), mean
            np.testing.assert_array_equal(total, np.zeros(tail, np.float32))
        else:
            np.testing.assert_allclose(mean, expected_mean, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(total, expected_sum, rtol=1e-5, atol=1e-5)
    for mean, total in results[1:]:  # every worker gets the same bits
        np.testing.assert_array_equal(mean, results[0][0])
        np.testing.assert_array_equal(total, results[0][1])


@settings(max_examples=60, deadline=None)
@given(workers=workers_st, devices=devices_st, tail=tail_st, seed=seed_st, sim_seed=seed_st)
def test_reduce_without_axis_is_elementwise_over_replicas(workers, devices, tail, seed, sim_seed):
    """reduce(SUM, axis=None) adds the replicas' equal-shaped values element-wise; MEAN divides by the replica count."""
    n = workers * devices

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        x = strategy.experimental_distribute_values_from_function(
            lambda ctx: block(seed, ctx.replica_id_in_sync_group, tail))
        return strategy.reduce("sum", x, axis=None), strategy.reduce("mean", x, axis=None)

    stacked = np.stack([block(seed, r, tail) for r in range(n)]).astype(np.float64)
    for total, mean in SimCluster(workers=workers, devices_per_worker=devices, seed=sim_seed).run(program).values():
        assert total.dtype == mean.dtype == np.float32
        assert total.shape == mean.shape == tail
        np.testing.assert_allclose(total, stacked.sum(axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(mean, stacked.sum(axis=0) / n, rtol=1e-5, atol=1e-5)


# -- b. SyncOnReadVariable ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(workers=workers_st, devices=devices_st, tail=tail_st, seed=seed_st, sim_seed=seed_st,
       aggregation=st.sampled_from(AGGREGATIONS))
def test_on_read_variable_cross_replica_read_aggregates_the_local_copies(workers, devices, tail, seed, sim_seed,
                                                                         aggregation):
    """An ON_READ variable read in cross-replica context sums/averages all replicas' copies, takes the worker's
    first copy for ONLY_FIRST_REPLICA, and raises ValueError for NONE."""
    n = workers * devices

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = ml.Variable(np.zeros(tail, np.float32), synchronization=ml.VariableSynchronization.ON_READ,
                            aggregation=ml.VariableAggregation[aggregation])
        strategy.run(lambda: v.assign(block(seed, ml.get_replica_context().replica_id_in_sync_group, tail)))
        copies = local_values(strategy, v)
        if aggregation == "NONE":
            with pytest.raises(ValueError):
                v.numpy()
            with pytest.raises(ValueError):
                v.read_value()
            return rank_from_tf_config(), copies, None, None
        return rank_from_tf_config(), copies, v.numpy(), np.asarray(v.read_value())

    values = [block(seed, r, tail).astype(np.float64) for r in range(n)]
    expected = {"SUM": np.sum(values, axis=0), "MEAN": np.mean(values, axis=0)}
    results = SimCluster(workers=workers, devices_per_worker=devices, seed=sim_seed).run(program).values()
    for rank, copies, numpy_read, read_value in results:
        # each replica's assign wrote only its own copy
        for k, copy in enumerate(copies):
            np.testing.assert_array_equal(copy, block(seed, rank * devices + k, tail))
        if aggregation == "NONE":
            continue
        want = expected.get(aggregation, values[rank * devices])  # ONLY_FIRST_REPLICA: this worker's replica 0
        for got in (numpy_read, read_value):
            assert got.dtype == np.float32 and got.shape == tail
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if aggregation == "ONLY_FIRST_REPLICA" and workers > 1:
        firsts = {np.asarray(r[2]).tobytes() for r in results}
        assert len(firsts) == workers  # each worker reads its own first replica, as in TF


# -- c. MirroredVariable updated in replica context ------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(workers=workers_st, devices=devices_st, tail=tail_st, seed=seed_st, sim_seed=seed_st,
       aggregation=st.sampled_from(AGGREGATIONS), steps=st.integers(1, 2))
def test_mirrored_variable_replica_assign_add_follows_the_aggregation(workers, devices, tail, seed, sim_seed,
                                                                      aggregation, steps):
    """Replica-context assign_add on an ON_WRITE variable adds the SUM/MEAN over all replicas to every copy, the
    worker's first replica's delta for ONLY_FIRST_REPLICA, and only the replica's own delta for NONE."""
    n = workers * devices

    def delta(step: int, replica: int) -> np.ndarray:
        return block(seed, 1000 * (step + 1) + replica, tail)

    initial = block(seed, 10**6, tail)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = ml.Variable(initial, aggregation=ml.VariableAggregation[aggregation])
        assert isinstance(v, ml.MirroredVariable)
        for step in range(steps):
            strategy.run(lambda step=step: v.assign_add(delta(step, ml.get_replica_context().replica_id_in_sync_group)))
        return rank_from_tf_config(), local_values(strategy, v)

    # TF's semantics, copies that differ under NONE included (the check of mirrored copies would refuse them)
    results = SimCluster(workers=workers, devices_per_worker=devices, seed=sim_seed,
                         check_mirrors=False).run(program).values()
    assert len(results) == workers
    for rank, copies in results:
        assert len(copies) == devices
        for k, copy in enumerate(copies):
            want = initial.astype(np.float64)
            for step in range(steps):
                deltas = [delta(step, r).astype(np.float64) for r in range(n)]
                want = want + {"SUM": np.sum(deltas, axis=0), "MEAN": np.mean(deltas, axis=0),
                               "ONLY_FIRST_REPLICA": deltas[rank * devices],
                               "NONE": deltas[rank * devices + k]}[aggregation]
            assert copy.dtype == np.float32 and copy.shape == tail
            np.testing.assert_allclose(copy, want, rtol=1e-5, atol=1e-5)
    if aggregation in ("SUM", "MEAN"):
        for _, copies in results:
            for copy in copies:
                np.testing.assert_array_equal(copy, results[0][1][0])  # all copies everywhere identical


# -- d. gather / all_gather -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(workers=workers_st, devices=devices_st, sizes=rows_st, other=st.integers(0, 3), axis=st.sampled_from([0, 1]),
       seed=seed_st, sim_seed=seed_st)
@example(workers=3, devices=2, sizes=NO_ROWS, other=2, axis=0, seed=0, sim_seed=0)
@example(workers=3, devices=2, sizes=NO_ROWS, other=2, axis=1, seed=0, sim_seed=0)
@example(workers=2, devices=1, sizes=NO_ROWS, other=0, axis=1, seed=0, sim_seed=0)
def test_gather_and_all_gather_concatenate_uneven_blocks_in_replica_order(workers, devices, sizes, other, axis, seed,
                                                                          sim_seed):
    """strategy.gather and ReplicaContext.all_gather along axis 0 or 1 equal np.concatenate in replica-id order,
    also when some or all blocks are empty."""
    n = workers * devices

    def shape(replica: int) -> tuple[int, int]:
        return (sizes[replica], other) if axis == 0 else (other, sizes[replica])

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        x = strategy.experimental_distribute_values_from_function(
            lambda ctx: block(seed, ctx.replica_id_in_sync_group, shape(ctx.replica_id_in_sync_group)))
        gathered = strategy.gather(x, axis=axis)
        in_replicas = strategy.run(lambda v: ml.get_replica_context().all_gather(v, axis=axis), args=(x,))
        return np.asarray(gathered), local_values(strategy, in_replicas)

    expected = np.concatenate([block(seed, r, shape(r)) for r in range(n)], axis=axis)
    for gathered, per_replica in SimCluster(workers=workers, devices_per_worker=devices, seed=sim_seed).run(
            program).values():
        assert len(per_replica) == devices
        for got in (gathered, *per_replica):
            assert got.dtype == np.float32
            assert got.shape == expected.shape
            np.testing.assert_array_equal(got, expected)


# -- e. replica ids --------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(workers=workers_st, devices=devices_st, chief=st.booleans(), sim_seed=seed_st)
def test_replica_ids_are_rank_times_devices_plus_local_index(workers, devices, chief, sim_seed):
    """replica_id_in_sync_group (in run and in ValueContext) is worker_rank * devices_per_worker + local index."""

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        in_run = strategy.run(lambda: ml.get_replica_context().replica_id_in_sync_group)
        counts = strategy.run(lambda: ml.get_replica_context().num_replicas_in_sync)
        from_fn = strategy.experimental_distribute_values_from_function(
            lambda ctx: (ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync))
        return (rank_from_tf_config(), [int(i) for i in strategy.experimental_local_results(in_run)],
                [int(c) for c in strategy.experimental_local_results(counts)],
                [tuple(p) for p in zip(*(strategy.experimental_local_results(v) for v in from_fn))])

    n = workers * devices
    results = SimCluster(workers=workers, devices_per_worker=devices, chief=chief, seed=sim_seed).run(
        program).values()
    assert sorted(rank for rank, *_ in results) == list(range(workers))
    all_ids = []
    for rank, in_run, counts, from_fn in results:
        expected = [rank * devices + k for k in range(devices)]
        assert in_run == expected
        assert set(counts) == {n}  # identical per-replica results may come back as one plain value
        assert from_fn == [(i, n) for i in expected]
        all_ids += in_run
    assert sorted(all_ids) == list(range(n))


@pytest.mark.parametrize("args, kwargs", [((), None), ([], {}), ("pr", None), ((), "pr"), ("pr", "pr")])
def test_run_hands_each_replica_its_own_args_and_kwargs_and_nothing_when_none_are_given(args, kwargs):
    """``run`` passes replica k its component of PerReplica args and kwargs (nested too), and no arguments at all
    for empty or missing ones."""

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        per_replica = strategy.experimental_distribute_values_from_function(
            lambda ctx: [int(ctx.replica_id_in_sync_group)])
        call_args = (per_replica, {"n": per_replica}) if args == "pr" else args
        call_kwargs = {"x": per_replica, "y": [per_replica]} if kwargs == "pr" else kwargs
        seen = strategy.run(lambda *a, **kw: (ml.get_replica_context().replica_id_in_sync_group, repr((a, kw))),
                            args=call_args, kwargs=call_kwargs)
        return [(int(k), got) for k, got in strategy.experimental_local_results(seen)]

    results = SimCluster(workers=1, devices_per_worker=3).run(program).values()[0]
    assert [k for k, _ in results] == [0, 1, 2]
    for k, got in results:
        expected_args = ([k], {"n": [k]}) if args == "pr" else ()
        assert got == repr((expected_args, {"x": [k], "y": [[k]]} if kwargs == "pr" else {}))
