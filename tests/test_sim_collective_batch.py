"""Collectives computed once for all members (sim/collective_batch.py): bit for bit what the message-by-message
path computes, one shared result array for large ones, and the message-by-message path whenever not proven."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mirrorlab.tf as tf
from mirrorlab.collective.allreduce_ring import allreduce_ring
from mirrorlab.sim import SimCluster
from mirrorlab.sim.collective_batch import dry_run
from mirrorlab.sim.lazy_array import NeedsData, Placeholder
from mirrorlab.sim.lazy_eval import FUSE_FROM

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
