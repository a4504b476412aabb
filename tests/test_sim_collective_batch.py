"""Collectives computed once for all members (sim/collective_batch.py): bit for bit what the message-by-message
path computes, one shared result array for large ones, and the message-by-message path whenever not proven."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mirrorlab.tf as tf
from mirrorlab.collective.algorithm_choice import PIPELINED_RING_FROM_BYTES
from mirrorlab.collective.allreduce_gather_reduce import allreduce_gather_reduce
from mirrorlab.collective.allreduce_ring import allreduce_ring
from mirrorlab.collective.allreduce_ring_pipelined import allreduce_ring_pipelined
from mirrorlab.collective.message import Fingerprint
from mirrorlab.sim import SimCluster
from mirrorlab.sim.collective_batch import dry_run
from mirrorlab.sim.lazy_array import Filled, Leaf, NeedsData, Placeholder
from mirrorlab.sim.lazy_eval import FUSE_FROM
from mirrorlab.tensor import frozen

IMPLEMENTATIONS = tf.distribute.experimental.CommunicationImplementation


def collectives(size: int, dtype: str, implementation: str):
    """A program running an all-reduce (sum and mean), a gather, a broadcast-backed variable and a packed
    all-reduce of two tensors; it returns every result's bytes."""

    def program() -> list[bytes]:
        options = tf.distribute.experimental.CommunicationOptions(implementation=IMPLEMENTATIONS[implementation])
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        values = strategy.experimental_distribute_values_from_function(
            lambda c: (np.random.default_rng(c.replica_id_in_sync_group).standard_normal(size) * 1e3).astype(dtype))
        out = [strategy.reduce("sum", values, axis=None), strategy.reduce("mean", values, axis=None),
               strategy.gather(values, axis=0)]
        with strategy.scope():
            out.append(tf.Variable(np.arange(3, dtype=np.float32) * (strategy.extended._rank + 1)).numpy())

        def step():
            k = tf.distribute.get_replica_context().replica_id_in_sync_group
            return tf.distribute.get_replica_context().all_reduce("sum", [np.full((2, 3), k / 7), np.float32(k)])

        out += list(strategy.experimental_local_results(strategy.run(step))[0])
        return [np.ascontiguousarray(o).tobytes() for o in out]

    return program


def per_message(workers: int, devices: int, program) -> tuple[list, int]:
    """Results and message count with every message going through the network (a latency turns batching off)."""
    result = SimCluster(workers=workers, devices_per_worker=devices, latency=1e-6).run(program)
    return result.values(), result.messages


@settings(max_examples=20, deadline=None)
@given(workers=st.integers(2, 11), devices=st.integers(1, 2), size=st.integers(1, 40),
       dtype=st.sampled_from(["float32", "float64", "int32"]), implementation=st.sampled_from(["AUTO", "RING"]),
       seed=st.integers(0, 3))
def test_computed_once_is_bit_identical_to_message_by_message(workers, devices, size, dtype, implementation, seed):
    program = collectives(size, dtype, implementation)
    batched = SimCluster(workers=workers, devices_per_worker=devices, seed=seed).run(program)
    assert (batched.values(), batched.messages) == per_message(workers, devices, program)
    assert batched.virtual_time == 0.0


@pytest.mark.parametrize("workers,implementation", [(2, "RING"), (9, "AUTO"), (16, "AUTO"), (5, "RING")])
def test_large_results_are_fused_bit_identically_and_shared_by_all_workers(workers, implementation):
    size = FUSE_FROM // workers + 3  # large enough for the fused sums, odd so that chunks are uneven

    def program():
        options = tf.distribute.experimental.CommunicationOptions(implementation=IMPLEMENTATIONS[implementation])
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        values = strategy.experimental_distribute_values_from_function(
            lambda c: (np.random.default_rng(c.replica_id_in_sync_group).standard_normal(size)).astype(np.float32))
        return strategy.reduce("sum", values, axis=None)

    batched = SimCluster(workers=workers).run(program).values()
    reference, _ = per_message(workers, 1, program)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(batched, reference))
    assert all(np.shares_memory(batched[0], other) for other in batched[1:])  # one copy, not one per worker
    assert not batched[0].flags.writeable


