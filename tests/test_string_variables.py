"""String (tf.string) variables: TF 2.21's representation (bytes for a scalar, object arrays of bytes otherwise),
assign round trips, and what cannot be aggregated. The values TF 2.21 gives are written in; the recorded
conformance cases (string_variables, string_distributed_variables) hold the rest."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab import errors
from mirrorlab.sim import SimCluster
from mirrorlab.train import Checkpoint, load_checkpoint, load_variable

TEXT = st.text(max_size=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=5), st.lists(TEXT, min_size=1, max_size=5))
def test_string_vectors_hold_utf8_bytes_and_assign_round_trips(first, second):
    v = ml.Variable(first)
    expected = np.array([t.encode() for t in first], dtype=object)
    assert v.dtype == ml.dtypes.string and v.numpy().dtype == object
    assert v.numpy().tolist() == expected.tolist()
    if len(second) == len(first):
        v.assign([t.encode() for t in second])
        assert v.numpy().tolist() == [t.encode() for t in second]
    else:
        with pytest.raises(ValueError, match="Shape mismatch"):
            v.assign(second)


def test_a_scalar_string_reads_as_bytes_as_in_tf():
    v = ml.Variable("é")
    assert v.numpy() == b"\xc3\xa9" and type(v.numpy()) is bytes
    assert repr(v) == "<mirrorlab.Variable 'Variable:0' shape=() dtype=string, numpy=b'\\xc3\\xa9'>"
    assert (v + "!").tolist() == b"\xc3\xa9!"
    assert ml.Variable(["a\x00", b"\x00"]).numpy().tolist() == [b"a\x00", b"\x00"]  # kept whole, as TF keeps them


def test_a_scalar_string_keeps_trailing_nul_bytes_as_tf_does():
    """TF strings are byte sequences: NUL bytes at the end survive creation, assign, `+` and reads."""
    v = ml.Variable(b"ab\x00")
    assert v.numpy() == b"ab\x00" and v.read_value().item() == b"ab\x00"
    v.assign("x\x00\x00")
    assert (v + b"\x00").item() == b"x\x00\x00\x00" and (b"\x00" + v).item() == b"\x00x\x00\x00"


def test_text_lines_keep_trailing_nul_bytes(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"a\x00\nb\r\n")
    assert [line.item() for line in ml.data.TextLineDataset(str(path))] == [b"a\x00", b"b"]


def test_strings_and_numbers_do_not_mix():
    with pytest.raises(TypeError, match=r"^Cannot convert 1 to EagerTensor of dtype string$"):
        ml.Variable("a").assign(1)
    with pytest.raises(TypeError, match=r"^Cannot convert 'a' to EagerTensor of dtype float$"):
        ml.Variable(1.0).assign("a")
    with pytest.raises(ValueError, match=r"^Can't convert Python sequence with mixed types to Tensor.$"):
        ml.Variable(["a", 1])
    with pytest.raises(errors.InvalidArgumentError, match=r"'AssignAddVariableOp' .*\[dtype=DT_STRING\]"):
        ml.Variable("a").assign_add("b")


def test_string_variables_cannot_be_created_in_a_multi_worker_scope():
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            try:
                ml.Variable("chief")
            except errors.InvalidArgumentError as error:
                return str(error).splitlines()[0]
        return "created"

    # TF 2.21 broadcasts the chief's initial value, and its broadcast takes no strings.
    assert SimCluster(workers=2).run(program).values() == [
        "Value for attr 'T' of string is not in the list of allowed values: bool, float, half, double, int32, int64"] * 2


# -- checkpoints ----------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=6), max_size=6))
def test_string_checkpoint_entries_round_trip_exactly_without_pickle(tmp_path_factory, items):
    directory = tmp_path_factory.mktemp("strings")
    v = ml.Variable(np.array(items, dtype=object).reshape(len(items)))
    path = Checkpoint(v=v).write(directory / "ckpt")
    with np.load(f"{path}.npz", allow_pickle=False) as archive:
        assert archive["v0"].dtype == np.uint8  # length-prefixed bytes, never an object array
    loaded = load_variable(path, "v/.ATTRIBUTES/VARIABLE_VALUE")
    assert loaded.dtype == object and loaded.tolist() == items
    assert load_checkpoint(path).get_variable_to_dtype_map()["v/.ATTRIBUTES/VARIABLE_VALUE"] == ml.dtypes.string


def test_a_scalar_string_entry_loads_as_bytes(tmp_path):
    path = Checkpoint(s=ml.Variable("\x00é")).write(tmp_path / "ckpt")
    loaded = load_variable(path, "s/.ATTRIBUTES/VARIABLE_VALUE")
    assert type(loaded) is bytes and loaded == b"\x00\xc3\xa9"
    assert json.loads(Path(f"{path}.index.json").read_text())["variables"]["s/.ATTRIBUTES/VARIABLE_VALUE"][
        "dtype"] == "string"


def test_the_object_graph_is_a_string_entry_as_in_tf(tmp_path):
    """TF's reader types _CHECKPOINTABLE_OBJECT_GRAPH as tf.string; load_variable hands it out as bytes."""
    path = Checkpoint(x=ml.Variable(1.0)).write(tmp_path / "ckpt")
    assert load_checkpoint(path).get_variable_to_dtype_map()["_CHECKPOINTABLE_OBJECT_GRAPH"] == ml.dtypes.string
    assert type(load_variable(path, "_CHECKPOINTABLE_OBJECT_GRAPH")) is bytes


def _tamper(path: str, blob: np.ndarray, shape: list) -> None:
    """Replace the first entry's data with ``blob`` and its manifest shape with ``shape`` (SHA-256 kept valid)."""
    buffer = io.BytesIO()
    np.savez(buffer, v0=blob)
    raw = buffer.getvalue()
    Path(f"{path}.npz").write_bytes(raw)
    manifest_path = Path(f"{path}.index.json")
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"] = hashlib.sha256(raw).hexdigest()
    next(iter(manifest["variables"].values()))["shape"] = shape
    manifest_path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(("blob", "shape", "problem"), [
    (np.frombuffer((5).to_bytes(8, "little") + b"ab", np.uint8), [1], "runs past the end"),
    (np.frombuffer((1).to_bytes(8, "little") + b"ab", np.uint8), [1], "left over"),
    (np.frombuffer((0).to_bytes(8, "little"), np.uint8), [10**12], "cannot fit"),
    (np.frombuffer((1).to_bytes(8, "little") + b"a" + bytes(7), np.uint8), [2], "ends before"),
    (np.zeros(8, np.int64), [1], "1-D uint8"),
    (np.zeros(8, np.uint8), [-1], r"shape\[0\] must be a non-negative int"),
])
def test_corrupt_string_entries_are_data_loss_within_the_file(tmp_path, blob, shape, problem):
    path = Checkpoint(v=ml.Variable(["a"])).write(tmp_path / "ckpt")
    _tamper(path, blob, shape)
    with pytest.raises(errors.DataLossError, match=problem):
        load_variable(path, "v/.ATTRIBUTES/VARIABLE_VALUE")
