"""Speed of the simulator against plain NumPy (targets from issues 2 and 30; never asserted in tests).

1. One training step of an MLP 784-128-10 (global batch 256, SGD, sparse softmax cross-entropy) on
   ``SimCluster(1, 8)``, ``(2, 4)`` and ``(8, 1)`` versus the same math on the whole batch and as 8 slices in
   plain NumPy; the hand-written step also declared ``@batch_safe`` (run stacked); and Keras ``fit`` of the same
   model on ``SimCluster(1, 8)``, its local replicas stacked (the default, see
   ``mirrorlab/tf/keras/stacked_step.py``) and one step per replica (``model.stack_replicas = False``), and a
   TF-style custom loop (GradientTape) of it, per replica and declared ``@batch_safe`` (run stacked). The
   variants run interleaved (repetition r of each before repetition r + 1) and the min and median over
   repetitions are printed with their ratios, because absolute timings on a shared machine are noisy.
2. 1024 simulated replicas all-reducing 1M float32 values each, in four cluster shapes, each in its own
   process so its peak memory (max RSS) is its own. Target < 2 s and < 2 GB. Each replica's own input makes
   4 GB by itself, so each shape runs again with one read-only input shared by every replica: what the
   simulator itself holds.

Run: ``python benchmarks/bench_sim_step.py [--steps 50] [--repeats 5] [--skip-allreduce]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

import mirrorlab.tf as ml
from mirrorlab.distribute.batch_safe import batch_safe
from mirrorlab.distribute.stacked_run import stack_parts
from mirrorlab.runtime.blas import pin_blas_threads
from mirrorlab.sim import SimCluster
from mirrorlab.tf._kernels.summation import tf_sum_each

GLOBAL_BATCH = 256
LR = 0.1


def init_params(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((784, 128)) * 0.05).astype(np.float32), np.zeros(128, np.float32),
            (rng.standard_normal((128, 10)) * 0.05).astype(np.float32), np.zeros(10, np.float32)]


def loss_and_grads(params, x: np.ndarray, y: np.ndarray, global_batch: int):
    """Sparse softmax cross-entropy of the MLP, summed over ``x`` and scaled by the GLOBAL batch."""
    w1, b1, w2, b2 = (np.asarray(p) for p in params)
    h = x @ w1 + b1
    r = np.maximum(h, 0.0)
    z = r @ w2 + b2
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = -np.log(p[rows, y]).sum() / global_batch
    dz = p
    dz[rows, y] -= 1.0
    dz /= global_batch
    dr = dz @ w2.T
    dr[h <= 0] = 0.0
    return loss, (x.T @ dr, dr.sum(axis=0), r.T @ dz, dz.sum(axis=0))


def stacked_loss_and_grads(params, x: np.ndarray, y: np.ndarray, global_batch: int):
    """``loss_and_grads`` of every replica at once: ``x`` (replicas, batch, 784), ``y`` (replicas, batch); the
    losses and gradients carry the replica axis first. Batch-safe: each slice is what ``loss_and_grads`` gives
    that replica (products by ``np.matmul``, batch sums along axis 1)."""
    w1, b1, w2, b2 = (np.asarray(p) for p in params)
    h = x @ w1 + b1
    r = np.maximum(h, 0.0)
    z = r @ w2 + b2
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=-1, keepdims=True)
    replica, rows = np.arange(len(y))[:, None], np.arange(y.shape[1])
    loss = -np.log(p[replica, rows, y]).sum(axis=1) / global_batch
    dz = p
    dz[replica, rows, y] -= 1.0
    dz /= global_batch
    dr = dz @ w2.T
    dr[h <= 0] = 0.0
    return loss, (np.matmul(np.swapaxes(x, 1, 2), dr), dr.sum(axis=1), np.matmul(np.swapaxes(r, 1, 2), dz),
                  dz.sum(axis=1))


def data(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((GLOBAL_BATCH, 784)).astype(np.float32), rng.integers(0, 10, GLOBAL_BATCH)


def plain_numpy(steps: int) -> float:
    """Seconds per step of the single-process NumPy reference."""
    params = init_params()
    x, y = data()
    for i in range(steps + 5):
        if i == 5:
            start = time.perf_counter()
        _, grads = loss_and_grads(params, x, y, GLOBAL_BATCH)
        params = [p - LR * g for p, g in zip(params, grads)]
    return (time.perf_counter() - start) / steps


def split_numpy(steps: int, replicas: int = 8) -> float:
    """Seconds per step of the same math done as ``replicas`` sequential slices in plain NumPy: the
    cost of data-parallel splitting itself (small matmuls), without any framework."""
    params = init_params()
    x, y = data()
    per = GLOBAL_BATCH // replicas
    for i in range(steps + 5):
        if i == 5:
            start = time.perf_counter()
        parts = [loss_and_grads(params, x[k * per:(k + 1) * per], y[k * per:(k + 1) * per], GLOBAL_BATCH)[1]
                 for k in range(replicas)]
        grads = [sum(g[j] for g in parts) for j in range(4)]
        params = [p - LR * g for p, g in zip(params, grads)]
    return (time.perf_counter() - start) / steps


def simulated(steps: int, devices: int = 8, workers: int = 1, stacked: bool = False) -> float:
    """Seconds per step on SimCluster(workers, devices), measured inside the simulated workers (the slowest);
    ``stacked``: the replica function declared ``@batch_safe`` (written with ``stacked_loss_and_grads``), which
    ``strategy.run`` calls once for all local replicas."""
    return max(seconds for seconds, _ in SimCluster(workers=workers, devices_per_worker=devices).run(
        hand_written_program, steps, stacked).values())


def stacked_matches_per_replica(steps: int = 3, devices: int = 8) -> bool:
    """Whether the ``@batch_safe`` stacked hand-written step leaves the weights of the per-replica step, bit for bit
    (it does when NumPy's exp and log round each value alike wherever it lies in an array)."""
    runs = [SimCluster(1, devices).run(hand_written_program, steps, stacked).values()[0][1]
            for stacked in (True, False)]
    return all(a.tobytes() == b.tobytes() for a, b in zip(*runs))


def hand_written_program(steps: int, stacked: bool) -> tuple[float, list[np.ndarray]]:
    """The hand-written step ``steps + 5`` times in a simulated worker: seconds per step (the last ``steps``) and the
    weights after them."""
    x, y = data()

    strategy = ml.MultiWorkerMirroredStrategy()
    n = strategy.num_replicas_in_sync
    per = GLOBAL_BATCH // n
    with strategy.scope():
        params = [ml.Variable(p) for p in init_params()]

    def apply(strategy, grads):
        for v, g in zip(params, grads):
            v.assign_sub(LR * strategy.experimental_local_results(g)[0])

    def replica_step(xb, yb):
        ctx = ml.get_replica_context()
        loss, grads = (stacked_loss_and_grads if stacked else loss_and_grads)(params, xb, yb, GLOBAL_BATCH)
        grads = ctx.all_reduce(ml.ReduceOp.SUM, grads)
        ctx.merge_call(apply, args=(grads,))
        return loss

    step = batch_safe(replica_step) if stacked else replica_step
    xs = strategy.experimental_distribute_values_from_function(
        lambda c: x[c.replica_id_in_sync_group * per:(c.replica_id_in_sync_group + 1) * per])
    ys = strategy.experimental_distribute_values_from_function(
        lambda c: y[c.replica_id_in_sync_group * per:(c.replica_id_in_sync_group + 1) * per])
    for i in range(steps + 5):
        if i == 5:
            start = time.perf_counter()
        strategy.run(step, args=(xs, ys))
    return (time.perf_counter() - start) / steps, [p.numpy() for p in params]


def tape_stacked_matches_per_replica(steps: int = 3, devices: int = 8) -> bool:
    """Whether the ``@batch_safe`` stacked tape loop leaves the weights of the per-replica loop, bit for bit."""
    runs = [SimCluster(1, devices).run(tape_program, steps, stacked).values()[0][1] for stacked in (True, False)]
    return all(a.tobytes() == b.tobytes() for a, b in zip(*runs))


def keras_mlp() -> Any:
    """The MLP as a Keras Sequential model (in the current strategy's scope)."""
    return ml.keras.Sequential([ml.keras.Input((784,)), ml.keras.layers.Dense(128, activation="relu"),
                                ml.keras.layers.Dense(10)])


def tape_loop(steps: int, devices: int = 8, stacked: bool = False) -> float:
    """Seconds per step of a TF-style custom loop on SimCluster(1, devices): the Keras MLP, a sparse cross-entropy,
    ``compute_average_loss``, ``GradientTape`` and SGD's ``apply_gradients`` in ``strategy.run``, per replica, or
    (``stacked``) declared ``@batch_safe``, which runs it once on all local replicas."""
    return SimCluster(workers=1, devices_per_worker=devices).run(tape_program, steps, stacked).values()[0][0]


def tape_program(steps: int, stacked: bool) -> tuple[float, list[np.ndarray]]:
    """The tape loop ``steps + 5`` times in a simulated worker: seconds per step (the last ``steps``) and the
    weights after them."""
    x, y = data()
    strategy = ml.distribute.MirroredStrategy()
    per = GLOBAL_BATCH // strategy.num_replicas_in_sync
    with strategy.scope():
        model, optimizer = keras_mlp(), ml.keras.optimizers.SGD(LR)
    loss_fn = ml.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def replica_step(xb, yb):
        with ml.GradientTape() as tape:
            loss = ml.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)), global_batch_size=GLOBAL_BATCH)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    step = batch_safe(replica_step) if stacked else replica_step
    xs, ys = (strategy.experimental_distribute_values_from_function(
        lambda c, a=a: a[c.replica_id_in_sync_group * per:(c.replica_id_in_sync_group + 1) * per]) for a in (x, y))
    for i in range(steps + 5):
        if i == 5:
            start = time.perf_counter()
        strategy.run(step, args=(xs, ys))
    return (time.perf_counter() - start) / steps, [w.numpy() for w in model.weights]


