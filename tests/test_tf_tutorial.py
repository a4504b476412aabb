"""TensorFlow's multi-worker Keras tutorial runs on a simulated cluster with only the import changed."""

from __future__ import annotations

import numpy as np

from mirrorlab.sim import SimCluster

# From tensorflow/docs site/en/tutorials/distribute/multi_worker_with_keras.ipynb (mnist_setup.py and the
# worker's main), with `import tensorflow as tf` replaced by `import mirrorlab as tf`.
TUTORIAL = '''
import json
import os

import mirrorlab as tf
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


def test_multi_worker_keras_tutorial_runs_unchanged(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 512)
    images = (rng.random((512, 28, 28)) * 60 + labels[:, None, None] * 19).astype(np.uint8)  # learnable
    (tmp_path / "datasets").mkdir()
    np.savez(tmp_path / "datasets" / "mnist.npz", x_train=images, y_train=labels, x_test=images[:8],
             y_test=labels[:8])
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    results = SimCluster(workers=2, seed=3).run(run_tutorial, 4).values()
    *weights0, history0 = results[0]
    *weights1, history1 = results[1]
    assert len(history0["loss"]) == 3 and history0 == history1
    for a, b in zip(weights0, weights1):
        np.testing.assert_array_equal(a, b)
    assert history0["loss"][-1] < history0["loss"][0]
