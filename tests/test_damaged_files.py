"""Damaged files are refused clearly (issue 26): checkpoints, saved datasets, snapshots and ``.keras`` models are
truncated, have bytes flipped, keys dropped or retyped, and dtypes and shapes lied about in their manifests; every
reader then either reads what is there or raises a documented error naming the file (DataLossError; NotFoundError
for a file that is gone; for ``.keras``, Keras' ValueError for a file that is no zip or weights that do not fit),
never a KeyError, AttributeError, BadZipFile, EOFError or the like."""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirrorlab.tf as tf
from mirrorlab import errors

REPLACEMENTS = [None, True, 0, -1, 3, 2**70, 1.5, "", "x", "float64", "int32", "string", "bfloat16", "object", [],
                [2], [-1], [1, 1], [None], ["a"], {}, {"a": 1}]
DAMAGES = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("drop"), st.integers(0, 10**6)),
    st.tuples(st.just("retype"), st.integers(0, 10**6), st.sampled_from(REPLACEMENTS)),
    st.tuples(st.just("lie"), st.integers(0, 10**6), st.sampled_from(["dtype", "shape"]),
              st.sampled_from(["float64", "int8", "uint8", "string", "bool", [], [3], [2, 2], [0], [10**9]])))
CASES = dict(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def json_paths(value, path=()):
    """Every node below the root of a JSON value, as key/index paths."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield path + (key,)
        yield from json_paths(child, path + (key,))


def damage(file: Path, how: tuple) -> None:
    """Apply one damage to ``file``; JSON edits fall back to flipping a byte where the file is no JSON."""
    raw = file.read_bytes()
    kind = how[0]
    if kind in ("drop", "retype", "lie"):
        try:
            value = json.loads(raw)
        except ValueError:
            kind, how = "flip", ("flip", (how[1] % 997) / 997, 0x55)
    if kind == "truncate":
        file.write_bytes(raw[:int(len(raw) * how[1])])
        return
    if kind == "flip":
        at = min(int(len(raw) * how[1]), len(raw) - 1)
        file.write_bytes(raw[:at] + bytes([raw[at] ^ how[2]]) + raw[at + 1:])
        return
    if kind == "lie":  # a variable's or a component's dtype or shape
        paths = [p for p in json_paths(value) if p[-1] == how[2]] or list(json_paths(value))
        replacement = how[3]
    else:
        paths, replacement = list(json_paths(value)), how[-1]
    if not paths:
        return
    *parents, last = paths[how[1] % len(paths)]
    node = value
    for key in parents:
        node = node[key]
    if kind == "drop":
        del node[last]
    else:
        node[last] = replacement
    file.write_text(json.dumps(value))


def refused_clearly(read, root: Path, also: tuple = ()) -> None:
    """Run ``read``: it may succeed or raise a documented error that names a file under ``root``."""
    try:
        read()
    except (errors.DataLossError, errors.NotFoundError) as exc:
        assert str(root) in exc.message, f"the error names no file: {exc.message}"
    except also as exc:
        assert str(root) in str(exc), f"the error names no file: {exc}"


def damaged_copy(pristine: Path, pick: int, how: tuple) -> Path:
    """A copy of the directory ``pristine`` with one of its files damaged."""
    root = Path(tempfile.mkdtemp(prefix="damaged-"))
    shutil.copytree(pristine, root, dirs_exist_ok=True)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    damage(files[pick % len(files)], how)
    return root


@pytest.fixture(autouse=True)
def quiet_recovery_warnings(caplog):
    caplog.set_level(logging.ERROR, logger="mirrorlab")


def checkpoint_variables():
    return {"v": tf.Variable(np.zeros(3, np.float32)), "s": tf.Variable(["", ""]), "n": tf.Variable(np.int64(0))}


@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("checkpoint")
    values = checkpoint_variables()
    values["v"].assign(np.arange(3, dtype=np.float32))
    values["s"].assign(["a", "bcd"])
    tf.train.CheckpointManager(tf.train.Checkpoint(**values), directory, max_to_keep=1).save()
    return directory


@settings(**CASES)
@given(pick=st.integers(0, 2), how=DAMAGES)
def test_damaged_checkpoints_are_refused_clearly(saved_checkpoint, pick, how):
    root = damaged_copy(saved_checkpoint, pick, how)
    prefix = str(root / "ckpt-1")
    try:
        refused_clearly(lambda: tf.train.Checkpoint(**checkpoint_variables()).read(prefix), root)
        refused_clearly(lambda: tf.train.load_variable(prefix, "v/.ATTRIBUTES/VARIABLE_VALUE"), root)
        refused_clearly(lambda: tf.train.list_variables(prefix), root)
        refused_clearly(lambda: tf.train.load_checkpoint(prefix).get_variable_to_dtype_map(), root)
        refused_clearly(lambda: tf.train.CheckpointManager(tf.train.Checkpoint(**checkpoint_variables()), root,
                                                           max_to_keep=1).restore_or_initialize(), root)
    finally:
        shutil.rmtree(root)


@pytest.fixture(scope="module", params=[None, "GZIP"])
def saved_dataset(tmp_path_factory, request):
    directory = tmp_path_factory.mktemp("dataset") / "ds"
    elements = ({"a": np.arange(8, dtype=np.float32).reshape(4, 2)}, np.array([b"x", b"yz", b"", b"w"]))
    tf.data.Dataset.from_tensor_slices(elements).save(str(directory), compression=request.param)
    return directory, request.param


@settings(**CASES)
@given(pick=st.integers(0, 1), how=DAMAGES)
def test_damaged_saved_datasets_are_refused_clearly(saved_dataset, pick, how):
    pristine, compression = saved_dataset
    root = damaged_copy(pristine, pick, how)
    try:
        refused_clearly(lambda: list(tf.data.Dataset.load(str(root), compression=compression)), root)
    finally:
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def snapshot_pipeline(tmp_path_factory):
    directory = tmp_path_factory.mktemp("snapshot")

    def pipeline(path):
        words = np.array([b"a", b"bc", b"", b"def", b"g", b"hi"])
        return tf.data.Dataset.from_tensor_slices((np.arange(6), words)).snapshot(str(path))

    expected = list(pipeline(directory).as_numpy_iterator())
    return directory, pipeline, expected


@settings(**CASES)
@given(pick=st.integers(0, 50), how=DAMAGES)
def test_damaged_snapshots_are_refused_clearly_or_written_again(snapshot_pipeline, pick, how):
    pristine, pipeline, expected = snapshot_pipeline
    root = damaged_copy(pristine, pick, how)
    try:
        refused_clearly(lambda: list(pipeline(root).as_numpy_iterator()), root)
    finally:
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("model")
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 3), np.float32), np.ones((4, 2), np.float32), epochs=1, verbose=0)
    model.save(directory / "m.keras")
    return directory


@settings(**CASES)
@given(how=st.one_of(st.tuples(st.just("truncate"), st.floats(0, 1)),
                     st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255))))
def test_damaged_keras_files_are_refused_clearly(saved_model, how):
    root = damaged_copy(saved_model, 0, how)
    try:
        refused_clearly(lambda: tf.keras.models.load_model(root / "m.keras"), root, also=(ValueError,))
    finally:
        shutil.rmtree(root)


def test_a_manifest_that_lies_about_a_shape_or_dtype_is_refused(saved_checkpoint, tmp_path):
    shutil.copytree(saved_checkpoint, tmp_path, dirs_exist_ok=True)
    manifest_path = tmp_path / "ckpt-1.index.json"
    manifest = json.loads(manifest_path.read_text())
    entry = manifest["variables"]["v/.ATTRIBUTES/VARIABLE_VALUE"]
    for field, lie, said in (("shape", [4], "shape [4], the data holds [3]"),
                             ("dtype", "int32", "dtype int32, the data holds float32")):
        truth, entry[field] = entry[field], lie
        manifest_path.write_text(json.dumps(manifest))
        with pytest.raises(errors.DataLossError, match=r"ckpt-1.npz \(v/.ATTRIBUTES/VARIABLE_VALUE\) is damaged: its "
                                                       r"manifest says " + re.escape(said)):
            tf.train.load_variable(str(tmp_path / "ckpt-1"), "v/.ATTRIBUTES/VARIABLE_VALUE")
        entry[field] = truth
    manifest["graph"] = [["not", "a", "graph"]]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(errors.DataLossError, match=r"ckpt-1.index.json is damaged: \$.graph must be an object"):
        tf.train.Checkpoint(**checkpoint_variables()).read(str(tmp_path / "ckpt-1"))
    del manifest["graph"], manifest["sha256"]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(errors.DataLossError, match=r"ckpt-1.index.json is damaged: \$ lacks 'sha256'"):
        tf.train.list_variables(str(tmp_path / "ckpt-1"))
