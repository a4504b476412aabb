"""The catalog's built-in training programs: small TF-style jobs (``import mirrorlab.tf as tf``) whose options
plant the mistakes the scenarios tell of. Each returns a dict; ``weights`` is what runs are compared by.

This module is user-level code, like an example: it uses the TF look-alike, so it lives with the catalog,
outside the core; scenario files name its functions with ``program.builtin``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import mirrorlab.tf as tf

TRUE_W = np.array([1.0, -2.0], np.float32)


def _worker_index(strategy: Any) -> int:
    """This worker's place in the cluster (the chief first), from the public cluster resolver."""
    resolver = strategy.cluster_resolver
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_id + (1 if has_chief and resolver.task_type == "worker" else 0)


def _regression_data(examples: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(-1.0, 1.0, examples * 2, dtype=np.float32).reshape(examples, 2)
    return x, x @ TRUE_W + np.float32(0.5)


def allreduce_steps(steps: int = 3, chief_only_collective: bool = False) -> dict[str, Any]:
    """A mirrored vector moved by a mean all-reduce each step; ``chief_only_collective`` adds a collective
    only the chief enters (a metric computed "just for logging" under ``if is_chief``)."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        w = tf.Variable(np.ones(3, np.float32))

    def step(x: Any) -> Any:
        g = tf.distribute.get_replica_context().all_reduce("mean", x * w)
        w.assign_sub(0.1 * g)
        return g

    for _ in range(steps):
        x = strategy.experimental_distribute_values_from_function(
            lambda c: np.full(3, c.replica_id_in_sync_group + 1.0, np.float32))
        strategy.run(step, args=(x,))
    if chief_only_collective and strategy.extended.should_checkpoint:
        strategy.reduce("sum", strategy.run(lambda: tf.constant(1.0)), axis=None)
    return {"weights": w.numpy().tolist()}


def custom_loop(steps: int = 3, examples: int = 9, global_batch: int = 3, loss_averaging: str = "global",
                nan_on_worker: int | None = None, checkpoint: str = "none", workdir: str = ".") -> dict[str, Any]:
    """Linear regression in a custom loop, each global batch split over the replicas as TF splits it (the first
    replicas get the extra rows), gradients summed by an all-reduce.

    ``loss_averaging="global"`` divides by the global batch (``compute_average_loss``'s rule);
    ``"per_replica"`` averages each replica's own batch then the replicas (wrong when batches split unevenly).
    ``nan_on_worker`` corrupts that worker's inputs. ``checkpoint``: ``"all"`` every worker saves (TF's rule),
    ``"chief_only"`` only the chief calls save, ``"same_path"`` every worker writes to one shared path itself.
    """
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    x, y = _regression_data(examples)
    if nan_on_worker is not None and _worker_index(strategy) == nan_on_worker:
        x = x.copy()
        x[:, 0] = np.nan
    with strategy.scope():
        w = tf.Variable(np.zeros(2, np.float32))
        b = tf.Variable(np.float32(0.0))
        seen = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.SUM)
    replicas = strategy.num_replicas_in_sync

    def step(inputs: Any) -> Any:
        xb, yb = inputs
        residual = xb @ w.numpy() + b.numpy() - yb
        if loss_averaging == "per_replica":
            scale = 1.0 / (max(len(xb), 1) * replicas)
        else:
            scale = 1.0 / global_batch
        ctx = tf.distribute.get_replica_context()
        gw = ctx.all_reduce("sum", np.float32(2 * scale) * (xb.T @ residual))
        gb = ctx.all_reduce("sum", np.float32(2 * scale * residual.sum()))
        w.assign_sub(0.5 * gw)
        b.assign_sub(0.5 * gb)
        seen.assign_add(float(len(xb)))
        return gb

    for s in range(steps):
        rows = slice((s * global_batch) % examples, (s * global_batch) % examples + global_batch)
        parts = (np.array_split(x[rows], replicas), np.array_split(y[rows], replicas))
        batch = strategy.experimental_distribute_values_from_function(
            lambda c: (parts[0][c.replica_id_in_sync_group], parts[1][c.replica_id_in_sync_group]))
        strategy.run(step, args=(batch,))
    if checkpoint != "none":
        _save(strategy, tf.train.Checkpoint(w=w, b=b, seen=seen), checkpoint, workdir)
    return {"weights": [w.numpy().tolist(), float(b.numpy())]}


def _save(strategy: Any, ckpt: Any, how: str, workdir: str) -> None:
    """Save the way a scenario's story says."""
    path = os.path.join(workdir, "ckpt")
    if how == "all":
        ckpt.save(path)
    elif how == "chief_only":
        if strategy.extended.should_checkpoint:
            ckpt.save(path)
    elif how == "same_path":
        ckpt.write(path)
    else:
        raise ValueError(f"custom_loop(checkpoint={how!r}): use 'none', 'all', 'chief_only' or 'same_path'.")


def keras_fit(epochs: int = 3, examples: int = 32, global_batch: int = 8, backup: bool = False,
              workdir: str = ".") -> dict[str, Any]:
    """A one-layer Keras regression fit; ``backup`` adds ``BackupAndRestore`` under ``workdir`` (so a rerun
    after a crash resumes). Returns the weights and the epochs this run trained."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    x, y = _regression_data(examples)
    tf.keras.utils.set_random_seed(1)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    callbacks = [tf.keras.callbacks.BackupAndRestore(os.path.join(workdir, "backup"))] if backup else []
    history = model.fit(tf.data.Dataset.from_tensor_slices((x, y[:, None])).batch(global_batch), epochs=epochs,
                        callbacks=callbacks, verbose=0)
    return {"weights": [v.numpy().tolist() for v in model.trainable_variables],
            "epochs_trained": len(history.history["loss"])}


def file_sharded_input(files: int = 1, rows_per_file: int = 4, policy: str = "FILE",
                       workdir: str = ".") -> dict[str, Any]:
    """Reads ``files`` text files through ``TextLineDataset`` under an auto-shard ``policy``; returns the rows
    this worker saw (``rows``), so a worker left without a file shows."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    directory = os.path.join(workdir, "data")
    os.makedirs(directory, exist_ok=True)
    names = []
    for k in range(files):
        name = os.path.join(directory, f"part-{k}.txt")
        with open(name, "w", encoding="utf-8") as handle:
            handle.write("".join(f"{k * rows_per_file + r}\n" for r in range(rows_per_file)))
        names.append(name)
    dataset = tf.data.TextLineDataset(names).batch(2)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
    rows = 0
    for batch in strategy.experimental_distribute_dataset(dataset.with_options(options)):
        rows += sum(len(np.asarray(t)) for t in strategy.experimental_local_results(batch))
    return {"rows": rows}


def mirrored_assign_per_replica() -> dict[str, Any]:
    """Each replica assigns its own value to a mirrored variable (no aggregation): the copies would diverge."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        v = tf.Variable(0.0)
    strategy.run(lambda: v.assign(tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group,
                                          tf.float32)))
    return {"weights": [float(np.asarray(t)) for t in strategy.experimental_local_results(v)]}


def preemptible_loop(steps: int = 6, workdir: str = ".") -> dict[str, Any]:
    """A custom loop under ``PreemptionCheckpointHandler``: a termination notice makes every worker save and
    exit (code 42); a rerun restores and finishes. Returns the weights and the steps this run made."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        v = tf.Variable(np.zeros(2, np.float32))
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, tf.train.Checkpoint(v=v), os.path.join(workdir, "preempt"))

    def step() -> Any:
        v.assign_add(tf.distribute.get_replica_context().all_reduce("mean", np.ones(2, np.float32)))

    start = int(handler.total_run_calls)
    for _ in range(start, steps):
        handler.run(lambda: strategy.run(step))
    return {"weights": v.numpy().tolist(), "resumed_at": start}
