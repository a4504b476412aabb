"""TensorBoard event files and the Keras TensorBoard callback on mirrorlab and simulated clusters."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import mirrorlab.tf as ml
from mirrorlab.tf import keras
from mirrorlab.tf.io import event_file
from mirrorlab.tf.io.event_file import EventFileWriter, read_events
from mirrorlab.sim import SimCluster

X = np.random.default_rng(2).standard_normal((16, 3)).astype(np.float32)
Y = X.sum(axis=1, keepdims=True)


def test_crc32c_is_castagnolis_checksum_masked_as_tfrecord_does():
    crc = 0xE3069283  # CRC-32C of b"123456789", the standard check value
    assert event_file._masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_scalars_round_trip_and_a_corrupt_record_is_refused(tmp_path):
    writer = EventFileWriter(str(tmp_path))
    writer.scalar("epoch_loss", 0.25, 0)
    writer.scalar("epoch_loss", -1.5, 7)
    writer.close()
    events = read_events(writer.path)
    assert events[0].file_version == "brain.Event:2"
    assert [(e.step, e.scalars) for e in events[1:]] == [(0, {"epoch_loss": 0.25}), (7, {"epoch_loss": -1.5})]
    data = bytearray(open(writer.path, "rb").read())
    data[-6] ^= 0xFF
    open(writer.path, "wb").write(bytes(data))
    with pytest.raises(ValueError, match="checksum mismatch"):
        read_events(writer.path)
    with pytest.raises(ValueError, match="closed"):
        writer.scalar("late", 1.0, 8)


def _tensorboard_program(log_dir):
    strategy = ml.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    history = model.fit(ml.data.Dataset.from_tensor_slices((X, Y)).batch(8), epochs=3, verbose=0,
                        callbacks=[keras.callbacks.TensorBoard(log_dir)])
    return history.history["loss"]


def test_every_simulated_worker_writes_its_own_event_file_with_the_epoch_losses(tmp_path):
    losses = SimCluster(workers=2, devices_per_worker=1).run(_tensorboard_program, str(tmp_path)).values()
    files = sorted(glob.glob(os.path.join(tmp_path, "train", "events.out.tfevents.*")))
    assert len(files) == 2  # one per worker, as Keras 3 writes (no chief-only logging)
    expected = list(losses)[0]
    for path in files:
        written = [e.scalars["epoch_loss"] for e in read_events(path) if "epoch_loss" in e.scalars]
        np.testing.assert_allclose(written, expected, rtol=1e-6)
        steps = [e.step for e in read_events(path) if "epoch_learning_rate" in e.scalars]
        assert steps == [0, 1, 2]


def test_unavailable_tensorboard_features_are_refused_with_the_fix():
    with pytest.raises(NotImplementedError, match="(?s)histogram_freq, write_images.*Fix: leave"):
        keras.callbacks.TensorBoard("logs", histogram_freq=1, write_images=True)
    with pytest.raises(ValueError, match="update_freq='often'"):
        keras.callbacks.TensorBoard("logs", update_freq="often")


@pytest.mark.tensorflow
def test_tensorflow_reads_the_event_files(tmp_path):
    tf = pytest.importorskip("tensorflow")
    writer = EventFileWriter(str(tmp_path))
    writer.scalar("epoch_mae", 0.75, 3)
    writer.close()
    events = list(tf.compat.v1.train.summary_iterator(writer.path))
    assert events[0].file_version == "brain.Event:2"
    value = events[1].summary.value[0]
    assert (events[1].step, value.tag, value.metadata.plugin_data.plugin_name) == (3, "epoch_mae", "scalars")
    assert float(tf.make_ndarray(value.tensor)) == 0.75
