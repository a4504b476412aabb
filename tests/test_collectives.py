"""The collective algorithms over the simulated transport: exact values, uneven blocks, packing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.collective.allreduce_ring import chunk_bounds
from mirrorlab.collective.packing import group_by_size
from mirrorlab.sim import SimCluster


def ring_order_sum(inputs: list[np.ndarray]) -> np.ndarray:
    """Chunk c summed left to right starting at rank c, the ring's fixed order."""
    n = len(inputs)
    out = np.empty_like(inputs[0])
    for c, (a, b) in enumerate(chunk_bounds(inputs[0].size, n)):
        acc = inputs[c][a:b]
        for i in range(1, n):
            acc = acc + inputs[(c + i) % n][a:b]
        out[a:b] = acc
    return out


def _worker_values(length: int, seed: int, dtype: str):
    def value(rank: int) -> np.ndarray:
        rng = np.random.default_rng([seed, rank])
        if dtype == "int64":
            return rng.integers(-1000, 1000, length)
        return (rng.standard_normal(length) * 10.0 ** rng.integers(-3, 4, length)).astype(dtype)
    return value


@settings(max_examples=40, deadline=None)
@given(workers=st.integers(1, 6), length=st.integers(0, 40), seed=st.integers(0, 2**16),
       sim_seed=st.integers(0, 2**16), dtype=st.sampled_from(["float32", "float64", "int64"]))
def test_ring_all_reduce_equals_fixed_order_sum(workers, length, seed, sim_seed, dtype):
    value = _worker_values(length, seed, dtype)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        rank = strategy.extended._rank
        return strategy.run(lambda: ml.get_replica_context().all_reduce("sum", value(rank)))

    results = SimCluster(workers=workers, seed=sim_seed).run(program).values()
    expected = ring_order_sum([value(r) for r in range(workers)])
    for got in results:
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)  # bit-identical, not approximately equal
    if dtype != "int64" and length:
        np.testing.assert_allclose(results[0], np.sum([value(r) for r in range(workers)], axis=0),
                                   rtol=1e-4, atol=1e-3 * max(1.0, np.abs(results[0]).max()))


@settings(max_examples=25, deadline=None)
@given(workers=st.integers(1, 5), devices=st.integers(1, 3), seed=st.integers(0, 1000),
       rows=st.lists(st.integers(0, 4), min_size=15, max_size=15))
def test_all_gather_uneven_rows_in_replica_order(workers, devices, seed, rows):
    def block(replica: int) -> np.ndarray:
        return np.full((rows[replica], 2), replica, dtype=np.int32)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        values = strategy.experimental_distribute_values_from_function(lambda c: block(c.replica_id_in_sync_group))
        return strategy.gather(values, axis=0)

    n = workers * devices
    expected = np.concatenate([block(r) for r in range(n)], axis=0)
    for got in SimCluster(workers=workers, devices_per_worker=devices, seed=seed).run(program).values():
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("workers", [1, 2, 3, 5, 8])
def test_variable_creation_broadcasts_the_chiefs_value(workers):
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        rank = strategy.extended._rank
        with strategy.scope():
            v = ml.Variable(np.arange(3, dtype=np.float32) + 10 * rank)
        return v.numpy()

    for got in SimCluster(workers=workers, seed=3).run(program).values():
        np.testing.assert_array_equal(got, [0.0, 1.0, 2.0])


def test_bytes_per_pack_packs_like_tensorflow():
    arrays = [np.zeros(n, np.float32) for n in (10, 10, 10, 1, 1)]  # 40, 40, 40, 4, 4 bytes
    assert group_by_size(arrays, 0) == [[4, 3, 2, 1, 0]]
    # A pack closes once it holds strictly more than bytes_per_pack: reversed order 4,4,40 | 40,40.
    assert group_by_size(arrays, 40) == [[4, 3, 2], [1, 0]]
    assert group_by_size(arrays, 8) == [[4, 3, 2], [1], [0]]
    assert group_by_size([], 8) == []


@settings(max_examples=15, deadline=None)
@given(bytes_per_pack=st.sampled_from([0, 4, 16, 64, 1024]), seed=st.integers(0, 100))
def test_packing_does_not_change_integer_results(bytes_per_pack, seed):
    shapes = [(3,), (2, 2), (), (5,)]

    def program():
        options = ml.CommunicationOptions(bytes_per_pack=bytes_per_pack)
        strategy = ml.MultiWorkerMirroredStrategy(communication_options=options)
        rank = strategy.extended._rank
        values = tuple(np.full(s, rank + i, np.int64) for i, s in enumerate(shapes))
        return strategy.run(lambda: ml.get_replica_context().all_reduce("sum", values))

    for got in SimCluster(workers=3, seed=seed).run(program).values():
        for i, (s, g) in enumerate(zip(shapes, got)):
            np.testing.assert_array_equal(g, np.full(s, 3 * i + 3))


def test_results_are_read_only_like_tensors():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        return strategy.run(lambda: ml.get_replica_context().all_reduce("sum", np.ones(3)))

    got = SimCluster(workers=2).run(program).values()[0]
    with pytest.raises(ValueError, match="read-only"):
        got[0] = 5


@settings(max_examples=40, deadline=None)
@given(workers=st.integers(1, 13), length=st.integers(0, 40), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(["float32", "int64"]))
def test_halving_doubling_all_reduce_is_exact_and_identical_everywhere(workers, length, seed, dtype):
    value = _worker_values(length, seed, dtype)

    def program():
        strategy = ml.MultiWorkerMirroredStrategy(communication_options=ml.CommunicationOptions(
            implementation="AUTO"))
        rank = strategy.extended._rank
        return strategy.run(lambda: ml.get_replica_context().all_reduce("sum", value(rank)))

    results = SimCluster(workers=workers, seed=seed).run(program).values()
    expected = np.sum([value(r) for r in range(workers)], axis=0, dtype=np.float64)
    for got in results:
        np.testing.assert_array_equal(got, results[0])  # bit-identical on every worker
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-3 * max(1.0, np.abs(expected).max(initial=0)))


def test_ring_is_forced_by_the_implementation_option():
    value = _worker_values(33, 7, "float32")

    def program(implementation):
        options = ml.CommunicationOptions(implementation=implementation)
        strategy = ml.MultiWorkerMirroredStrategy(communication_options=options)
        rank = strategy.extended._rank
        return strategy.run(lambda: ml.get_replica_context().all_reduce("sum", value(rank)))

    ring = SimCluster(workers=11).run(program, "RING").values()[0]
    np.testing.assert_array_equal(ring, ring_order_sum([value(r) for r in range(11)]))
    auto = SimCluster(workers=11).run(program, "AUTO")
    forced = SimCluster(workers=11).run(program, "RING")
    assert auto.messages < forced.messages  # halving/doubling: far fewer rounds than the ring
