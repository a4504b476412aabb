"""Checkpoints: TF's ON_READ save/restore rules, every worker saving, atomic writes, no pickles."""

from __future__ import annotations

import gc
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mirrorlab.tf as ml
from mirrorlab import errors
from mirrorlab.aggregation import VariableAggregation as Agg
from mirrorlab.aggregation import VariableSynchronization as Sync
from mirrorlab.sim import Crash, SimCluster
from mirrorlab.train import Checkpoint, CheckpointManager, latest_checkpoint, list_variables, load_variable
from mirrorlab.train.tracking import escape_name, unescape_path


def make_state(strategy):
    with strategy.scope():
        w = ml.Variable(np.arange(4, dtype=np.float32), name="w")
        total = ml.Variable(0.0, synchronization=Sync.ON_READ, aggregation=Agg.SUM, name="total")
        mean = ml.Variable(0.0, synchronization=Sync.ON_READ, aggregation=Agg.MEAN, name="mean")
    return {"w": w, "total": total, "mean": mean}


def test_round_trip_of_plain_variables(tmp_path):
    v = ml.Variable(np.ones((2, 3), np.float32))
    step = ml.Variable(np.int64(7))
    ckpt = Checkpoint(model={"dense": {"kernel": v}}, step=step)
    path = ckpt.save(tmp_path / "ckpt")
    assert path == str(tmp_path / "ckpt-1") and latest_checkpoint(tmp_path) == path
    v.assign(np.zeros((2, 3), np.float32))
    step.assign(np.int64(0))
    Checkpoint(model={"dense": {"kernel": v}}, step=step).restore(path).assert_consumed()
    np.testing.assert_array_equal(v.numpy(), np.ones((2, 3)))
    assert int(step.numpy()) == 7
    assert dict(list_variables(tmp_path)) == {  # TF's keys, as tf.train.list_variables shows them
        "_CHECKPOINTABLE_OBJECT_GRAPH": [], "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE": [2, 3],
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE": [], "step/.ATTRIBUTES/VARIABLE_VALUE": []}
    np.testing.assert_array_equal(load_variable(path, "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"),
                                  np.ones((2, 3)))
    with pytest.raises(errors.NotFoundError, match="Key model/dense/kernel not found(.|\n)*full key"):
        load_variable(path, "model/dense/kernel")  # as TF: the bare object path is not a key


def test_on_read_sum_saved_as_total_restores_as_total_over_n_on_any_cluster_shape(tmp_path):
    def save_program():
        strategy = ml.MultiWorkerMirroredStrategy()
        state = make_state(strategy)
        rid = lambda: float(ml.get_replica_context().replica_id_in_sync_group + 1)  # noqa: E731
        strategy.run(lambda: (state["total"].assign(rid()), state["mean"].assign(rid())))
        return Checkpoint(**state).save(tmp_path / "ckpt")

    paths = SimCluster(workers=2, devices_per_worker=2).run(save_program).values()
    assert paths == [str(tmp_path / "ckpt-1")] * 2
    assert load_variable(paths[0], "total/.ATTRIBUTES/VARIABLE_VALUE") == 10.0  # 1 + 2 + 3 + 4, aggregated while saving
    assert load_variable(paths[0], "mean/.ATTRIBUTES/VARIABLE_VALUE") == 2.5
    assert not any(p.name.startswith("workertemp") for p in tmp_path.iterdir())

    def restore_program():
        strategy = ml.MultiWorkerMirroredStrategy()
        state = make_state(strategy)
        Checkpoint(**state).restore(latest_checkpoint(tmp_path)).assert_consumed()
        return ([float(c) for c in state["total"].values], float(state["total"].numpy()),
                [float(c) for c in state["mean"].values], state["w"].numpy().tolist())

    for components, total, means, w in SimCluster(workers=1, devices_per_worker=3).run(restore_program).values():
        assert components == pytest.approx([10 / 3] * 3) and total == pytest.approx(10.0)
        assert means == [2.5] * 3 and w == [0, 1, 2, 3]


def test_only_the_chief_saving_is_reported_as_a_hang(tmp_path):
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        state = make_state(strategy)
        if strategy.extended.should_checkpoint:
            Checkpoint(**state).save(tmp_path / "ckpt")
        return "done"

    result = SimCluster(workers=2).run(program)
    assert isinstance(result[0], errors.DeadlockError) and result[1] == "done"
    assert "waits for worker 1 in all_reduce(MEAN)" in str(result[0])


def test_crash_in_the_middle_of_a_save_leaves_the_previous_checkpoint_restorable(tmp_path):
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        state = make_state(strategy)
        manager = CheckpointManager(Checkpoint(**state), tmp_path, max_to_keep=3)
        manager.save()
        state["w"].assign(np.full(4, 9.0, np.float32))
        manager.save()
        return "saved twice"

    result = SimCluster(workers=2, faults=[Crash(0, during_save=2)]).run(program)
    assert isinstance(result[0], errors.SimulatedCrash)
    assert (tmp_path / "ckpt-2.npz").exists() and not (tmp_path / "ckpt-2.index.json").exists()
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-1")
    with pytest.raises(errors.NotFoundError, match="the save was interrupted"):
        Checkpoint(w=ml.Variable(np.zeros(4, np.float32))).restore(tmp_path / "ckpt-2")
    w = ml.Variable(np.zeros(4, np.float32))
    Checkpoint(w=w).restore(latest_checkpoint(tmp_path)).expect_partial()
    assert w.numpy().tolist() == [0, 1, 2, 3]


def test_manager_keeps_the_newest_and_restores_the_counter(tmp_path):
    v = ml.Variable(0.0)
    ckpt = Checkpoint(v=v)
    manager = CheckpointManager(ckpt, tmp_path, max_to_keep=2)
    for i in range(4):
        v.assign(float(i))
        manager.save()
    assert manager.checkpoints == [str(tmp_path / "ckpt-3"), str(tmp_path / "ckpt-4")]
    assert not (tmp_path / "ckpt-1.npz").exists() and not (tmp_path / "ckpt-2.index.json").exists()
    fresh = Checkpoint(v=ml.Variable(-1.0))
    assert CheckpointManager(fresh, tmp_path, max_to_keep=2).restore_or_initialize() == str(tmp_path / "ckpt-4")
    assert int(fresh.save_counter.numpy()) == 4 and float(fresh._roots["v"].numpy()) == 3.0


def test_corrupt_or_mismatched_checkpoints_fail_clearly(tmp_path):
    v = ml.Variable(np.ones(3, np.float32))
    path = Checkpoint(v=v).write(tmp_path / "a")
    data = Path(f"{path}.npz")
    data.write_bytes(data.read_bytes()[:-5] + b"xxxxx")
    with pytest.raises(errors.DataLossError, match="SHA-256"):
        Checkpoint(v=v).read(path)
    Checkpoint(v=v).write(tmp_path / "b")
    with pytest.raises(ValueError, match=r"^Received incompatible tensor with shape \(3,\) when attempting to restore "
                                         r"variable with shape \(4,\) and name Variable:0.\nFix:"):
        Checkpoint(v=ml.Variable(np.ones(4, np.float32))).read(tmp_path / "b")
    with ml.MirroredStrategy(["/cpu:0"]).scope():  # a distributed variable's restore fails in its assign
        mirrored = ml.Variable(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"^Cannot assign value to variable ' Variable:0': Shape mismatch.The variable "
                                         r"shape \(4,\), and the assigned value shape \(3,\) are incompatible.\nFix:"):
        Checkpoint(v=mirrored).read(tmp_path / "b")
    with pytest.raises(AssertionError, match=r"Found 1 Python objects that were not bound"):
        Checkpoint(other=ml.Variable(np.ones(3, np.float32))).read(tmp_path / "b").assert_consumed()


def test_object_arrays_are_never_unpickled(tmp_path):
    v = ml.Variable(np.ones(3, np.float32))
    path = Checkpoint(v=v).write(tmp_path / "c")
    manifest = json.loads(Path(f"{path}.index.json").read_text())
    buffer = io.BytesIO()
    np.savez(buffer, v0=np.array([{"evil": 1}], dtype=object))
    raw = buffer.getvalue()
    Path(f"{path}.npz").write_bytes(raw)
    import hashlib
    manifest["sha256"] = hashlib.sha256(raw).hexdigest()
    Path(f"{path}.index.json").write_text(json.dumps(manifest))
    with pytest.raises(errors.DataLossError, match="pickle"):
        Checkpoint(v=v).read(path)


def test_write_paths_follow_the_tutorial_helpers(tmp_path):
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            return ml.train.write_filepath(os.path.join(tmp_path, "model", "saved"))

    chief, other = SimCluster(workers=2).run(program).values()
    assert chief == os.path.join(tmp_path, "model", "saved")
    assert other == os.path.join(tmp_path, "model", "workertemp_1", "saved")


def test_checkpoint_keys_counter_and_nesting_follow_tf(tmp_path):
    """As TF 2.21: keys are ``<path>/.ATTRIBUTES/VARIABLE_VALUE``, a nested Checkpoint's objects are saved under
    its name, ``save_counter`` is an int64 variable that save() increments and restore() sets, and the given
    objects are attributes of the checkpoint."""
    v, w = ml.Variable(np.array([1.0, 2.0], np.float32)), ml.Variable(3, name="w")
    ckpt = Checkpoint(v=v, nested=Checkpoint(w=w))
    first, second = ckpt.save(tmp_path / "ckpt"), ckpt.save(tmp_path / "ckpt")
    assert list_variables(second) == [("_CHECKPOINTABLE_OBJECT_GRAPH", []), ("nested/w/.ATTRIBUTES/VARIABLE_VALUE", []),
                                      ("save_counter/.ATTRIBUTES/VARIABLE_VALUE", []),
                                      ("v/.ATTRIBUTES/VARIABLE_VALUE", [2])]
    assert load_variable(second, "save_counter/.ATTRIBUTES/VARIABLE_VALUE") == 2
    assert ckpt.save_counter.dtype == np.int64 and int(ckpt.save_counter.numpy()) == 2
    w.assign(9)
    ckpt.restore(first)
    assert int(w.numpy()) == 3 and int(ckpt.save_counter.numpy()) == 1
    assert ckpt.v is v
    fresh = Checkpoint(v=ml.Variable(np.zeros(2, np.float32)))
    with pytest.raises(AssertionError, match="nested/w"):
        fresh.restore(second).assert_consumed()
    fresh.restore(second).assert_existing_objects_matched()
    np.testing.assert_array_equal(fresh.v.numpy(), [1.0, 2.0])
    with pytest.raises(errors.NotFoundError, match="^Key nope not found in checkpoint"):
        load_variable(second, "nope")


def test_checkpoint_save_and_manager_state_files_follow_tf(tmp_path):
    # Checkpoint.save records only its newest path, and a manager never adopts (deletes) those saves.
    ckpt = Checkpoint(v=ml.Variable(1.0))
    for _ in range(3):
        ckpt.save(tmp_path / "ckpt")
    assert (tmp_path / "checkpoint").read_text() == ('model_checkpoint_path: "ckpt-3"\n'
                                                     'all_model_checkpoint_paths: "ckpt-3"\n')
    manager = CheckpointManager(ckpt, tmp_path, max_to_keep=1)
    assert manager.checkpoints == [] and manager.latest_checkpoint == str(tmp_path / "ckpt-3")
    manager.save()
    assert sorted(p.name for p in tmp_path.glob("*.index.json")) == [f"ckpt-{n}.index.json" for n in (1, 2, 3, 4)]
    # A manager's own saves carry timestamps, so the next manager takes them over and rotates them.
    manager.save()
    assert "all_model_checkpoint_timestamps" in (tmp_path / "checkpoint").read_text()
    again = CheckpointManager(ckpt, tmp_path, max_to_keep=1)
    assert again.checkpoints == [str(tmp_path / "ckpt-5")]
    again.save()
    assert not (tmp_path / "ckpt-5.index.json").exists() and (tmp_path / "ckpt-1.index.json").exists()
    with pytest.raises(ValueError, match="Expected a positive integer or `None` for `max_to_keep`, got 0"):
        CheckpointManager(ckpt, tmp_path, max_to_keep=0)


def test_manager_keeps_one_checkpoint_per_interval_and_honours_checkpoint_interval(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("mirrorlab.runtime.clock.now", lambda: clock[0])
    step = ml.Variable(np.int64(0))
    manager = CheckpointManager(Checkpoint(v=ml.Variable(1.0)), tmp_path, max_to_keep=1,
                                keep_checkpoint_every_n_hours=1, step_counter=step, checkpoint_interval=2)
    saved = []
    for s in range(6):
        step.assign(np.int64(s))
        clock[0] += 1800.0  # half an hour per step
        saved.append(manager.save())
    assert [p and Path(p).name for p in saved] == ["ckpt-1", None, "ckpt-2", None, "ckpt-3", None]
    kept = sorted(p.name for p in tmp_path.glob("*.index.json"))
    assert kept == ["ckpt-2.index.json", "ckpt-3.index.json"]  # ckpt-1 is < 1 h after the start: deleted
    with pytest.raises(ValueError, match="`step_counter` should be passed"):
        CheckpointManager(Checkpoint(), tmp_path, max_to_keep=1, checkpoint_interval=2)


def test_restore_matching_follows_tf_including_the_save_counter_and_late_variables(tmp_path):
    written = Checkpoint(v=ml.Variable(1.0)).write(tmp_path / "w")
    with pytest.raises(AssertionError, match=r"not bound to checkpointed values.*'save_counter:0'"):
        Checkpoint(v=ml.Variable(0.0)).restore(written).assert_consumed()  # restore creates the counter
    saved = Checkpoint(v=ml.Variable(2.0)).save(tmp_path / "s")
    status = Checkpoint(v=ml.Variable(0.0)).read(saved)
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match=r"Unresolved object in checkpoint \(root\)\.save_counter"):
        status.assert_consumed()
    Checkpoint(q=ml.Variable(0.0)).restore(saved).assert_nontrivial_match()  # the counter matched
    with pytest.raises(AssertionError, match="Nothing except the root object matched"):
        Checkpoint(q=ml.Variable(0.0)).read(saved).assert_nontrivial_match()
    # Values read before their variable exists are restored when it is attached.
    late = Checkpoint()
    status = late.restore(saved)
    late.v = ml.Variable(0.0)
    assert late.v.numpy() == 2.0 and isinstance(late.v.numpy(), np.float32)
    status.assert_consumed()
    reader = Checkpoint(v=ml.Variable(0.0))
    reader.read(saved)
    assert int(reader.save_counter.numpy()) == 1  # the counter created after read takes the saved count
    with pytest.raises(AssertionError, match=r"No checkpoint specified \(save_path=None\)"):
        Checkpoint(v=ml.Variable(0.0)).restore(None).assert_consumed()


def test_restore_errors_follow_tf(tmp_path):
    path = Checkpoint(a=ml.Variable(1.0, dtype=np.float64), b=ml.Variable(1.0)).write(tmp_path / "w")
    a, b = ml.Variable(0.0, dtype=np.float64), ml.Variable(0.0, dtype=np.float64)
    with pytest.raises(errors.InvalidArgumentError, match=r"tensor_name = b/.ATTRIBUTES/VARIABLE_VALUE; expected "
                                                          r"dtype double does not equal original dtype float"):
        Checkpoint(a=a, b=b).read(path)
    assert a.numpy() == 0.0  # checked before anything was assigned
    with pytest.raises(errors.DataLossError, match="Is a directory"):
        Checkpoint(a=a).restore(tmp_path)
    with pytest.raises(errors.NotFoundError, match=r"^Error when restoring from checkpoint or SavedModel at .*nope: "
                                                   r"Unsuccessful TensorSliceReader"):
        Checkpoint(a=a).restore(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file or checkpoints in given directory"):
        list_variables(empty)
    with pytest.raises(ValueError, match="was expecting v to be a trackable object"):
        Checkpoint(v=np.zeros(2))


def test_workers_given_the_chiefs_directory_keep_the_same_manager_books(tmp_path):
    """Every worker's manager reports the chief's paths (TF's workers would write them all); only the chief
    writes and rotates the files, and a non-chief's temporary copies are gone."""
    def program():
        strategy = ml.MultiWorkerMirroredStrategy()
        state = make_state(strategy)
        manager = CheckpointManager(Checkpoint(**state), tmp_path, max_to_keep=2)
        returned = [manager.save() for _ in range(3)]
        return returned, manager.latest_checkpoint, manager.checkpoints

    chief, other = SimCluster(workers=2).run(program).values()
    assert chief == other == ([str(tmp_path / f"ckpt-{n}") for n in (1, 2, 3)], str(tmp_path / "ckpt-3"),
                              [str(tmp_path / "ckpt-2"), str(tmp_path / "ckpt-3")])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint", "ckpt-2.index.json", "ckpt-2.npz", "ckpt-3.index.json", "ckpt-3.npz"]


def test_a_tensorflow_checkpoint_is_named_as_such(tmp_path):
    (tmp_path / "ckpt-1.index").write_bytes(b"")
    with pytest.raises(errors.NotFoundError, match=r"ckpt-1.index is a TensorFlow checkpoint"):
        load_variable(tmp_path / "ckpt-1", "v/.ATTRIBUTES/VARIABLE_VALUE")


def test_variables_created_after_a_restore_get_their_values_through_restore_on_create(tmp_path):
    """TF's restore-on-create: a restored object that builds its variables later (a Keras layer in ``build``)
    gets the saved values once it calls ``restore_on_create``; a nested Checkpoint does so on attribute assignment."""
    from mirrorlab.train.checkpoint import restore_on_create

    class Lazy:
        """Builds its variable on demand."""

        def build(self):
            self.kernel = ml.Variable(np.zeros(2, np.float32))
            restore_on_create(self)

    saved = Lazy()
    saved.build()
    saved.kernel.assign(np.array([1.0, 2.0], np.float32))
    path = Checkpoint(model=saved, inner=Checkpoint(w=ml.Variable(7.0))).save(tmp_path / "ckpt")
    model = Lazy()
    late = Checkpoint(model=model, inner=Checkpoint())
    status = late.restore(path)
    with pytest.raises(AssertionError, match="Unresolved object"):
        status.assert_consumed()
    model.build()
    late.inner.w = ml.Variable(0.0)
    assert model.kernel.numpy().tolist() == [1.0, 2.0] and late.inner.w.numpy() == 7.0
    status.assert_consumed()
    # The restored objects keep the pending values, as in TF: a temporary Checkpoint is enough.
    other = Lazy()
    Checkpoint(model=other).restore(path)
    gc.collect()
    other.build()
    assert other.kernel.numpy().tolist() == [1.0, 2.0]


def test_state_file_escapes_names_as_tf_and_reads_tf_text_format(tmp_path):
    """Quotes and backslashes are escaped as TF's text proto writes them (UTF-8 kept); comments, missing spaces
    and octal escapes are read as TF reads them."""
    directory = tmp_path / 'dé "q"'
    manager = CheckpointManager(Checkpoint(v=ml.Variable(1.0)), directory, max_to_keep=1, checkpoint_name='n"é\\')
    path = manager.save()
    assert (directory / "checkpoint").read_bytes().startswith('model_checkpoint_path: "n\\"é\\\\-1"\n'.encode())
    assert latest_checkpoint(directory) == path == str(directory / 'n"é\\-1')
    (tmp_path / "checkpoint").write_text('# written by hand\nmodel_checkpoint_path:"d\\303\\251"  \n')
    assert ml.train.get_checkpoint_state(tmp_path).model_checkpoint_path == str(tmp_path / "dé")


def test_a_save_without_on_read_variables_is_no_collective(tmp_path):
    """As TF: mirrored variables save their primary copy, so the chief may save alone; a worker handed the
    chief's path then writes the same files as given (atomically)."""
    def program(chief_only):
        strategy = ml.MultiWorkerMirroredStrategy()
        with strategy.scope():
            w = ml.Variable(np.arange(3, dtype=np.float32))
        if chief_only and not strategy.extended.should_checkpoint:
            return None
        return CheckpointManager(Checkpoint(w=w), tmp_path / str(chief_only), max_to_keep=1).save()

    for chief_only in (True, False):
        results = SimCluster(workers=2).run(lambda: program(chief_only)).values()
        assert results[0] == str(tmp_path / str(chief_only) / "ckpt-1")
        assert load_variable(tmp_path / str(chief_only), "w/.ATTRIBUTES/VARIABLE_VALUE").tolist() == [0, 1, 2]


def test_classes_can_declare_that_tf_does_not_track_them(tmp_path):
    """As TF with a Keras 3 metric: refused as a Checkpoint argument, kept but not saved as an attribute."""
    class Untracked:
        _checkpoint_untrackable = True

        def __init__(self):
            self.total = ml.Variable(1.0)

        def __repr__(self):
            return "<Untracked>"

    with pytest.raises(ValueError, match="^`Checkpoint` was expecting metric to be a trackable object .* got <Untracked>"):
        Checkpoint(metric=Untracked())
    ckpt = Checkpoint(v=ml.Variable(1.0))
    ckpt.metric = Untracked()
    assert isinstance(ckpt.metric, Untracked)
    assert [key for key, _ in list_variables(ckpt.save(tmp_path / "ckpt"))] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/.ATTRIBUTES/VARIABLE_VALUE", "v/.ATTRIBUTES/VARIABLE_VALUE"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="./Sa", max_size=6), min_size=1, max_size=3))
def test_escaped_names_read_back_as_given(names):
    """A path of escaped names (TF's ``..`` and ``.S``) shows each name as given, joined by dots, and escaping
    never leaves a ``/`` inside a name, so a name never splits into two path segments."""
    path = "/".join(escape_name(name) for name in names)
    assert path.count("/") == len(names) - 1
    assert unescape_path(path) == ".".join(names)


def test_names_with_slashes_and_dots_round_trip(tmp_path):
    """Keys of names holding ``/`` and ``.`` are TF's escaped ones, and restore matches them by name."""
    saved = Checkpoint(t={"x/y": ml.Variable(1.0), "x.y": ml.Variable(2.0), "x.Sy": ml.Variable(3.0)})
    path = saved.write(tmp_path / "w")
    assert [name for name, _ in list_variables(path)][1:] == [
        "t/x..Sy/.ATTRIBUTES/VARIABLE_VALUE", "t/x..y/.ATTRIBUTES/VARIABLE_VALUE", "t/x.Sy/.ATTRIBUTES/VARIABLE_VALUE"]
    target = {"x/y": ml.Variable(0.0), "x.y": ml.Variable(0.0), "x.Sy": ml.Variable(0.0)}
    Checkpoint(t=target).read(path).assert_consumed()
    assert [float(v.numpy()) for v in target.values()] == [1.0, 2.0, 3.0]
