"""The trace keeps only its last N events in memory (flat memory over long runs), streams the whole trace to a file
when asked, and the divergence check of aggregation-NONE updates reports the same digests as hashing every copy."""

from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mirrorlab.tf as tf
from mirrorlab.sim import SimCluster
from mirrorlab.trace import CollectiveEvent, Trace, TraceNote


def _event(seq: int) -> CollectiveEvent:
    return CollectiveEvent(0, 0, seq, "all_reduce", "sum", "float32", [4], float(seq), float(seq), "x.py:1")


@settings(max_examples=30, deadline=None)
@given(keep=st.integers(1, 20), count=st.integers(0, 60))
def test_a_bounded_trace_keeps_the_latest_events_and_counts_the_dropped(keep: int, count: int) -> None:
    trace = Trace(meta={"seed": 0}, keep_last=keep)
    for seq in range(count):
        trace.add(_event(seq))
    assert [e.seq for e in trace] == list(range(max(0, count - keep), count))
    assert trace.meta.get("dropped_events", 0) == max(0, count - keep)
    again = Trace.from_jsonl(trace.to_jsonl())
    assert [e.seq for e in again] == [e.seq for e in trace]


def test_trace_memory_stays_flat_however_many_events() -> None:
    trace = Trace(keep_last=1000)
    event = _event(0)
    for _ in range(2000):
        trace.add(event)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(200_000):
        trace.add(event)
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(trace) == 1000 and grown < 10_000


def test_a_bad_keep_count_names_the_field() -> None:
    with pytest.raises(ValueError, match="trace_keep=0 must be an integer >= 1"):
        SimCluster(2, trace_keep=0)


def _program() -> None:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        v = tf.Variable(0.0)
    for _ in range(3):
        strategy.reduce("sum", tf.constant(1.0), axis=None)
        strategy.run(lambda: v.assign(float(tf.distribute.get_replica_context().replica_id_in_sync_group)))


def test_sim_run_keeps_the_tail_and_streams_the_whole_trace(tmp_path) -> None:
    full = SimCluster(2, 2, seed=3, trace_keep=None).run(_program).trace
    path = tmp_path / "trace.jsonl"
    short = SimCluster(2, 2, seed=3, trace_keep=5, trace_file=str(path)).run(_program).trace
    assert list(short.events) == list(full.events)[-5:]
    assert short.meta["dropped_events"] == len(full.events) - 5
    streamed = Trace.from_jsonl(path.read_text())
    assert list(streamed.events) == list(full.events) and list(streamed.notes) == list(full.notes)
    assert SimCluster(2, 2, seed=3).run(_program).trace.to_jsonl() == full.to_jsonl()  # default keeps short runs


@pytest.mark.parametrize("differ", [False, True])
def test_unsynced_copies_are_named_by_the_sha1_of_each_copy(differ: bool) -> None:
    """Same findings as hashing every copy every step: equal copies share one digest, different ones differ."""
    def program() -> list[float]:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = tf.Variable(np.zeros(3, np.float32))
        def value() -> float:
            return float(tf.distribute.get_replica_context().replica_id_in_sync_group) if differ else 1.0

        strategy.run(lambda: v.assign(np.full(3, value(), np.float32)))
        return [np.asarray(c).tolist() for c in v.values]

    result = SimCluster(1, 3, check_mirrors=False).run(program)  # copies differ on purpose
    (note,) = result.trace.notes
    copies = result.values()[0]
    expected = [hashlib.sha1(np.asarray(c, np.float32).tobytes()).hexdigest()[:12] for c in copies]
    assert note.details["digests"] == expected
    assert (len(set(expected)) > 1) == differ
    assert isinstance(note, TraceNote)


def test_string_copies_have_the_same_digest_in_every_run():
    """Digests of string copies hash the strings, not the objects' addresses: two runs give the same trace note."""
    import mirrorlab.tf as tf
    from mirrorlab.sim import SimCluster

    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            v = tf.Variable("a", aggregation=tf.VariableAggregation.NONE)
        strategy.run(lambda: v.assign("b" + "c"))  # a fresh str object on every replica, equal content

    notes = []
    for _ in range(2):
        trace = SimCluster(workers=1, devices_per_worker=2, seed=0).run(program).trace
        notes.append([n.details["digests"] for n in trace.notes if n.note == "unsynced_update"])
    assert notes[0] == notes[1] and notes[0] and len(set(notes[0][0])) == 1
