"""All-reduce algorithms chosen by size: gather-reduce and the pipelined ring give their reference algorithm's
results bit for bit over the simulator's and gRPC's transports, every worker chooses the same, and the trace
(simulator) and flight recorder format say which ran."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as tf
from mirrorlab.collective import algorithm_choice as choice
from mirrorlab.collective.algorithm_choice import choose_all_reduce
from mirrorlab.collective.allreduce_gather_reduce import ORDERS, allreduce_gather_reduce
from mirrorlab.collective.allreduce_halving_doubling import allreduce_halving_doubling
from mirrorlab.collective.allreduce_ring import allreduce_ring
from mirrorlab.collective.allreduce_ring_pipelined import allreduce_ring_pipelined, segment_bounds
from mirrorlab.collective.message import Fingerprint
from mirrorlab.communication import CommunicationImplementation as Impl
from mirrorlab.diagnostics.trace_export import export_trace_files
from mirrorlab.sim import SimCluster
from mirrorlab.tensor import frozen
from mirrorlab.trace import Trace

DTYPES = ("float32", "float64", "int32", "int64")


def _input(seed: int, rank: int, dtype: str, length: int) -> np.ndarray:
    """Values spanning magnitudes (so the summation order shows in the bits), NaN/Inf now and then."""
    rng = np.random.default_rng([seed, rank, length])
    if dtype.startswith("int"):
        return frozen(rng.integers(-2**30, 2**30, length).astype(dtype))
    x = (rng.standard_normal(length) * 10.0 ** rng.integers(-6, 7, length)).astype(dtype)
    x[rng.random(length) < 0.02] = np.nan
    x[rng.random(length) < 0.02] = np.inf
    return frozen(x)


def _algorithms(segment_bytes: int) -> dict:
    """Each algorithm, and the one whose bits it must reproduce."""
    return {"ring": (allreduce_ring, "ring"),
            "halving_doubling": (allreduce_halving_doubling, "halving_doubling"),
            "gather_reduce ring": (partial(allreduce_gather_reduce, order="ring"), "ring"),
            "gather_reduce hd": (partial(allreduce_gather_reduce, order="halving_doubling"), "halving_doubling"),
            "pipelined_ring": (partial(allreduce_ring_pipelined, segment_bytes=segment_bytes), "ring")}


def _run_all(comm, seed: int, dtype: str, lengths: list[int], segment_bytes: int) -> dict:
    out = {}
    for length in lengths:
        for name, (run, _) in _algorithms(segment_bytes).items():
            inst = comm.start(Fingerprint("all_reduce", dtype, (length,), name), "test", 60.0)
            x = _input(seed, comm.rank, dtype, length)
            out[name, length] = np.asarray(inst.run(lambda i: run(i, x))).tobytes()  # the simulator may batch it
            inst.done()
    return out


def _assert_identical(results: list[dict], lengths: list[int], segment_bytes: int) -> None:
    for length in lengths:
        for name, (_, reference) in _algorithms(segment_bytes).items():
            want = results[0][reference, length]
            for rank, got in enumerate(results):
                assert got[name, length] == want, f"{name} differs from {reference} on rank {rank}, length {length}"


@settings(max_examples=30, deadline=None)
@given(workers=st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16]), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**16), extra=st.integers(0, 3000), segment_bytes=st.sampled_from([4, 12, 64, 1 << 20]),
       latency=st.sampled_from([0.0, 1e-6]))
def test_every_algorithm_is_bit_identical_to_its_reference_over_the_simulator(workers, dtype, seed, extra,
                                                                                segment_bytes, latency):
    lengths = sorted({0, 1, max(0, workers - 1), workers + 1, extra})

    def program():
        comm = tf.distribute.MultiWorkerMirroredStrategy().extended._group.comm
        return _run_all(comm, seed, dtype, lengths, segment_bytes)

    # instant (latency 0): the simulator computes what it can once for all workers; else message by message
    _assert_identical(SimCluster(workers=workers, seed=seed, latency=latency).run(program).values(), lengths,
                      segment_bytes)


def test_every_algorithm_is_bit_identical_over_grpc(cluster_factory):
    from mirrorlab.backend.grpc_transport import GrpcTransport
    from mirrorlab.collective.communicator import Communicator

    c = cluster_factory(3)
    assert c.all(lambda r: c.rendezvous[r].wait(10)) == [None] * 3
    lengths = [0, 2, 1001, 70001]
    results = c.all(lambda r: _run_all(Communicator(r, 3, c.nodes[r].names, GrpcTransport(c.nodes[r], 0)),
                                       7, "float32", lengths, 4096))
    _assert_identical(results, lengths, 4096)


@pytest.fixture
def cluster_factory():
    from test_backend_transport import Cluster  # the in-process gRPC nodes on loopback of the transport tests
    made = []

    def make(n):
        made.append(Cluster(n))
        return made[-1]

    yield make
    for cluster in made:
        cluster.close()


@pytest.mark.parametrize("nbytes,workers,implementation,expected", [
    (4, 2, Impl.AUTO, "gather_reduce(ring order)"),
    (choice.GATHER_REDUCE_MAX_BYTES, 2, Impl.AUTO, "gather_reduce(ring order)"),
    (choice.GATHER_REDUCE_MAX_BYTES + 1, 2, Impl.AUTO, "ring"),
    (choice.GATHER_REDUCE_MAX_BYTES // 7, 8, Impl.AUTO, "gather_reduce(ring order)"),
    (choice.GATHER_REDUCE_MAX_BYTES // 7 + 1, 8, Impl.AUTO, "ring"),
    (400, 11, Impl.AUTO, "gather_reduce(halving_doubling order)"),
    (400, 11, Impl.NCCL, "gather_reduce(halving_doubling order)"),
    (400, choice.GATHER_REDUCE_UP_TO_WORKERS + 1, Impl.AUTO, "halving_doubling"),
    (choice.PIPELINED_RING_FROM_BYTES, 11, Impl.AUTO, "halving_doubling"),
    (4, 2, Impl.RING, "ring"),
    (4, 64, Impl.RING, "ring"),
    (choice.PIPELINED_RING_FROM_BYTES - 1, 4, Impl.AUTO, "ring"),
    (choice.PIPELINED_RING_FROM_BYTES, 4, Impl.AUTO, "pipelined_ring"),
    (choice.PIPELINED_RING_FROM_BYTES, 64, Impl.RING, "pipelined_ring"),
])
def test_choice_by_size_workers_and_implementation(nbytes, workers, implementation, expected):
    assert choose_all_reduce(nbytes, workers, implementation).name == expected


def test_bad_choice_input_names_the_field():
    with pytest.raises(ValueError, match="nbytes=-1"):
        choose_all_reduce(-1, 2, Impl.AUTO)
    with pytest.raises(ValueError, match="workers=0"):
        choose_all_reduce(4, 0, Impl.AUTO)
    with pytest.raises(ValueError, match="order must be one of .*'tree'"):
        allreduce_gather_reduce(None, np.zeros(2), order="tree")


@given(start=st.integers(0, 100), length=st.integers(0, 300), itemsize=st.sampled_from([1, 2, 4, 8]),
       segment_bytes=st.integers(1, 100))
def test_segments_cover_the_chunk_in_order_within_the_bound(start, length, itemsize, segment_bytes):
    pieces = segment_bounds(start, start + length, itemsize, segment_bytes)
    assert pieces[0][0] == start and pieces[-1][1] == start + length
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    assert all(0 < (b - a) * itemsize <= max(segment_bytes, itemsize) for a, b in pieces) or length == 0


def _traced_run(workers: int, size: int, implementation: str = "AUTO") -> Trace:
    def program():
        options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        value = np.full(size, strategy.extended._rank + 1.0, np.float32)
        return strategy.experimental_local_results(
            strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("sum", value)))

    result = SimCluster(workers=workers, devices_per_worker=2, seed=4).run(program)
    expected = np.full(size, 2.0 * sum(range(1, workers + 1)), np.float32)
    for local in result.values():
        for got in local:
            np.testing.assert_array_equal(got, expected)
    return result.trace


@pytest.mark.parametrize("workers,size,implementation,expected", [
    (3, 4, "AUTO", "gather_reduce(ring order)"),
    (3, 4, "RING", "ring"),
    (2, (choice.PIPELINED_RING_FROM_BYTES // 4), "AUTO", "pipelined_ring"),
    (10, 4, "AUTO", "gather_reduce(halving_doubling order)"),
    (10, 20000, "AUTO", "halving_doubling"),
])
def test_every_replica_of_every_worker_records_the_same_choice_in_the_trace(workers, size, implementation, expected):
    trace = _traced_run(workers, size, implementation)
    reduces = [e for e in trace if e.op == "all_reduce"]
    assert len(reduces) == workers * 2
    assert {e.algorithm for e in reduces} == {expected}
    assert {e.algorithm for e in trace if e.op != "all_reduce"} == {None}  # other collectives: no such field
    loaded = Trace.from_jsonl(trace.to_jsonl())
    assert [e.algorithm for e in loaded if e.op == "all_reduce"] == [expected] * (workers * 2)


def test_the_algorithm_reaches_the_timeline_export_and_single_workers_record_none(tmp_path):
    path = tmp_path / "run.jsonl"
    _traced_run(2, 4).save(path)
    document = export_trace_files([path]).document
    spans = [e for e in document["traceEvents"] if e.get("ph") == "X" and e["args"]["op"] == "all_reduce"]
    assert spans and {s["args"]["algorithm"] for s in spans} == {"gather_reduce(ring order)"}
    single = _traced_run(1, 4)
    assert all('"algorithm"' not in e.to_json() for e in single)


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_an_order_total_keeps_no_input_alive_after_it_returns(order):
    """Freed by reference counting alone (no reference cycle): a simulated all-reduce over many ranks of large
    inputs must not hold them until the next garbage collection."""
    import gc
    import weakref

    arrays = [np.full(5, k, np.float32) for k in range(7)]
    refs = [weakref.ref(a) for a in arrays]
    enabled = gc.isenabled()
    gc.disable()
    try:
        total = ORDERS[order](arrays)
        del arrays
        assert [r() for r in refs] == [None] * 7
    finally:
        if enabled:
            gc.enable()
    assert total.shape == (5,)
