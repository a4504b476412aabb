"""Setup C of the differential fuzzer (fuzz_cluster.py) without TensorFlow: its specs run on mirrorlab's
``SimCluster(workers=2)``, replay, and shrink without the known cluster breakers; the cross-worker shape checks that
keep TF's collectives whole; checkpoints restored from the chief's path; and how a launch's records are settled."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from mirrorlab.sim import SimCluster

from .adapters import MirrorlabApi
from .cases import per_replica
from .dataset_cases import text_files
from .fuzz_cluster import AREAS, Batch, breaks_cluster, generate, mirrorlab_results, shrink
from .fuzz_collectives import mismatched, reduce_mismatched

API = MirrorlabApi()
text_files()


@pytest.mark.parametrize("area", sorted(AREAS))
def test_cluster_specs_run_on_the_simulator_and_replay(area: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seeded sample of each area: JSON round trip, one normalized JSON result per worker, the same results from
    the replayed spec, and shrinking that stays in the area and never yields a known cluster breaker."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    for i in range(8):
        spec = generate(area, random.Random(f"test:{area}:C:{i}"))
        replayed = json.loads(json.dumps(spec))
        assert replayed == spec and not breaks_cluster(spec)
        results = mirrorlab_results(API, spec)
        assert len(results) == 2 and json.loads(json.dumps(results)) == results
        assert all("program" not in r and "strategy_creation" not in r for r in results), results
        assert mirrorlab_results(API, replayed) == results
        for smaller in shrink(spec):
            assert smaller["area"] == area and smaller != spec and not breaks_cluster(smaller)


def test_generation_steers_clear_of_one_file_auto_sharding() -> None:
    """One text file auto-sharded over two workers breaks TF's cluster: never generated; checkpoint specs always
    save or restore under the cluster's MWMS."""
    specs = [generate("dataset", random.Random(f"steer:{i}")) for i in range(300)]
    assert not any(breaks_cluster(spec) for spec in specs)
    assert any(spec["source"].get("files") == 1 for spec in specs)  # under OFF, DATA or from a function
    assert breaks_cluster({"area": "dataset", "source": {"kind": "text", "files": 1}, "policy": None})
    checkpoints = [generate("checkpoint", random.Random(f"steer:{i}")) for i in range(50)]
    assert all("C" in (spec["save"], spec["restore"]) for spec in checkpoints)


def test_shape_checks_see_every_workers_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """On 2 workers the guards gather the other worker's shape: an all-reduce of [2] and [3] is skipped, a reduce
    along the differing axis is not, nor one that all-reduces empty values (that crashes a TF worker); all_gather
    may differ only along its axis. In one process nothing is skipped for a reduce (TF raises and goes on)."""
    monkeypatch.delenv("TF_CONFIG", raising=False)

    def program() -> dict[str, bool]:
        s = API.mwms()
        rows = per_replica(s, lambda i: API.constant(np.zeros([2 + int(i), 2], np.float32)))
        columns = per_replica(s, lambda i: API.constant(np.zeros([2, 2 + int(i)], np.float32)))
        empty = per_replica(s, lambda i: API.constant(np.zeros([0, 2], np.float32)))
        return {"reduce_none": reduce_mismatched(API, s, rows, None), "reduce_0": reduce_mismatched(API, s, rows, 0),
                "reduce_1": reduce_mismatched(API, s, rows, 1), "reduce_01": reduce_mismatched(API, s, rows, [0, 1]),
                "gather_rows": mismatched(API, s, rows, 0), "gather_columns": mismatched(API, s, columns, 0),
                "all_reduce": mismatched(API, s, rows, None), "empty_none": reduce_mismatched(API, s, empty, None),
                "empty_0": reduce_mismatched(API, s, empty, 0), "empty_1": reduce_mismatched(API, s, empty, 1)}

    for worker in SimCluster(workers=2).run(program).values():
        assert worker == {"reduce_none": True, "reduce_0": False, "reduce_1": True, "reduce_01": False,
                          "gather_rows": False, "gather_columns": True, "all_reduce": True, "empty_none": True,
                          "empty_0": False, "empty_1": True}
    local = API.mirrored(2)
    rows = per_replica(local, lambda i: API.constant(np.zeros([2 + int(i)], np.float32)))
    assert not reduce_mismatched(API, local, rows, None) and mismatched(API, local, rows, None)


def test_checkpoints_restore_from_the_chiefs_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker saves its own copy (worker 1 updated its variable differently), and every worker restores the
    chief's: under a local strategy both read the chief's values."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    spec = {"area": "checkpoint", "save": "C", "restore": "M1", "mode": "restore",
            "variables": [{"sync": "on_write", "agg": "NONE", "dtype": "int32", "shape": [2], "update": "assign"}],
            "targets": [{"sync": "on_write", "agg": "NONE", "dtype": "int32", "shape": [2]}]}
    chief, other = mirrorlab_results(API, spec)
    saved = [r["before"]["dict"]["v0"]["dict"]["read"]["value"] for r in (chief, other)]
    assert saved == [[10, 11], [20, 22]]
    for result in (chief, other):
        assert result["path"] == "ckpt-1"
        assert result["restored"]["dict"]["v0"]["dict"]["read"]["value"] == [10, 11]


def _records(*lines: dict) -> list[dict]:
    """One worker's records."""
    return list(lines)


def test_settle_takes_finished_specs_and_names_the_breaker() -> None:
    """Specs every worker finished healthily are results; a failed health check, or a spec left unfinished twice,
    breaks the cluster, and the next launch starts after it."""
    done = lambda i, broken=None: {"index": i, "result": {"i": i}, "broken": broken}  # noqa: E731
    batch = Batch()
    nxt = batch.settle([_records({"begin": 0}, done(0), {"begin": 1}, done(1, "InternalError: aborted")),
                        _records({"begin": 0}, done(0), {"begin": 1}, done(1))], 0, 4, "finished")
    assert nxt == 2 and batch.results == {0: [{"i": 0}, {"i": 0}]}
    assert batch.broke == {1: "worker 0: InternalError: aborted"}
    stuck = [_records({"begin": 2}, done(2), {"begin": 3}), _records({"begin": 2}, done(2))]
    assert batch.settle(stuck, 2, 4, "no progress for 60 s") == 3  # a first stall: run the spec again
    assert batch.results[2] == [{"i": 2}, {"i": 2}] and batch.stalled == {3} and 3 not in batch.broke
    assert batch.settle([[{"begin": 3}], [{"begin": 3}]], 3, 4, "no progress for 60 s") == 4
    assert batch.broke[3] == "no progress for 60 s (the workers began specs [3, 3])"
    assert Batch().settle([[done(0)], [done(0)]], 0, 1, "finished") == 1