def test_a_missing_member_still_deadlocks_with_the_same_report():
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        if strategy.cluster_resolver.task_id == 0:
            strategy.reduce("sum", tf.constant(1.0), axis=None)
        return "done"

    batched = SimCluster(workers=3).run(program)
    reference = SimCluster(workers=3, latency=1e-6).run(program)
    assert type(batched[0]) is type(reference[0])
    text = str(batched[0])
    assert "waits for worker 2 in all_reduce(SUM) float32[]" in text
    assert "worker 1 (/job:worker/replica:0/task:1): finished its program (returned)" in text


class _Inst:
    """The few attributes a dry run reads from an instance."""

    def __init__(self, rank: int, size: int) -> None:
        self.comm = SimpleNamespace(rank=rank, size=size)
        self.state, self.deadline, self.timeout = None, None, None


def test_a_dry_run_records_the_ring_and_describes_its_result():
    ops, result = dry_run(_Inst(1, 3), lambda inst: allreduce_ring(inst, np.arange(6, dtype=np.float32)))
    assert [(peer, step, is_recv) for peer, step, _, is_recv in ops] == [
        (2, 0, False), (0, 0, True), (2, 1, False), (0, 1, True),
        (2, 2, False), (0, 2, True), (2, 3, False), (0, 3, True)]
    assert all(isinstance(obj, Placeholder) for _, _, obj, is_recv in ops if is_recv)
    with pytest.raises(NeedsData):
        np.asarray(result)


def test_an_algorithm_that_needs_the_bytes_of_a_message_runs_message_by_message():
    def body(inst):
        received = inst.recv(0, step=0)
        return received if float(received.sum()) > 0 else None

    assert dry_run(_Inst(1, 2), body) is None


def _algorithms(segment_bytes: int) -> dict:
    """The algorithms ``algorithm_choice`` picks besides the ring and halving-doubling, and whether the simulator
    computes them once: gather-reduce in ring order adds into an array it allocated with NumPy, so it runs message by
    message (docs/simulator-speed.md says why); the others are batched."""
    return {"pipelined ring": (partial(allreduce_ring_pipelined, segment_bytes=segment_bytes), True),
            "gather-reduce, halving-doubling order": (partial(allreduce_gather_reduce, order="halving_doubling"), True),
            "gather-reduce, ring order": (partial(allreduce_gather_reduce, order="ring"), False)}


def _each_algorithm(dtype: str, lengths: list[int], segment_bytes: int):
    """A program running every algorithm of ``_algorithms`` on each length through ``Instance.run`` (where the
    simulator batches); it returns every result's bytes."""

    def program() -> list[bytes]:
        comm = tf.distribute.MultiWorkerMirroredStrategy().extended._group.comm
        out = []
        for length in lengths:
            x = frozen((np.random.default_rng([comm.rank, length]).standard_normal(length) * 1e4).astype(dtype))
            for name, (algorithm, _) in _algorithms(segment_bytes).items():
                inst = comm.start(Fingerprint("all_reduce", dtype, (length,), name), "test", None)
                out.append(np.asarray(inst.run(lambda i: algorithm(i, x))).tobytes())
                inst.done()
        return out

    return program


@settings(max_examples=20, deadline=None)
@given(workers=st.integers(2, 9), dtype=st.sampled_from(["float32", "float64", "int32"]),
       lengths=st.lists(st.integers(0, 700), min_size=1, max_size=3),
       segment_bytes=st.sampled_from([4, 12, 64, 1 << 20]))
def test_pipelined_ring_and_gather_reduce_batched_are_bit_identical_to_message_by_message(workers, dtype, lengths,
                                                                                          segment_bytes):
    program = _each_algorithm(dtype, lengths, segment_bytes)
    batched = SimCluster(workers=workers).run(program)
    reference = SimCluster(workers=workers, latency=1e-6).run(program)
    assert (batched.values(), batched.messages) == (reference.values(), reference.messages)
    start_up = SimCluster(workers=workers).run(_each_algorithm(dtype, [], segment_bytes)).computed_once
    batchable = sum(batch for _, batch in _algorithms(segment_bytes).values())
    assert batched.computed_once - start_up == batchable * len(lengths)
    assert reference.computed_once == 0


