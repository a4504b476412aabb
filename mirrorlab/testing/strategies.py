"""Hypothesis strategies for property-testing training code on simulated clusters: shapes, seeds, fault
schedules, TF_CONFIGs and global batch sizes. Small values come first, so failures shrink to a small
cluster, few steps and few faults."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mirrorlab.sim import Clog, Crash, Cut, Delay, Drop, Fault, Isolate, Maybe, Slow

from .combinations import ClusterShape

__all__ = ["cluster_shapes", "seeds", "fault_schedules", "tf_configs", "global_batches", "datasets"]


def cluster_shapes(max_workers: int = 4, max_devices: int = 2, chief: bool | None = None) -> st.SearchStrategy:
    """``ClusterShape``s of 1..``max_workers`` workers x 1..``max_devices`` devices (with or without a chief)."""
    chiefs = st.booleans() if chief is None else st.just(chief)
    shapes = st.tuples(st.integers(1, max_workers), st.integers(1, max_devices), chiefs)
    return shapes.map(lambda s: ClusterShape(s[0], s[1], chief=s[2] and s[0] > 1))


def seeds() -> st.SearchStrategy[int]:
    """Simulator seeds (one seed fixes scheduling, fault decisions and the clock)."""
    return st.integers(0, 2**32 - 1)


def _fault(workers: int) -> st.SearchStrategy[Fault]:
    """One fault, simplest kinds first (Hypothesis shrinks towards the first alternative)."""
    worker = st.integers(0, workers - 1)
    kinds = [st.builds(lambda w, s: Crash(w, at_step=s), worker, st.integers(1, 6)),
             st.builds(lambda w, t: Slow(w, seconds_per_step=t), worker, st.sampled_from([0.5, 2.0, 30.0]))]
    if workers > 1:
        pair = st.tuples(worker, worker).filter(lambda p: p[0] != p[1])
        kinds += [st.builds(lambda p, t: Delay(p[0], p[1], t), pair, st.sampled_from([0.1, 1.0, 5.0])),
                  st.builds(lambda p, q, a: Drop(p[0], p[1], probability=q, after=a), pair,
                            st.sampled_from([1.0, 0.5, 0.1]), st.integers(0, 20)),
                  st.builds(lambda p: Cut(*sorted(p)), pair),
                  st.builds(lambda p, t, s: Clog(*sorted(p), t, s), pair, st.sampled_from([0.0, 0.5, 2.0]),
                            st.sampled_from([0.5, 5.0])),
                  st.builds(Isolate, worker, st.sampled_from([0.0, 1.0, 3.0]), st.sampled_from([None, 1.0]))]
    plain = st.one_of(kinds)
    maybe = st.builds(Maybe, plain, st.sampled_from([0.5, 1.0]), st.sampled_from([1.0, 0.5]))
    return st.one_of(plain, maybe)


def fault_schedules(workers: int, max_faults: int = 2) -> st.SearchStrategy[list[Fault]]:
    """Lists of up to ``max_faults`` faults for a ``workers``-worker cluster: crashes, stragglers, delays, drops
    (partial ones too), cuts, clogged links, isolated workers, and any of them wrapped in ``Maybe``. A failing
    schedule shrinks towards fewer, plainer faults, down to []."""
    return st.lists(_fault(workers), max_size=max_faults)


def _valid_config(workers: int, index: int) -> str:
    cluster = {"worker": [f"host{k}.example:{2222 + k}" for k in range(workers)]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def _broken_config(workers: int, index: int, how: str) -> str:
    config = json.loads(_valid_config(workers, index))
    if how == "malformed":
        return str(config)  # single quotes: not JSON
    if how == "index_out_of_range":
        config["task"]["index"] = workers
    elif how == "duplicate_address":
        config["cluster"]["worker"] = [config["cluster"]["worker"][0]] * max(workers, 2)
    elif how == "missing_task":
        del config["task"]
    elif how == "unknown_job":
        config["task"]["type"] = "master"
    return json.dumps(config)


BROKEN = ("malformed", "index_out_of_range", "duplicate_address", "missing_task", "unknown_job")


def tf_configs(valid: bool = True, max_workers: int = 4) -> st.SearchStrategy[str]:
    """TF_CONFIG texts of a worker-only cluster; ``valid=False`` gives one mistake from ``BROKEN``."""
    shapes = st.integers(1, max_workers).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1)))
    if valid:
        return shapes.map(lambda s: _valid_config(*s))
    return st.builds(lambda s, how: _broken_config(s[0], s[1], how), shapes, st.sampled_from(BROKEN))


def global_batches(replicas: int, max_batch: int = 16) -> st.SearchStrategy[int]:
    """Global batch sizes for ``replicas`` replicas, uneven ones included (the last partial batch's bugs)."""
    return st.integers(max(1, replicas - 1), max(max_batch, replicas + 1))


def datasets(max_examples: int = 24, features: int = 2) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """``(x, y)`` float32 arrays of 1..``max_examples`` rows (finite, moderate values) to feed a training program."""
    values = st.floats(-10.0, 10.0, width=32)
    return st.integers(1, max_examples).flatmap(lambda n: st.tuples(
        hnp.arrays(np.float32, (n, features), elements=values), hnp.arrays(np.float32, (n,), elements=values)))
