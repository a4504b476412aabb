"""TensorFlow's multi-worker tutorials (Keras fit, and the custom training loop) run on a simulated cluster with
only the import changed."""

from __future__ import annotations

import sys
import types

import numpy as np

import mirrorlab.tf as ml
from mirrorlab.sim import SimCluster

# From tensorflow/docs site/en/tutorials/distribute/multi_worker_with_keras.ipynb (mnist_setup.py and the
# worker's main), with `import tensorflow as tf` replaced by `import mirrorlab.tf as tf`.
TUTORIAL = '''
import json
import os

import mirrorlab.tf as tf
import numpy as np


def mnist_dataset(batch_size):
  (x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
  # The `x` arrays are in uint8 and have values in the [0, 255] range.
  # You need to convert them to float32 with values in the [0, 1] range.
  x_train = x_train / np.float32(255)
  y_train = y_train.astype(np.int64)
  train_dataset = tf.data.Dataset.from_tensor_slices(
      (x_train, y_train)).shuffle(60000).repeat().batch(batch_size)
  return train_dataset


def build_and_compile_cnn_model():
  model = tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(28, 28)),
      tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
      tf.keras.layers.Conv2D(32, 3, activation='relu'),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(128, activation='relu'),
      tf.keras.layers.Dense(10)
  ])
  model.compile(
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      optimizer=tf.keras.optimizers.SGD(learning_rate=0.001),
      metrics=['accuracy'])
  return model


per_worker_batch_size = 64
tf_config = json.loads(os.environ['TF_CONFIG'])
num_workers = len(tf_config['cluster']['worker'])

strategy = tf.distribute.MultiWorkerMirroredStrategy()

global_batch_size = per_worker_batch_size * num_workers
multi_worker_dataset = mnist_dataset(global_batch_size)

with strategy.scope():
  # Model building/compiling need to be within `strategy.scope()`.
  multi_worker_model = build_and_compile_cnn_model()

history = multi_worker_model.fit(multi_worker_dataset, epochs=3, steps_per_epoch=STEPS)
'''


def run_tutorial(steps: int) -> list:
    namespace = {"__name__": "tutorial", "STEPS": steps}
    exec(compile(TUTORIAL, "multi_worker_with_keras", "exec"), namespace)  # noqa: S102
    return [w.numpy() for w in namespace["multi_worker_model"].weights] + [namespace["history"].history]


