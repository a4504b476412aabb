"""A Keras training program the tests run on simulated clusters of several shapes, and the check that they agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import mirrorlab.tf as ml
from mirrorlab.tf import data as md
from mirrorlab.tf import keras
from mirrorlab.sim import SimCluster


def fit_program(make: Callable[[], Any], x: np.ndarray, y: np.ndarray, epochs: int = 2) -> tuple[list, list]:
    """Make a model in a MultiWorkerMirroredStrategy's scope, fit it (SGD, sparse cross-entropy on logits, global
    batches of 12) and return its trainable weights and the loss of each epoch."""
    strategy = ml.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = make()
        model.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(md.Dataset.from_tensor_slices((x, y)).batch(12), epochs=epochs, verbose=0)
    return [w.numpy() for w in model.trainable_variables], history.history["loss"]


def single_and_cluster_runs(make: Callable[[], Any], x: np.ndarray, y: np.ndarray) -> tuple[list, list]:
    """``fit_program`` on one device and on a 2x2 simulated cluster: the single run's weights and losses, after
    checking that every worker of the cluster run trained to the same within float32 rounding."""
    (single_weights, single_losses), = SimCluster(workers=1, devices_per_worker=1).run(fit_program, make, x, y).values()
    for weights, losses in SimCluster(workers=2, devices_per_worker=2).run(fit_program, make, x, y).values():
        for a, b in zip(weights, single_weights, strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(losses, single_losses, rtol=1e-4)
    return single_weights, single_losses


def tape_step(model: Any, optimizer: Any, loss_fn: Any, global_batch_size: int,
              regularized: bool = False) -> Callable[[Any], Any]:
    """TF's custom-training replica step: the per-example loss averaged over the global batch (plus the model's scaled
    regularization losses), differentiated on a tape and applied; returns the replica's loss."""
    def step(inputs: Any) -> Any:
        x, y = inputs
        with ml.GradientTape() as tape:
            loss = ml.nn.compute_average_loss(loss_fn(y, model(x, training=True)), global_batch_size=global_batch_size)
            if regularized:
                loss += ml.nn.scale_regularization_loss(ml.add_n(model.losses))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step
