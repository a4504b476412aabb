"""``@batch_safe`` replica functions (mirrorlab/distribute/batch_safe.py): run stacked by ``strategy.run``, with the
results and trace of one call per replica."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mirrorlab.tf as ml
from mirrorlab.distribute.batch_safe import batch_safe, is_batch_safe
from mirrorlab.sim import SimCluster


def training_program(safe, per_replica, features, steps, uneven):
    """A few steps of a hand-written linear-ReLU layer trained by SGD: products, an all-reduce of the weight
    gradient, a merge_call update; returns the weights, outputs and replica ids as bytes. ``uneven``: odd replicas
    get one more example (their batches differ in shape, so the function runs per replica)."""
    strategy = ml.MultiWorkerMirroredStrategy()
    n = strategy.num_replicas_in_sync
    rng = np.random.default_rng(features)
    x = rng.standard_normal((n * (per_replica + 1), features)).astype(np.float32)
    with strategy.scope():
        w = ml.Variable(rng.standard_normal((features, 3)).astype(np.float32))

    def step(xb):
        ctx = ml.distribute.get_replica_context()
        h = np.maximum(xb @ w.numpy(), np.float32(0))
        grad = ctx.all_reduce("SUM", np.matmul(np.swapaxes(xb, -1, -2), h))
        ctx.merge_call(lambda strategy, g: w.assign_sub(strategy.experimental_local_results(g)[0] * np.float32(0.01)),
                       args=(grad,))
        return h, ctx.replica_id_in_sync_group

    def share(c):
        first = c.replica_id_in_sync_group * (per_replica + 1)
        return x[first:first + per_replica + (c.replica_id_in_sync_group % 2 if uneven else 0)]

    fn = batch_safe(step) if safe else step
    xs = strategy.experimental_distribute_values_from_function(share)
    outputs = []
    for _ in range(steps):
        out, ids = strategy.run(fn, args=(xs,))
        outputs += [np.asarray(v).tobytes() for v in strategy.experimental_local_results(out)]
        outputs += [repr(v) for v in strategy.experimental_local_results(ids)]
    return w.numpy().tobytes(), outputs


@settings(max_examples=25, deadline=None)
@given(shape=st.sampled_from([(1, 2), (1, 4), (2, 2), (2, 3), (3, 1)]), per_replica=st.integers(0, 6),
       features=st.integers(1, 9), steps=st.integers(1, 3), uneven=st.booleans())
def test_batch_safe_functions_give_the_results_and_trace_of_per_replica_calls(shape, per_replica, features, steps,
                                                                              uneven):
    args = (per_replica, features, steps, uneven)
    runs = [SimCluster(*shape, trace_values=True).run(training_program, safe, *args) for safe in (True, False)]
    assert runs[0].values() == runs[1].values()
    assert runs[0].trace.to_jsonl() == runs[1].trace.to_jsonl()


def shapes_seen(uneven):
    """The input shapes a batch-safe function is called with on each worker (one call, stacked, or one per replica)."""
    strategy = ml.MultiWorkerMirroredStrategy()
    xs = strategy.experimental_distribute_values_from_function(
        lambda c: np.ones((2 + (c.replica_id_in_sync_group % 2 if uneven else 0), 3), np.float32))
    seen = []

    @batch_safe
    def fn(xb):
        seen.append(xb.shape)
        return xb
    strategy.run(fn, args=(xs,))
    return seen


def test_equal_replica_batches_stack_and_uneven_ones_run_per_replica():
    assert SimCluster(1, 4).run(shapes_seen, False).values() == [[(4, 2, 3)]]
    assert sorted(SimCluster(1, 4).run(shapes_seen, True).values()[0]) == [(2, 3), (2, 3), (3, 3), (3, 3)]
    assert SimCluster(2, 1).run(shapes_seen, False).values() == [[(2, 3)]] * 2  # one local replica: nothing to stack


def unsupported(what):
    strategy = ml.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        v = ml.Variable(np.zeros(2, np.float32))
    xs = strategy.experimental_distribute_values_from_function(lambda c: np.ones((2, 2), np.float32))

    @batch_safe
    def fn(xb):
        ctx = ml.distribute.get_replica_context()
        if what == "all_gather":
            return ctx.all_gather(xb, axis=0)
        if what == "unstacked all_reduce":
            return ctx.all_reduce("SUM", np.ones(3, np.float32))
        if what == "variable creation":
            return ml.Variable(xb)
        return v.assign_add(np.ones(2, np.float32))
    return strategy.run(fn, args=(xs,))


@pytest.mark.parametrize("what, error, words", [
    ("all_gather", NotImplementedError, "all_gather is not supported"),
    ("unstacked all_reduce", ValueError, "first axis"),
    ("variable creation", NotImplementedError, "needs the replicas to meet"),
    ("variable update", NotImplementedError, "in replica context is not supported")])
def test_what_a_stacked_function_cannot_do_raises_with_the_fix(what, error, words):
    with pytest.raises(error, match=words) as caught:
        unsupported(what)
    assert "Fix:" in str(caught.value)


def test_batch_safe_marks_functions_only():
    def fn(x):
        return x
    assert not is_batch_safe(fn) and batch_safe(fn) is fn and is_batch_safe(fn)
    with pytest.raises(TypeError, match="takes a function"):
        batch_safe(3)


def test_a_stacked_function_writing_into_its_input_writes_where_each_replica_would():
    """Inputs sliced one after the other from one batch are stacked as a view: an in-place write lands in the
    caller's batch exactly as the per-replica calls' writes do; slices apart in memory are stacked as a copy, which
    the write does not reach the batch through (as documented in docs/strategy.md)."""
    def program(safe, gap):
        strategy = ml.MultiWorkerMirroredStrategy()
        batch = np.arange(24, dtype=np.float32).reshape(8, 3)
        xs = strategy.experimental_distribute_values_from_function(
            lambda c: batch[c.replica_id_in_sync_group * (2 + gap):c.replica_id_in_sync_group * (2 + gap) + 2])

        def step(x):
            x *= np.float32(-1)
            return x.sum()

        strategy.run(batch_safe(step) if safe else step, args=(xs,))
        return batch

    per_replica, stacked = (SimCluster(1, 2).run(program, safe, 0).values()[0] for safe in (False, True))
    assert stacked.tobytes() == per_replica.tobytes() and (per_replica[:4] < 0).sum() == 11  # (0 stays 0)
    apart = SimCluster(1, 2).run(program, True, 2).values()[0]  # slices 0:2 and 4:6: stacked as a copy
    assert (apart < 0).sum() == 0
