"""``Dataset.snapshot``: what TF shows is in the pipeline goldens (``fixed_snapshot_*``); here the rules as properties
and what TF cannot show in one process: a later run of the program reads the snapshot, an unfinished or crashed
pass leaves nothing that reads back, and the fingerprint tells pipelines apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.tf.data.fingerprint import fingerprint
from mirrorlab.tf.data.snapshot import METADATA
from mirrorlab.sim import SimCluster

Dataset = ml.data.Dataset


def values(dataset) -> list:
    return [np.asarray(x).tolist() for x in dataset]


def noisy(size: int) -> Dataset:
    """``range(size)`` plus a fresh random offset every pass: a second pass equal to the first was read back."""
    generator = np.random.default_rng()
    return Dataset.range(size).map(lambda x: x * 1000 + int(generator.integers(0, 1000)))


def runs(path: Path) -> list[Path]:
    return [run for digest in path.iterdir() for run in digest.iterdir() if run.is_dir()]


@settings(max_examples=25, deadline=None)
@given(size=st.integers(0, 30), shards=st.sampled_from([None, 1, 2, 3]), reader=st.sampled_from([None, "flat_map"]))
def test_later_passes_read_what_the_first_complete_pass_yielded(tmp_path_factory, size, shards, reader):
    """TF's defaults (elements to shards by index, shards interleaved) read back in the written order; a flat_map
    reader reads shard after shard, each in the written order; any reader reads back the same elements."""
    shard_func = None if shards is None else (lambda x: x // 1000 % shards)
    reader_func = None if reader is None else (lambda datasets: datasets.flat_map(lambda d: d))
    dataset = noisy(size).snapshot(str(tmp_path_factory.mktemp("snapshot")), shard_func=shard_func,
                                   reader_func=reader_func)
    first = values(dataset)
    second = values(dataset)
    assert sorted(second) == sorted(first) and values(dataset) == second
    if shards is None and reader is None:
        assert second == first
    if shards is not None and reader == "flat_map":
        assert second == sorted(first, key=lambda x: x // 1000 % shards)  # (a stable sort keeps the order)


def test_a_later_run_of_the_program_reads_the_snapshot(tmp_path):
    """The fingerprint is stable across processes: the same pipeline built in a new interpreter reads the snapshot
    the first run wrote (its map reads an offset from the environment, which differs in the second run)."""
    program = textwrap.dedent(f"""
        import os, mirrorlab.tf as ml
        dataset = ml.data.Dataset.range(6).shuffle(6, seed=2).map(
            lambda x: x * 1000 + int(os.environ["OFFSET"])).snapshot({str(tmp_path)!r})
        print([int(x) for x in dataset])
    """)
    outputs = [json.loads(subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                                         timeout=120, env={**os.environ, "OFFSET": offset}).stdout)
               for offset in ("1", "2")]
    assert outputs[0] == outputs[1] and sorted(x % 1000 for x in outputs[0]) == [1] * 6


def test_an_unfinished_pass_leaves_nothing_that_reads_back(tmp_path):
    """A pass stopped before the end is not a snapshot (TF's rule); mirrorlab also removes its files."""
    dataset = noisy(10).snapshot(str(tmp_path))
    partial = values(dataset.take(4))
    assert runs(tmp_path) == []
    full = values(dataset)
    assert full[:4] != partial  # computed again, not read
    assert values(dataset) == full and len(runs(tmp_path)) == 1


def test_a_pass_that_fails_midway_leaves_no_snapshot(tmp_path):
    """An error from the input ends the pass without a snapshot (and without its files); a pass that goes on past
    the failure (ignore_errors) finishes one without the failed element."""
    failing = Dataset.range(5).map(lambda x: 10 // (x - 3)).snapshot(str(tmp_path))
    with pytest.raises(ml.errors.InvalidArgumentError):
        values(failing)
    assert runs(tmp_path) == []
    assert values(failing.ignore_errors()) == [-4, -5, -10, 10]
    assert len(runs(tmp_path)) == 1 and values(failing) == [-4, -5, -10, 10]


def test_damaged_metadata_is_no_snapshot(tmp_path):
    """Metadata that cannot be read (a crash of another writer, a file edited by hand) is written again."""
    dataset = noisy(5).snapshot(str(tmp_path))
    first = values(dataset)
    (metadata,) = tmp_path.glob(f"*/{METADATA}")
    metadata.write_text("{not json")
    second = values(dataset)
    assert second != first and values(dataset) == second


def test_a_pipeline_over_a_snapshot_keeps_its_fingerprint_after_a_pass(tmp_path):
    """What a snapshot remembers while it is iterated (its hashed directory) is not part of the pipeline."""
    outer = Dataset.range(5).shuffle(5, seed=1).snapshot(str(tmp_path)).map(lambda x: x * 2)
    before = fingerprint(outer)
    values(outer)
    assert fingerprint(outer) == before


def test_the_fingerprint_tells_pipelines_apart():
    """Ops, arguments, function code and the values functions close over are all part of it; state that changes
    from one pass to the next (a shuffle's seed generator) is not."""
    def scaled(k):
        return Dataset.range(4).map(lambda x: x * k)

    shuffled = Dataset.range(4).shuffle(4, seed=1)
    before = fingerprint(shuffled)
    values(shuffled)
    assert fingerprint(shuffled) == before
    assert fingerprint(Dataset.range(4)) == fingerprint(Dataset.range(4))
    distinct = [Dataset.range(4), Dataset.range(5), Dataset.range(4).batch(2), Dataset.range(4).batch(3),
                scaled(2), scaled(3), Dataset.range(4).map(lambda x: x + 2), shuffled,
                Dataset.range(4).shuffle(4, seed=2), Dataset.from_tensor_slices(np.arange(4))]
    assert len({fingerprint(d) for d in distinct}) == len(distinct)
    assert fingerprint(scaled(2)) == fingerprint(scaled(2))


def test_a_snapshot_on_simulated_workers_repeats_each_workers_epoch(tmp_path):
    """Under MWMS on 2 simulated workers (AUTO falls back to DATA sharding after the snapshot, as in TF) each worker
    sees the same elements in both epochs, a reshuffling shuffle notwithstanding."""
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        dataset = Dataset.range(12).shuffle(12, seed=7).snapshot(str(tmp_path)).batch(4)
        distributed = strategy.experimental_distribute_dataset(dataset)
        return [[strategy.experimental_local_results(batch)[0].tolist() for batch in distributed] for _ in range(2)]

    results = SimCluster(workers=2, devices_per_worker=1, seed=1).run(program).values()
    for first, second in results:
        assert first == second
    assert sorted(x for worker in results for batch in worker[0] for x in batch) == list(range(12))
