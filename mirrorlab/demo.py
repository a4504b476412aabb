"""The demo job and its command (``mirrorlab demo``): linear regression trained with a custom MWMS loop, as a TF
user would write it, on a simulated cluster.

``train`` is an ordinary MultiWorkerMirroredStrategy program: the strategy reads each worker's TF_CONFIG, which
the simulator sets per simulated worker.
"""

from __future__ import annotations

import argparse

import numpy as np

from . import distribute as ds
from .aggregation import ReduceOp
from .cli_args import UsageError, positive_int

__all__ = ["train", "run_demo", "register"]

FEATURES = 4
TRUE_W = np.array([2.0, -1.0, 0.5, 3.0], dtype=np.float32)
TRUE_B = np.float32(0.25)


def _dataset(num_examples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_examples, FEATURES)).astype(np.float32)
    y = x @ TRUE_W + TRUE_B + 0.01 * rng.standard_normal(num_examples).astype(np.float32)
    return x, y


def train(steps: int = 8, global_batch_size: int = 16, learning_rate: float = 0.2, seed: int = 0) -> dict:
    """Train ``y = x @ w + b`` with MultiWorkerMirroredStrategy; returns the per-step global loss."""
    strategy = ds.MultiWorkerMirroredStrategy()
    n = strategy.num_replicas_in_sync
    if global_batch_size % n:
        raise ValueError(f"global_batch_size={global_batch_size} must be divisible by the {n} replicas in sync")
    per_replica = global_batch_size // n
    x_all, y_all = _dataset(steps * global_batch_size, seed)
    with strategy.scope():
        w = ds.Variable(np.zeros(FEATURES, np.float32), name="w")
        b = ds.Variable(np.float32(0.0), name="b")

    def replica_step(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        err = x @ w + b - y
        loss = np.sum(err * err) / global_batch_size          # compute_average_loss: scale by the GLOBAL batch
        grads = (2.0 * x.T @ err / global_batch_size, 2.0 * np.sum(err) / global_batch_size)
        gw, gb = ds.get_replica_context().all_reduce(ReduceOp.SUM, grads)
        w.assign_sub(learning_rate * gw)
        b.assign_sub(learning_rate * gb)
        return loss

    losses = []
    for step in range(steps):
        start = step * global_batch_size

        def shard(ctx: ds.ValueContext, data: np.ndarray) -> np.ndarray:
            lo = start + ctx.replica_id_in_sync_group * per_replica
            return data[lo:lo + per_replica]

        x = strategy.experimental_distribute_values_from_function(lambda c: shard(c, x_all))
        y = strategy.experimental_distribute_values_from_function(lambda c: shard(c, y_all))
        per_replica_loss = strategy.run(replica_step, args=(x, y))
        losses.append(float(strategy.reduce(ReduceOp.SUM, per_replica_loss, axis=None)))
    ext = strategy.extended
    return {"losses": losses, "w": w.numpy().tolist(), "b": float(b.numpy()), "devices": list(ext.worker_devices),
            "first_replica": ext._rank * len(ext.worker_devices), "is_chief": ext.should_checkpoint}


def run_demo(workers: int = 2, devices_per_worker: int = 2, steps: int = 8, seed: int = 0,
             global_batch: int = 16) -> str:
    """Run ``train`` on a simulated cluster and describe what happened and how to run your own program so."""
    from mirrorlab.sim import SimCluster

    result = SimCluster(workers=workers, devices_per_worker=devices_per_worker, seed=seed).run(
        train, steps=steps, global_batch_size=global_batch)
    outcomes = result.values()
    chief = outcomes[0]
    lines = [f"mirrorlab demo: linear regression on a simulated cluster of {workers} workers x "
             f"{devices_per_worker} devices ({workers * devices_per_worker} replicas in sync), seed {seed}", "",
             "replica layout:"]
    for w, out in enumerate(outcomes):
        for k, device in enumerate(out["devices"]):
            role = " (chief)" if out["is_chief"] and k == 0 else ""
            lines.append(f"  replica {out['first_replica'] + k}: worker {w} {device}{role}")
    lines += ["", "step  global loss"]
    lines += [f"{i + 1:4d}  {loss:.6f}" for i, loss in enumerate(chief["losses"])]
    same = all(o["w"] == chief["w"] and o["b"] == chief["b"] for o in outcomes)
    lines += ["", f"learned w={np.round(chief['w'], 3).tolist()} b={chief['b']:.3f} "
                  f"(true w={TRUE_W.tolist()} b={float(TRUE_B)}); identical on every worker: {same}",
              f"virtual time {result.virtual_time:.3f} s, {len(result.trace)} collective trace events",
              "", "All of this ran in this one process: the workers, their devices and the network are simulated.",
              "Run your own MultiWorkerMirroredStrategy script the same way (each simulated worker runs it with "
              "its own TF_CONFIG):",
              f"  mirrorlab run train.py --workers {workers} --devices-per-worker {devices_per_worker} --seed {seed}",
              "Training on real machines needs mirrorlab's gRPC backend, which is still being built."]
    return "\n".join(lines)


def _demo_command(args: argparse.Namespace) -> int:
    """``mirrorlab demo``: check that the global batch splits evenly over the replicas, then run and print."""
    replicas = args.workers * args.devices
    if args.global_batch % replicas:
        fitting = [str(w) for w in range(1, args.global_batch + 1) if args.global_batch % (w * args.devices) == 0]
        use = (f"use --workers {' or '.join([', '.join(fitting[:-1]), fitting[-1]] if fitting[:-1] else fitting)}, "
               "or --global-batch") if fitting else "use fewer --devices-per-worker, or --global-batch"
        raise UsageError(f"--workers {args.workers} gives {replicas} replicas; the demo's global batch "
                         f"{args.global_batch} needs a divisor: {use}")
    print(run_demo(workers=args.workers, devices_per_worker=args.devices, steps=args.steps, seed=args.seed,
                   global_batch=args.global_batch))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``mirrorlab demo`` to the command line's ``commands``."""
    demo = commands.add_parser("demo", help="train a small model on a simulated cluster (2 workers x 2 devices)",
                               description="Train a linear regression with MultiWorkerMirroredStrategy on a "
                                           "simulated cluster, and show the replica layout and the loss per step.")
    demo.add_argument("--workers", type=positive_int, default=2, help="simulated workers (default 2)")
    demo.add_argument("--devices-per-worker", "--devices", dest="devices", type=positive_int, default=2,
                      help="devices per worker (default 2)")
    demo.add_argument("--steps", type=positive_int, default=8, help="training steps (default 8)")
    demo.add_argument("--global-batch", type=positive_int, default=16,
                      help="examples per step over all replicas; a multiple of the replica count (default 16)")
    demo.add_argument("--seed", type=int, default=0, help="simulation seed: fixes the interleaving (default 0)")
    demo.set_defaults(func=_demo_command)

