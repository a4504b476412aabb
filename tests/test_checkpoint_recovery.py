"""CheckpointManager after an interrupted save (issue 26): the state file is recorded before old checkpoints are
deleted, a new manager finds the newest complete checkpoint whatever the state file says and removes leftovers,
and a simulated crash in each window of a save still restores."""

from __future__ import annotations

import logging

import pytest

import mirrorlab.tf as tf
from mirrorlab import errors
from mirrorlab.sim import Crash, SimCluster


def manager_of(directory, value=0.0, max_to_keep=1):
    """A manager of one float variable ``v``, and the variable."""
    v = tf.Variable(value)
    return tf.train.CheckpointManager(tf.train.Checkpoint(v=v), directory, max_to_keep=max_to_keep), v


def test_the_state_names_the_new_checkpoint_before_the_old_one_is_deleted(tmp_path, monkeypatch):
    # The minimal case: a kill just after the sweep of a second save left ckpt-2 on disk and no latest.
    manager, v = manager_of(tmp_path)
    manager.save()
    seen = []

    def unlink(path, missing_ok=False):
        seen.append((path.name, tf.train.latest_checkpoint(tmp_path)))
        original(path, missing_ok=missing_ok)

    original = type(tmp_path).unlink
    monkeypatch.setattr(type(tmp_path), "unlink", unlink)
    manager.save()
    assert seen == [("ckpt-1.index.json", str(tmp_path / "ckpt-2")), ("ckpt-1.npz", str(tmp_path / "ckpt-2"))]


def test_a_new_manager_finds_a_checkpoint_newer_than_the_state_file(tmp_path):
    manager, v = manager_of(tmp_path)
    manager.save()
    state, manifest = (tmp_path / "checkpoint").read_bytes(), (tmp_path / "ckpt-1.index.json").read_bytes()
    v.assign(5.0)
    manager.save()
    # As the old order left it when killed in the middle of the sweep: the state file still names ckpt-1, whose
    # data file is deleted and whose manifest is not yet.
    (tmp_path / "checkpoint").write_bytes(state)
    (tmp_path / "ckpt-1.index.json").write_bytes(manifest)
    fresh, w = manager_of(tmp_path)
    assert fresh.latest_checkpoint == str(tmp_path / "ckpt-2") == tf.train.latest_checkpoint(tmp_path)
    assert not (tmp_path / "ckpt-1.index.json").exists()  # the half-deleted one is gone
    fresh.restore_or_initialize()
    assert float(w.numpy()) == 5.0
    fresh.save()  # ckpt-2, adopted, is rotated out like any other
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == ["ckpt-3.index.json", "ckpt-3.npz"]


def test_a_missing_or_damaged_state_file_is_recovered(tmp_path, caplog):
    manager, v = manager_of(tmp_path, 3.0)
    manager.save()
    for text in ("all_model_checkpoint_timestamps: not-a-number\nmodel_checkpoint_path: \"ckpt-1\"\n",
                 "all_model_checkpoint_paths: \"ckpt-1\"\n", "\x00\x01garbage", None):
        if text is None:
            (tmp_path / "checkpoint").unlink()
        else:
            (tmp_path / "checkpoint").write_text(text)
        with caplog.at_level(logging.WARNING, logger="mirrorlab"):
            fresh, _ = manager_of(tmp_path)
        assert fresh.latest_checkpoint == str(tmp_path / "ckpt-1")
        assert tf.train.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-1")  # recorded again
    assert "a timestamp is not a number" in caplog.text and "Invalid checkpoint state" in caplog.text
    (tmp_path / "checkpoint").write_text("all_model_checkpoint_timestamps: x\n")
    assert tf.train.get_checkpoint_state(tmp_path) is None  # TF logs the parse error and ignores the file


def test_leftovers_of_interrupted_saves_are_removed_and_damaged_checkpoints_skipped(tmp_path):
    manager, v = manager_of(tmp_path, max_to_keep=3)
    manager.save()
    v.assign(2.0)
    manager.save()
    for name in (".ckpt-3.npz.tmp-0123456789ab", ".checkpoint.tmp-ba9876543210", "ckpt-4.npz", "ckpt-5.index.json"):
        (tmp_path / name).write_bytes(b"partial")
    (tmp_path / "notes.npz").write_bytes(b"the user's")  # not a checkpoint file: left alone
    data = tmp_path / "ckpt-2.npz"
    data.write_bytes(data.read_bytes()[:-3] + b"xyz")  # the newest complete one is damaged
    fresh, w = manager_of(tmp_path, max_to_keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint", "ckpt-1.index.json", "ckpt-1.npz", "ckpt-2.index.json", "ckpt-2.npz", "notes.npz"]
    assert fresh.latest_checkpoint == str(tmp_path / "ckpt-1")
    with pytest.raises(errors.DataLossError, match="ckpt-2.npz does not match its manifest"):
        tf.train.Checkpoint(v=w).read(tmp_path / "ckpt-2")


@pytest.mark.parametrize("window", ["data", "manifest", "sweep"])
def test_a_simulated_crash_in_each_window_of_a_save_still_restores(tmp_path, window):
    def program():
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():  # an ON_READ SUM variable makes every save a collective
            v = tf.Variable(0.0)
            total = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                                aggregation=tf.VariableAggregation.SUM)
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=v, total=total), tmp_path, max_to_keep=1)
        restored = manager.restore_or_initialize()
        for value in (1.0, 2.0, 3.0):
            v.assign(value)
            manager.save()
        return restored, float(v.numpy())

    crashed = SimCluster(workers=2, faults=[Crash(0, during_save=3, window=window)]).run(program)
    assert isinstance(crashed[0], errors.SimulatedCrash) and "save #3" in str(crashed[0])
    resumed = SimCluster(workers=2).run(program)
    latest = str(tmp_path / ("ckpt-2" if window == "data" else "ckpt-3"))
    assert resumed[0][0] == resumed[1][0] == latest


def test_crash_windows_are_validated():
    assert repr(Crash(1, during_save=2, window="sweep")) == "Crash(worker=1, during_save=2, window='sweep')"
    with pytest.raises(ValueError, match="window must be one of 'data', 'manifest', 'sweep'"):
        Crash(0, during_save=1, window="state")
    with pytest.raises(ValueError, match="window= applies to during_save= only"):
        Crash(0, at_step=1, window="sweep")
