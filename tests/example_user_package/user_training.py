"""A user's own training code, as a user of ``pip install mirrorlab`` writes it: TF API through
``mirrorlab.tf``; nothing from mirrorlab's internals."""

from __future__ import annotations

import numpy as np

import mirrorlab.tf as tf


def train(global_batch: int, steps: int = 2, average: str = "global") -> list[float]:
    """Linear regression in a custom loop; ``average="per_replica"`` is the classic bug of averaging each
    replica's loss over its own examples (wrong whenever a global batch splits unevenly)."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    replicas = strategy.num_replicas_in_sync
    x = np.linspace(-1.0, 1.0, 2 * global_batch * steps, dtype=np.float32).reshape(-1, 2)
    y = x @ np.array([2.0, -1.0], np.float32)
    with strategy.scope():
        w = tf.Variable(np.zeros(2, np.float32))

    def step(inputs):
        xb, yb = inputs
        residual = xb @ w.numpy() - yb
        count = global_batch if average == "global" else max(len(xb), 1) * replicas
        grad = tf.distribute.get_replica_context().all_reduce("sum", 2.0 * (xb.T @ residual) / count)
        w.assign_sub(0.1 * grad)

    for s in range(steps):
        rows = slice(s * global_batch, (s + 1) * global_batch)
        parts = np.array_split(x[rows], replicas), np.array_split(y[rows], replicas)
        batch = strategy.experimental_distribute_values_from_function(
            lambda ctx: (parts[0][ctx.replica_id_in_sync_group], parts[1][ctx.replica_id_in_sync_group]))
        strategy.run(step, args=(batch,))
    return w.numpy().tolist()
