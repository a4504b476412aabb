"""``Dataset.save`` / ``Dataset.load``: round trips of any element structure (TF's own results are in the pipeline
goldens, ``fixed_save_*``), streaming chunks, atomic replacement, no pickle, and clear errors."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab.tf.data import saving

Dataset = ml.data.Dataset


def values(dataset) -> list:
    return [ml.nest.map_structure(lambda a: np.asarray(a).tolist(), x) for x in dataset]


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-2**40, 2**40), st.floats(allow_nan=False, width=32),
                               st.binary(max_size=6)), max_size=12),
       shards=st.integers(1, 4))
def test_round_trip_of_numbers_and_strings_in_any_shards(tmp_path_factory, rows, shards):
    """What is saved loads back: values, dtypes, byte strings (empty and with NULs), and with shard_func every
    element exactly once, each shard in its order."""
    path = str(tmp_path_factory.mktemp("saved") / "ds")
    ints = np.array([r[0] for r in rows], np.int64)
    floats = np.array([r[1] for r in rows], np.float32)
    strings = np.array([r[2] for r in rows], dtype=object) if rows else np.zeros(0, object)
    dataset = Dataset.from_tensor_slices({"i": ints, "f": floats, "s": strings if rows else np.array([], "S")})
    dataset.save(path, shard_func=lambda d: d["i"] % shards)
    loaded = Dataset.load(path, reader_func=lambda parts: parts.flat_map(lambda part: part))
    assert int(loaded.cardinality()) == len(rows)
    got = list(loaded)
    assert sorted((int(d["i"]), float(d["f"]), d["s"].item()) for d in got) == sorted(
        (int(i), float(f), bytes(s)) for i, f, s in zip(ints, floats, strings))
    assert all(d["i"].dtype == np.int64 and d["f"].dtype == np.float32 for d in got)
    by_shard = [int(d["i"]) for d in got]
    assert [i for i in by_shard if i % shards == by_shard[0] % shards] == \
        [int(i) for i in ints if i % shards == by_shard[0] % shards] if rows else True


def test_elements_of_varying_shape_and_nested_structures(tmp_path):
    dataset = Dataset.range(7).batch(3).map(lambda x: ((x, {"twice": x * 2}), [x[:1]]))
    dataset.save(str(tmp_path / "ds"))
    loaded = Dataset.load(str(tmp_path / "ds"))
    assert values(loaded) == values(dataset)
    assert loaded.element_spec == dataset.element_spec


def test_large_datasets_are_written_and_read_in_chunks(tmp_path, monkeypatch):
    """Elements stream through chunk files of CHUNK elements, never all in memory at once."""
    monkeypatch.setattr(saving, "CHUNK", 10)
    Dataset.range(35).save(str(tmp_path / "ds"))
    files = sorted(p.name for p in (tmp_path / "ds" / "shard_0").iterdir())
    assert files == [f"chunk_{k:08d}.npz" for k in range(4)]
    assert values(Dataset.load(str(tmp_path / "ds"))) == list(range(35))


def test_files_hold_no_pickles_and_are_refused_if_they_do(tmp_path):
    Dataset.from_tensor_slices(["a", "bc"]).save(str(tmp_path / "ds"))
    chunk = tmp_path / "ds" / "shard_0" / "chunk_00000000.npz"
    with zipfile.ZipFile(chunk) as archive:
        for name in archive.namelist():
            assert b"pickle" not in archive.read(name)[:200]
    np.savez(chunk, c0_shapes=np.zeros((2, 0), np.int64), c0_values=np.array([object(), object()], dtype=object))
    with pytest.raises(ml.errors.DataLossError, match="never unpickles data.*allow_pickle"):
        list(Dataset.load(str(tmp_path / "ds")))


def test_a_failed_save_keeps_the_previous_one(tmp_path):
    """The new save is written aside and renamed into place only when complete."""
    path = str(tmp_path / "ds")
    Dataset.range(3).save(path)

    def breaks(x):
        if int(x) == 2:
            raise ml.errors.InvalidArgumentError("the input broke")
        return x

    with pytest.raises(ml.errors.InvalidArgumentError, match="the input broke"):
        Dataset.range(5).map(breaks).save(path)
    assert values(Dataset.load(path)) == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temporary directory left


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(ml.errors.NotFoundError, match="dataset_spec.json"):
        Dataset.load(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="checkpoint_args"):
        Dataset.range(2).save(str(tmp_path / "ds"), checkpoint_args={"checkpoint": None})
    with pytest.raises(ml.errors.InvalidArgumentError, match="compression"):
        Dataset.range(2).save(str(tmp_path / "ds"), compression="ZLIB")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "dataset_spec.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ml.errors.DataLossError, match="not written by mirrorlab"):
        Dataset.load(str(tmp_path / "other"))
    Dataset.range(2).save(str(tmp_path / "ds"))
    with pytest.raises(ml.errors.InvalidArgumentError, match="expected int32 but got int64"):
        list(Dataset.load(str(tmp_path / "ds"), element_spec=ml.TensorSpec([], ml.int32)))


def test_a_loaded_dataset_is_sharded_by_data_across_workers(tmp_path):
    """Like TF's load, it is no file reader: AUTO sharding splits its elements (DATA), never its files."""
    from mirrorlab.sim import SimCluster

    Dataset.range(8).save(str(tmp_path / "ds"))

    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        dataset = Dataset.load(str(tmp_path / "ds")).batch(4)
        return [strategy.experimental_local_results(b)[0].tolist()
                for b in strategy.experimental_distribute_dataset(dataset)]

    assert SimCluster(workers=2, devices_per_worker=1, seed=1).run(program).values() == [[[0, 1], [4, 5]],
                                                                                          [[2, 3], [6, 7]]]
