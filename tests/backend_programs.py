"""Programs the backend tests run both on ``SimCluster`` and as real worker processes (``python this.py NAME``).

Each prints one ``RESULT <json>`` line when run as a script, and returns the same value on the simulator."""

import hashlib
import json
import os
import sys
import time

import numpy as np

import mirrorlab.tf as tf
from mirrorlab.tensor import to_host


def custom_loop(steps: int = 4) -> dict:
    """A custom training loop: tf.Variable, strategy.run, a MEAN all_reduce of the gradient, strategy.reduce."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    print("TRANSPORT", strategy.extended.transport_name, flush=True)
    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((48, 784)).astype(np.float32)
    y_all = rng.standard_normal((48, 10)).astype(np.float32)
    with strategy.scope():
        w = tf.Variable(rng.standard_normal((784, 10)).astype(np.float32) * 0.01)

    def step():
        ctx = tf.distribute.get_replica_context()
        r, n = ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync
        x, y = tf.constant(x_all[r::n]), tf.constant(y_all[r::n])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        grad = ctx.all_reduce("MEAN", tape.gradient(loss, w))
        w.assign_sub(0.1 * grad)
        return loss

    losses = []
    for _ in range(steps):
        losses.append(float(strategy.reduce("SUM", strategy.run(step), axis=None).numpy()))
    return {"w": hashlib.sha256(w.numpy().tobytes()).hexdigest(), "losses": [repr(v) for v in losses]}


def keras_fit() -> dict:
    """README's Keras job without the backup: a Sequential model fit on an auto-sharded dataset. The seed is
    set, as a TF program must for repeatable initial weights (unseeded, every process draws its own)."""
    tf.keras.utils.set_random_seed(1)
    rng = np.random.default_rng(0)
    x_train = rng.standard_normal((256, 16)).astype(np.float32)
    y_train = np.argmax(x_train @ rng.standard_normal((16, 4)), axis=1)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(64)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(16,)),
                                     tf.keras.layers.Dense(4)])
        model.compile(optimizer=tf.keras.optimizers.Adam(0.01),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(dataset, epochs=2, verbose=0)
    weights = b"".join(np.asarray(w).tobytes() for w in model.get_weights())
    return {"weights": hashlib.sha256(weights).hexdigest(), "loss": [repr(v) for v in history.history["loss"]]}


def preemptible(directory: str, steps: str = "60") -> dict:
    """A checkpointed loop under PreemptionCheckpointHandler: SIGTERM to any worker makes every worker save and exit
    42; a restart resumes from the saved step. Prints READY (with its pid) after its 3rd step."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        w = tf.Variable(np.ones(3, np.float32))
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, tf.train.Checkpoint(w=w), os.path.join(directory, "ckpt"))
    start = int(handler.total_run_calls)

    def step(k):
        def replica(x):
            tf.distribute.get_replica_context().all_reduce("sum", x)
            w.assign(w * 0.9 + x)
        strategy.run(replica, args=(np.float32(k),))

    for k in range(start, int(steps)):
        handler.run(step, k)
        if k == start + 2:
            print("READY pid", os.getpid(), flush=True)
        time.sleep(0.02)
    return {"start": start, "w": w.numpy().tolist()}


def unseeded_shuffle() -> dict:
    """One epoch of a dataset shuffled without a seed, on each worker (no strategy needed)."""
    dataset = tf.data.Dataset.range(32).shuffle(32).batch(8)
    return {"batches": [batch.numpy().tolist() for batch in dataset]}


def slow_all_reduce(length: str = "1000") -> dict:
    """All-reduces ``length`` floats for a long time (until killed); prints READY once collectives are running."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    value = tf.constant(np.ones(int(length), np.float32))
    for i in range(100000):
        strategy.reduce("SUM", strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", value)),
                        axis=None)
        if i == 3:
            print("READY pid", os.getpid(), flush=True)
        time.sleep(0.01)
    return {}


def saving_loop(directory: str) -> dict:
    """Trains and saves a checkpoint after every step (chief to ``directory``, the others to their temporary
    paths) until killed; prints READY once saves are running, so a kill lands in or between saves."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        w = tf.Variable(np.zeros(64, np.float32))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(w=w), tf.train.write_dirpath(directory, strategy),
                                         max_to_keep=1)
    for i in range(100000):
        strategy.run(lambda: w.assign_add(tf.distribute.get_replica_context().all_reduce("SUM", tf.ones(64))))
        manager.save()
        if i == 3:
            print("READY pid", os.getpid(), flush=True)
    return {}


def fail_on_worker_1() -> dict:
    """Worker 1 raises a plain Python error after one collective; the others wait in the next one."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
    if strategy.cluster_resolver.task_id == 1:
        raise ValueError("bad batch on worker 1")
    strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
    return {}


def hang_on_worker_1(mode: str, timeout_s: str = "4") -> dict:
    """Three all-reduces under a ``timeout_s`` collective timeout; worker 1 prints READY after the first, then per
    ``mode`` skips the last one and stays alive ("skip"; "skip_uneven": worker 2 waits twice as long, so it learns
    of the timeout from worker 0's abort), sleeps before the second ("sleep", killed or stopped by a test) or
    returns early ("exit"). The others wait for it; every sleep is bounded."""
    worker = tf.distribute.cluster_resolver.TFConfigClusterResolver().task_id
    timeout = float(timeout_s) * (2 if (worker, mode) == (2, "skip_uneven") else 1)
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    mode = "skip" if mode == "skip_uneven" else mode
    value = tf.constant(np.ones(4, np.float32))
    for step in range(3):
        if worker == 1 and (step, mode) in ((1, "sleep"), (2, "skip")):
            time.sleep(60)
        if worker == 1 and (step, mode) == (2, "exit"):
            return {}
        strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", value))
        if step == 0:
            print("READY pid", os.getpid(), flush=True)
    return {}


def implementation_all_reduce(implementation: str, size: str = "3000") -> dict:
    """Two all-reduces (SUM of a per-worker random float32 vector, then a broadcast through variable creation)
    under ``implementation``; on GPU workers the values live on the GPUs. The result's hash, the path the strategy
    reports and where the result lived."""
    options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    worker = strategy.cluster_resolver.task_id
    value = np.random.default_rng(worker).standard_normal(int(size)).astype(np.float32)
    with strategy.scope():
        start = tf.Variable(value)  # created from the chief's value: a broadcast
    total = strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(value)))
    local = strategy.experimental_local_results(total)[0]

    def digest(array):
        return hashlib.sha256(np.ascontiguousarray(to_host(array)).tobytes()).hexdigest()

    return {"sum": digest(local), "start": digest(start.numpy()), "transport": strategy.extended.transport_name,
            "array": type(local).__module__.split(".")[0]}


def nccl_peer_dies() -> dict:
    """NCCL all-reduces on GPUs; worker 1 dies abruptly (no goodbye) after the first, worker 0 goes on."""
    options = tf.distribute.experimental.CommunicationOptions(implementation="NCCL", timeout_seconds=30)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    value = tf.constant(np.ones(1 << 20, np.float32))
    for step in range(3):
        if step == 1 and strategy.cluster_resolver.task_id == 1:
            os._exit(3)
        strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", value))
        print("STEP", step, flush=True)
    return {}


if __name__ == "__main__":
    result = globals()[sys.argv[1]](*sys.argv[2:])
    print("RESULT", json.dumps(result), "pid", os.getpid(), flush=True)