def keras_fit(steps: int, stack: bool, devices: int = 8) -> float:
    """Seconds per step of Keras ``fit`` of the MLP on SimCluster(1, devices) (a first fit builds and warms up)."""
    x, y = data()

    def program() -> float:
        strategy = ml.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras_mlp()
            model.compile(optimizer=ml.keras.optimizers.SGD(LR),
                          loss=ml.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.stack_replicas = stack
        batches = ml.data.Dataset.from_tensors((x, y)).repeat()
        model.fit(batches, steps_per_epoch=5, verbose=0)
        start = time.perf_counter()
        model.fit(batches, steps_per_epoch=steps, verbose=0)
        return (time.perf_counter() - start) / steps

    return SimCluster(workers=1, devices_per_worker=devices).run(program).values()[0]


def keras_arithmetic(steps: int, devices: int = 8) -> float:
    """Seconds per step of the stacked Keras ``fit`` step's arithmetic alone, in a simulated worker: what any stacked
    step bit-identical to ``fit`` (or to the stacked tape loop, which computes the same) must compute
    (``keras_arithmetic_program``), with no framework around it."""
    return SimCluster(workers=1, devices_per_worker=devices).run(keras_arithmetic_program, steps).values()[0][0]


def keras_arithmetic_program(steps: int, initial: list[np.ndarray] | None = None) -> tuple[float, list[np.ndarray]]:
    """The stacked ``fit`` step's arithmetic ``steps + 5`` times (from ``initial`` weights, else the Keras MLP's):
    seconds per step (the last ``steps``) and the weights after them. The same operations as the stacked step on
    the same operands (``tests/test_benchmarks.py`` checks the weights equal ``fit``'s bit for bit): each replica's
    products (``np.matmul`` of the stacked batch), the loss's stacked kernel with TF's exp, log and sums, the bias
    gradients summed in TF's order (``tf_sum_each``), the replicas' gradients summed in order, SGD's update; but no
    layer, loss, metric, optimizer, variable, collective or input pipeline objects between them."""
    x, y = data()
    strategy = ml.distribute.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    per = GLOBAL_BATCH // n
    with strategy.scope():
        weights = initial or [w.numpy() for w in keras_mlp().weights]
        loss = ml.keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # (scaled for the replicas in sync)
        lr = np.float32(LR)
        for i in range(steps + 5):
            if i == 5:
                start = time.perf_counter()
            xs = stack_parts([x[k * per:(k + 1) * per] for k in range(n)])
            ys = stack_parts([y[k * per:(k + 1) * per] for k in range(n)])
            w1, b1, w2, b2 = weights
            h = xs @ w1 + b1
            r = np.maximum(h, 0)
            _, dz, _ = loss.stacked_in_step(ys, r @ w2 + b2)
            dz = np.asarray(dz)
            dh = (dz @ w2.T) * (h > 0)
            grads = [np.matmul(np.swapaxes(xs, 1, 2), dh), tf_sum_each(dh), np.matmul(np.swapaxes(r, 1, 2), dz),
                     tf_sum_each(dz)]
            weights = [w - np.add.reduce(g, axis=0) * lr for w, g in zip(weights, grads)]
    return (time.perf_counter() - start) / steps, weights


def keras_arithmetic_matches_fit(steps: int = 3, devices: int = 8) -> bool:
    """Whether ``keras_arithmetic_program`` leaves the weights of the stacked ``fit`` and of the stacked tape loop
    over the same ``steps + 5`` batches, bit for bit (so its time is a floor under both)."""
    x, y = data()

    def fitted() -> list[np.ndarray]:
        strategy = ml.distribute.MirroredStrategy()
        with strategy.scope():
            model = keras_mlp()
            model.compile(optimizer=ml.keras.optimizers.SGD(LR),
                          loss=ml.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(ml.data.Dataset.from_tensors((x, y)).repeat(), steps_per_epoch=steps + 5, verbose=0)
        return [w.numpy() for w in model.weights]

    arithmetic, fit, tape = (SimCluster(1, devices).run(program).values()[0] for program in (
        lambda: keras_arithmetic_program(steps)[1], fitted, lambda: tape_program(steps, True)[1]))
    return all(a.tobytes() == b.tobytes() == c.tobytes() for a, b, c in zip(arithmetic, fit, tape))


def allreduce_1m(workers: int, devices: int, repeats: int = 3, size: int = 1 << 20, shared: bool = False
                 ) -> list[float]:
    """Wall seconds for ``workers x devices`` replicas to all-reduce ``size`` (1M) float32 each (first = cold);
    ``shared``: every replica contributes the same read-only array instead of one of its own."""
    one = np.full(size, 3, np.float32)
    one.flags.writeable = False

    def program() -> list[tuple[float, float]]:
        strategy = ml.MultiWorkerMirroredStrategy()
        values = strategy.experimental_distribute_values_from_function(
            lambda c: one if shared else np.full(size, c.replica_id_in_sync_group % 7, np.float32))
        times = []
        for _ in range(repeats):
            strategy.reduce("mean", ml.constant(0.0), axis=None)  # line the workers up before timing
            start = time.perf_counter()
            total = strategy.reduce("sum", values, axis=None)
            times.append((start, time.perf_counter()))
        assert total.shape == (size,)
        return times

    # (no hang watchdog: one worker filling 1,024 inputs of 4 MB computes for seconds without a scheduling point,
    # longer than the watchdog's 5 s when the machine is busy)
    per_worker = SimCluster(workers=workers, devices_per_worker=devices, watchdog=None).run(program).values()
    return [max(w[i][1] for w in per_worker) - min(w[i][0] for w in per_worker) for i in range(repeats)]


MLP_VARIANTS = {
    "plain NumPy, whole batch": plain_numpy,
    "plain NumPy, 8 slices in sequence": split_numpy,
    "SimCluster(1, 8)": lambda steps: simulated(steps, devices=8, workers=1),
    "SimCluster(2, 4)": lambda steps: simulated(steps, devices=4, workers=2),
    "SimCluster(8, 1)": lambda steps: simulated(steps, devices=1, workers=8),
    "SimCluster(1, 8), @batch_safe stacked": lambda steps: simulated(steps, stacked=True),
    "Keras fit, SimCluster(1, 8), stacked": lambda steps: keras_fit(steps, stack=True),
    "Keras fit, SimCluster(1, 8), per replica": lambda steps: keras_fit(steps, stack=False),
    "Keras fit's stacked arithmetic alone (its floor)": keras_arithmetic,
    "tape loop, SimCluster(1, 8), per replica": tape_loop,
    "tape loop, SimCluster(1, 8), @batch_safe stacked": lambda steps: tape_loop(steps, stacked=True),
}
ALLREDUCE_SHAPES = ((1, 1024), (16, 64), (128, 8), (1024, 1))
TARGET_SECONDS, TARGET_MB = 2.0, 2048  # issue 30: 1M float32 over 1024 replicas in <= 2 s and < 2 GB


def mlp_report(steps: int, repeats: int) -> None:
    """Time every MLP variant ``repeats`` times, interleaved, and print min/median and ratios. BLAS is pinned first,
    as the simulator pins it, so the NumPy references multiply with the simulator's thread count (otherwise only
    the references timed before the first simulated run would use every core)."""
    pin_blas_threads()
    samples: dict[str, list[float]] = {name: [] for name in MLP_VARIANTS}
    for _ in range(repeats):
        for name, variant in MLP_VARIANTS.items():
            samples[name].append(variant(steps))
    whole, sliced = (min(samples[name]) for name in list(MLP_VARIANTS)[:2])
    print(f"MLP 784-128-10, global batch {GLOBAL_BATCH}, one SGD step ({repeats} interleaved repetitions):")
    for name, times in samples.items():
        best = min(times)
        print(f"  {name:48s}: min {best * 1e3:7.3f} ms, median {statistics.median(times) * 1e3:7.3f} ms; "
              f"min x whole batch {best / whole:5.2f}, min x 8 slices {best / sliced:5.2f}")
    print("  @batch_safe stacked step's weights equal the per-replica step's bit for bit: "
          f"{stacked_matches_per_replica()}")
    print("  Keras fit's stacked arithmetic alone leaves fit's and the stacked tape loop's weights bit for bit: "
          f"{keras_arithmetic_matches_fit()}")
    print("  @batch_safe stacked tape loop's weights equal the per-replica loop's bit for bit: "
          f"{tape_stacked_matches_per_replica()}")
    print("  targets: simulated <= 1.5x the 8 slices (hand-written step), Keras fit and the tape loop <= 1.5x the "
          "whole batch; TF 2.21 MirroredStrategy ~4.7x whole batch")


def allreduce_in_subprocess(workers: int, devices: int, shared: bool) -> str:
    """Run one all-reduce shape in a fresh process (bounded to 10 minutes) and return its report line."""
    done = subprocess.run([sys.executable, __file__, "--allreduce-shape", f"{workers},{devices}"]
                          + (["--shared-input"] if shared else []), capture_output=True, text=True, timeout=600)
    return done.stdout.strip() or f"  SimCluster({workers}, {devices}): failed: {done.stderr.strip()[-300:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-allreduce", action="store_true")
    parser.add_argument("--allreduce-shape", help="WORKERS,DEVICES: time one shape in this process (internal)")
    parser.add_argument("--shared-input", action="store_true", help="with --allreduce-shape: one input for all")
    args = parser.parse_args()
    if args.allreduce_shape:
        workers, devices = (int(n) for n in args.allreduce_shape.split(","))
        times = allreduce_1m(workers, devices, shared=args.shared_input)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        inputs_mb = (1 if args.shared_input else workers * devices) * (1 << 20) * 4 / 2**20
        shape = f"SimCluster({workers}, {devices})" + (", one shared input" if args.shared_input else "")
        print(f"  {shape}: " + ", ".join(f"{t:.3f} s" for t in times)
              + f" (min warm x target {min(times[1:]) / TARGET_SECONDS:.2f}); peak memory {peak_mb:.0f} MB "
              f"(x target {peak_mb / TARGET_MB:.2f}), of which the replicas' own inputs {inputs_mb:.0f} MB")
        return
    mlp_report(args.steps, args.repeats)
    if not args.skip_allreduce:
        print("1024 replicas all-reducing 1M float32 each (target < 2 s, < 2 GB); runs: cold, warm, warm:")
        for shared in (False, True):
            for workers, devices in ALLREDUCE_SHAPES:
                print(allreduce_in_subprocess(workers, devices, shared))


if __name__ == "__main__":
    main()