@pytest.mark.parametrize("workers,size,expected,computed", [
    (2, PIPELINED_RING_FROM_BYTES // 4 + 5, "pipelined_ring", 1),
    (8, PIPELINED_RING_FROM_BYTES // 4 + 5, "pipelined_ring", 1),
    (10, 4, "gather_reduce(halving_doubling order)", 1),
    (8, 4, "gather_reduce(ring order)", 1),  # its closed form: computed once too
])
def test_the_strategy_computes_the_pipelined_ring_once_on_an_instant_network(workers, size, expected, computed):
    def program(sizes):
        def run():
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            return [strategy.reduce("sum", np.arange(n, dtype=np.float32) * (strategy.extended._rank + 1), axis=None)
                    for n in sizes]
        return run

    batched = SimCluster(workers=workers).run(program([size]))
    assert {e.algorithm for e in batched.trace if e.op == "all_reduce"} == {expected}
    assert batched.computed_once - SimCluster(workers=workers).run(program([])).computed_once == computed
    reference = SimCluster(workers=workers, latency=1e-6).run(program([size])).values()
    assert [got[0].tobytes() for got in batched.values()] == [want[0].tobytes() for want in reference]
    if expected == "pipelined_ring":  # one result array, shared by every worker
        assert all(np.shares_memory(batched[0][0], other[0]) for other in batched[1:])


def test_a_dry_run_of_the_pipelined_ring_describes_what_it_writes_into_its_result():
    x = np.arange(6, dtype=np.float32)
    ops, result = dry_run(_Inst(1, 3), lambda inst: allreduce_ring_pipelined(inst, x, segment_bytes=4))
    assert [(peer, is_recv) for peer, _, _, is_recv in ops][:4] == [(2, False), (2, False), (0, True), (2, False)]
    assert isinstance(result, Filled) and result.bound is not None  # sealed: every element written
    sent = [obj for _, _, obj, is_recv in ops if not is_recv]
    assert not any(isinstance(obj, Filled) for obj in sent)  # what a slice held when sent, not the array


def test_gather_reduce_in_ring_order_adds_into_a_numpy_array_so_it_runs_message_by_message():
    assert isinstance(dry_run(_Inst(1, 2), lambda inst: allreduce_gather_reduce(inst, np.ones(4, np.float32))),
                      NeedsData)


def test_a_filled_array_is_written_once_per_element_and_read_only_where_written():
    filled = Filled(6, np.float32)
    filled[0:4] = np.arange(4, dtype=np.float32)
    with pytest.raises(NeedsData, match="already written"):
        filled[3:5] = np.zeros(2, np.float32)
    with pytest.raises(NeedsData, match="before it was written"):
        filled.seal()
    filled[5:6] = np.full(1, 9, np.float32)
    with pytest.raises(NeedsData, match="before it was written"):
        filled.seal()  # element 4 is missing
    filled[4:5] = np.full(1, 9, np.float32)
    with pytest.raises(NeedsData, match="another shape or dtype"):
        filled[0:0] = np.zeros(3, np.float32)
    with pytest.raises(NeedsData, match="not one the algorithm allocated"):
        np.add(Leaf(np.ones(2, np.float32)), np.ones(2, np.float32), out=np.empty(2, np.float32))
    filled.seal()
    from mirrorlab.sim.lazy_eval import replay
    assert replay(filled).tolist() == [0, 1, 2, 3, 9, 9]
    assert replay(filled[2:5] + np.ones(3, np.float32)).tolist() == [3, 4, 10]


def test_a_dry_run_that_needed_data_is_not_tried_again_for_the_same_algorithm_and_shapes(monkeypatch):
    import mirrorlab.sim.collective_batch as collective_batch

    tried: list[str] = []
    real = collective_batch.dry_run
    monkeypatch.setattr(collective_batch, "dry_run",
                        lambda inst, body, **kw: tried.append(inst.algorithm) or real(inst, body, **kw))

    def program():  # gather-reduce in ring order run as a bare algorithm (no closed form): its sum picks each
        # element's operands with np.take, which needs data, so it runs message by message
        comm = tf.distribute.MultiWorkerMirroredStrategy().extended._group.comm
        out = []
        for k in range(4):
            inst = comm.start(Fingerprint("all_reduce", "float32", (4,), "SUM"), "test", 60.0)
            inst.algorithm = "gather_reduce(ring order)"
            x = frozen(np.full(4, k, np.float32))
            out.append(float(inst.run(lambda i: allreduce_gather_reduce(i, x))[3]))
            inst.done()
        return out

    result = SimCluster(workers=2, seed=5).run(program)
    assert result.values() == [[0.0, 2.0, 4.0, 6.0]] * 2
    gather_reduce = [name for name in tried if name is not None and "gather" in name]
    assert len(gather_reduce) == 2, tried  # once per worker, not once per reduce


@settings(max_examples=15, deadline=None)
@given(workers=st.sampled_from([2, 3, 4, 5, 8, 9, 13, 17]), size=st.integers(0, 300),
       dtype=st.sampled_from(["float32", "float64", "int32", "float16"]),
       implementation=st.sampled_from(["AUTO", "RING"]), steps=st.integers(2, 4), seed=st.integers(0, 3))
def test_small_all_reduces_computed_from_their_closed_form_step_after_step_match_message_by_message(
        workers, size, dtype, implementation, steps, seed):
    def program() -> list[bytes]:
        options = tf.distribute.experimental.CommunicationOptions(implementation=IMPLEMENTATIONS[implementation])
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        out = []
        for step in range(steps):  # the same collectives again: the messages counted once are reused
            rng = np.random.default_rng([seed, step, strategy.extended._rank])
            x = (rng.standard_normal(size) * 10.0 ** rng.integers(-4, 5, size)).astype(dtype)
            if size and dtype.startswith("float"):
                x[rng.random(size) < 0.05] = np.nan
            out.append(strategy.reduce("sum", strategy.experimental_distribute_values_from_function(lambda c: x),
                                       axis=None))
            out += strategy.experimental_local_results(strategy.run(
                lambda: tf.distribute.get_replica_context().all_reduce("mean", [x, np.float32(step)])))[0]
        return [np.ascontiguousarray(o).tobytes() for o in out]

    batched = SimCluster(workers=workers, seed=seed).run(program)
    assert (batched.values(), batched.messages) == per_message(workers, 1, program)
    assert batched.computed_once >= 2 * steps  # every small all-reduce, from the first step on
    assert batched.virtual_time == 0.0


@settings(max_examples=10, deadline=None)
@given(workers=st.sampled_from([2, 3, 5, 8]), steps=st.integers(1, 3), seed=st.integers(0, 3))
def test_counted_messages_and_messages_sent_one_by_one_add_up_in_either_order(workers, steps, seed):
    def program() -> list[bytes]:  # counted all-reduces, then a bare gather-reduce message by message, in turn
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        comm = strategy.extended._group.comm
        out = []
        for step in range(steps):
            out += strategy.experimental_local_results(strategy.run(
                lambda: tf.distribute.get_replica_context().all_reduce("sum", np.float32(step + comm.rank))))
            inst = comm.start(Fingerprint("all_reduce", "float32", (4,), "SUM"), "test", 60.0)
            inst.algorithm = "gather_reduce(ring order)"
            x = frozen(np.full(4, comm.rank + step, np.float32))
            out.append(inst.run(lambda i: allreduce_gather_reduce(i, x)))
            inst.done()
        return [np.ascontiguousarray(o).tobytes() for o in out]

    batched = SimCluster(workers=workers, seed=seed).run(program)
    assert (batched.values(), batched.messages) == per_message(workers, 1, program)
    assert batched.computed_once >= steps