def write_mnist(tmp_path, monkeypatch, count: int = 512) -> None:
    """A small learnable stand-in for MNIST where ``keras.datasets.mnist.load_data`` looks (no download)."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, count)
    images = (rng.random((count, 28, 28)) * 60 + labels[:, None, None] * 19).astype(np.uint8)
    (tmp_path / "datasets").mkdir()
    np.savez(tmp_path / "datasets" / "mnist.npz", x_train=images, y_train=labels, x_test=images[:8],
             y_test=labels[:8])
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))


def test_multi_worker_keras_tutorial_runs_unchanged(tmp_path, monkeypatch):
    write_mnist(tmp_path, monkeypatch)
    results = SimCluster(workers=2, seed=3).run(run_tutorial, 4).values()
    *weights0, history0 = results[0]
    *weights1, history1 = results[1]
    assert len(history0["loss"]) == 3 and history0 == history1
    for a, b in zip(weights0, weights1):
        np.testing.assert_array_equal(a, b)
    assert history0["loss"][-1] < history0["loss"][0]


# Both tutorials' helpers that give non-chief workers a temporary path of their own.
WRITE_FILEPATH = '''
def _get_temp_dir(dirpath, task_id):
  base_dirpath = 'workertemp_' + str(task_id)
  temp_dir = os.path.join(dirpath, base_dirpath)
  tf.io.gfile.makedirs(temp_dir)
  return temp_dir

def write_filepath(filepath, task_type, task_id):
  dirpath = os.path.dirname(filepath)
  base = os.path.basename(filepath)
  if not _is_chief(task_type, task_id):
    dirpath = _get_temp_dir(dirpath, task_id)
  return os.path.join(dirpath, base)
'''


# From tensorflow/docs site/en/tutorials/distribute/multi_worker_with_ctl.ipynb (mnist.py and main.py), with
# `import tensorflow as tf` replaced by `import mirrorlab.tf as tf` and the epoch/step counts made parameters.
CTL_MNIST = '''
import mirrorlab.tf as tf
import numpy as np

def mnist_dataset():
  (x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
  x_train = x_train / np.float32(255)
  y_train = y_train.astype(np.int64)
  train_dataset = tf.data.Dataset.from_tensor_slices(
      (x_train, y_train)).shuffle(60000)
  return train_dataset

def dataset_fn(global_batch_size, input_context):
  batch_size = input_context.get_per_replica_batch_size(global_batch_size)
  dataset = mnist_dataset()
  dataset = dataset.shard(input_context.num_input_pipelines,
                          input_context.input_pipeline_id)
  dataset = dataset.batch(batch_size)
  return dataset

def build_cnn_model():
  regularizer = tf.keras.regularizers.L2(1e-5)
  return tf.keras.Sequential([
      tf.keras.Input(shape=(28, 28)),
      tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
      tf.keras.layers.Conv2D(32, 3,
                             activation='relu',
                             kernel_regularizer=regularizer),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(128,
                            activation='relu',
                            kernel_regularizer=regularizer),
      tf.keras.layers.Dense(10, kernel_regularizer=regularizer)
  ])
'''

CTL_MAIN = '''
import os
import json
import mirrorlab.tf as tf
import mnist
from multiprocessing import util

per_worker_batch_size = 64
tf_config = json.loads(os.environ['TF_CONFIG'])
num_workers = len(tf_config['cluster']['worker'])
global_batch_size = per_worker_batch_size * num_workers

num_epochs = NUM_EPOCHS
num_steps_per_epoch = NUM_STEPS

def _is_chief(task_type, task_id):
  return task_type is None or task_type == 'chief' or (task_type == 'worker' and
                                                       task_id == 0)
''' + WRITE_FILEPATH + '''
checkpoint_dir = os.path.join(util.get_temp_dir(), 'ckpt')

strategy = tf.distribute.MultiWorkerMirroredStrategy()

with strategy.scope():
  multi_worker_model = mnist.build_cnn_model()

  multi_worker_dataset = strategy.distribute_datasets_from_function(
      lambda input_context: mnist.dataset_fn(global_batch_size, input_context))
  optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.001)
  train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(
      name='train_accuracy')

@tf.function
def train_step(iterator):

  def step_fn(inputs):
    x, y = inputs
    with tf.GradientTape() as tape:
      predictions = multi_worker_model(x, training=True)
      per_batch_loss = tf.keras.losses.SparseCategoricalCrossentropy(
          from_logits=True,
          reduction=tf.keras.losses.Reduction.NONE)(y, predictions)
      loss = tf.nn.compute_average_loss(
          per_batch_loss, global_batch_size=global_batch_size)
      model_losses = multi_worker_model.losses
      if model_losses:
        loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))

    grads = tape.gradient(loss, multi_worker_model.trainable_variables)
    optimizer.apply_gradients(
        zip(grads, multi_worker_model.trainable_variables))
    train_accuracy.update_state(y, predictions)

    return loss

  per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
  return strategy.reduce(
      tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

epoch = tf.Variable(
    initial_value=tf.constant(0, dtype=tf.dtypes.int64), name='epoch')
step_in_epoch = tf.Variable(
    initial_value=tf.constant(0, dtype=tf.dtypes.int64),
    name='step_in_epoch')

task_type, task_id = (strategy.cluster_resolver.task_type,
                      strategy.cluster_resolver.task_id)

checkpoint = tf.train.Checkpoint(
    model=multi_worker_model, epoch=epoch, step_in_epoch=step_in_epoch)

write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id)
checkpoint_manager = tf.train.CheckpointManager(
    checkpoint, directory=write_checkpoint_dir, max_to_keep=1)

latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
if latest_checkpoint:
  checkpoint.restore(latest_checkpoint)

while epoch.numpy() < num_epochs:
  iterator = iter(multi_worker_dataset)
  total_loss = 0.0
  num_batches = 0

  while step_in_epoch.numpy() < num_steps_per_epoch:
    total_loss += train_step(iterator)
    num_batches += 1
    step_in_epoch.assign_add(1)

  train_loss = total_loss / num_batches
  print('Epoch: %d, accuracy: %f, train_loss: %f.'
                %(epoch.numpy(), train_accuracy.result(), train_loss))

  train_accuracy.reset_states()

  checkpoint_manager.save()
  if not _is_chief(task_type, task_id):
    tf.io.gfile.rmtree(write_checkpoint_dir)

  epoch.assign_add(1)
  step_in_epoch.assign(0)
'''


def run_ctl_tutorial(epochs: int, steps: int) -> list:
    namespace = {"__name__": "ctl_tutorial", "NUM_EPOCHS": epochs, "NUM_STEPS": steps}
    exec(compile(CTL_MAIN, "multi_worker_with_ctl", "exec"), namespace)  # noqa: S102
    return [w.numpy() for w in namespace["multi_worker_model"].weights] + [int(namespace["epoch"].numpy())]


def test_multi_worker_custom_training_loop_tutorial_runs_unchanged(tmp_path, monkeypatch, capsys):
    """The custom-loop tutorial trains with GradientTape on 2 simulated workers and checkpoints each epoch: the
    chief to checkpoint_dir, the other worker to a temporary directory it deletes. (Its resume path divides by
    zero batches after restoring an end-of-epoch step count, on TF as here, so it is not run.)"""
    write_mnist(tmp_path, monkeypatch)
    mnist = types.ModuleType("mnist")
    exec(compile(CTL_MNIST, "mnist", "exec"), mnist.__dict__)  # noqa: S102
    monkeypatch.setitem(sys.modules, "mnist", mnist)
    monkeypatch.setattr("multiprocessing.util.get_temp_dir", lambda: str(tmp_path))
    first, second = SimCluster(workers=2, seed=1).run(run_ctl_tutorial, 2, 3).values()
    printed = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("Epoch: 0,") for line in printed) == 2
    assert sum(line.startswith("Epoch: 1,") for line in printed) == 2
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    checkpoint_dir = tmp_path / "ckpt"
    latest = ml.train.latest_checkpoint(str(checkpoint_dir))
    assert latest == str(checkpoint_dir / "ckpt-2")
    assert not (checkpoint_dir / "workertemp_1").exists()
    assert int(ml.train.load_variable(latest, "epoch/.ATTRIBUTES/VARIABLE_VALUE")) == 1
    assert int(ml.train.load_variable(latest, "step_in_epoch/.ATTRIBUTES/VARIABLE_VALUE")) == 3
    kernel = ml.train.load_variable(latest, "model/_functional/_operations/2/_kernel/.ATTRIBUTES/VARIABLE_VALUE")
    np.testing.assert_array_equal(kernel, first[0])


# The tutorial's "Model saving and loading" section, after the training above (same worker). Keras 3 (TF 2.21)
# refuses the tutorial's extensionless '/tmp/keras-model' (it asks for a `.keras` path; mirrorlab raises the same
# error), so the path ends in `.keras`. One all-reduce before loading stands for the tutorial's shared filesystem
# being written before anyone reads it: the simulated workers interleave within one process.
SAVING = '''
def _is_chief(task_type, task_id):
  return (task_type == 'worker' and task_id == 0) or task_type is None

''' + WRITE_FILEPATH + '''
task_type, task_id = (strategy.cluster_resolver.task_type,
                      strategy.cluster_resolver.task_id)
write_model_path = write_filepath(model_path, task_type, task_id)

multi_worker_model.save(write_model_path)

if not _is_chief(task_type, task_id):
  tf.io.gfile.rmtree(os.path.dirname(write_model_path))

strategy.reduce("SUM", strategy.run(lambda: 1.0), axis=None)  # (see above: every worker has saved)
loaded_model = tf.keras.models.load_model(model_path)

# Now that the model is restored, and can continue with the training.
loaded_history = loaded_model.fit(single_worker_dataset, epochs=2, steps_per_epoch=2)
'''

# The tutorial's "Checkpoint saving and restoring" section, run after SAVING.
CHECKPOINTING = '''
checkpoint = tf.train.Checkpoint(model=multi_worker_model)

write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id)
checkpoint_manager = tf.train.CheckpointManager(
    checkpoint, directory=write_checkpoint_dir, max_to_keep=1)

checkpoint_manager.save()
if not _is_chief(task_type, task_id):
  tf.io.gfile.rmtree(write_checkpoint_dir)

latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
checkpoint.restore(latest_checkpoint)
resumed_history = multi_worker_model.fit(multi_worker_dataset, epochs=2, steps_per_epoch=2)
'''


def run_tutorial_and_saving(steps: int, model_path: str, checkpoint_dir: str) -> dict:
    namespace = {"__name__": "tutorial", "STEPS": steps, "model_path": model_path, "checkpoint_dir": checkpoint_dir}
    exec(compile(TUTORIAL, "multi_worker_with_keras", "exec"), namespace)  # noqa: S102
    namespace["single_worker_dataset"] = namespace["mnist_dataset"](8)
    exec(compile(SAVING, "multi_worker_with_keras (saving)", "exec"), namespace)  # noqa: S102
    trained = [w.numpy() for w in namespace["multi_worker_model"].weights]
    exec(compile(CHECKPOINTING, "multi_worker_with_keras (checkpointing)", "exec"), namespace)  # noqa: S102
    loaded = namespace["loaded_model"]
    return {"trained": trained, "resumed": [w.numpy() for w in namespace["multi_worker_model"].weights],
            "loaded_type": type(loaded).__name__, "optimizer": type(loaded.optimizer).__name__,
            "iterations": int(loaded.optimizer.iterations.numpy()) - 4,  # (the 2 x 2 steps after loading)
            "loaded_history": namespace["loaded_history"].history,
            "latest_checkpoint": namespace["latest_checkpoint"],
            "resumed_history": namespace["resumed_history"].history}


def test_multi_worker_keras_tutorial_saves_and_loads_the_model(tmp_path, monkeypatch):
    write_mnist(tmp_path, monkeypatch)
    model_path = str(tmp_path / "models" / "keras-model.keras")
    (tmp_path / "models").mkdir()
    checkpoint_dir = str(tmp_path / "models" / "ckpt")
    # The tutorial races: the non-chief reads the latest checkpoint with no collective after the chief's save, so
    # under some interleavings (seeds) it reads none yet, as in TF. This seed has the chief save first.
    results = SimCluster(workers=2, seed=0).run(run_tutorial_and_saving, 3, model_path, checkpoint_dir).values()
    # (the tutorial deletes the non-chief's checkpoint directory, not the empty workertemp_1 around it)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["ckpt", "keras-model.keras", "workertemp_1"]
    assert not any((tmp_path / "models" / "workertemp_1").iterdir())
    assert results[0]["latest_checkpoint"] == checkpoint_dir + "/ckpt-1"
    assert results[1]["latest_checkpoint"] == checkpoint_dir + "/ckpt-1"
    assert results[0]["resumed_history"] == results[1]["resumed_history"]
    assert len(results[0]["resumed_history"]["loss"]) == 2
    assert not np.array_equal(results[0]["resumed"][0], results[0]["trained"][0])  # (the resumed fit trained on)
    for result in results:
        for a, b in zip(result["trained"] + result["resumed"], results[0]["trained"] + results[0]["resumed"]):
            np.testing.assert_array_equal(a, b)
        assert (result["loaded_type"], result["optimizer"], result["iterations"]) == ("Sequential", "SGD", 9)  # 3 epochs of 3 steps
        assert len(result["loaded_history"]["loss"]) == 2
    reloaded = ml.keras.models.load_model(model_path)
    for a, b in zip(reloaded.get_weights(), results[0]["trained"]):
        np.testing.assert_array_equal(a, b)
