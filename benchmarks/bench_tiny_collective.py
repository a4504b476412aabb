"""Simulator overhead of a tiny collective, per replica, on 2, 8 and 64 single-device workers (issue 30, item 5).

Each simulated worker all-reduces a 4-element float32 tensor ``--steps`` times; the figure is the wall time of one
all-reduce divided by the number of replicas (target <= 50 us). Shapes are measured interleaved (repetition r
of every shape before repetition r + 1) and the min and median over repetitions are printed, with each shape's
ratio to the 2-worker case, because absolute timings on a shared machine are noisy. Never a timed test.

Run: ``python benchmarks/bench_tiny_collective.py [--steps 30] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import mirrorlab.tf as tf
from mirrorlab.sim import SimCluster

SHAPES = ((2, 1), (8, 1), (64, 1))
TARGET = 50e-6  # issue 30: <= 50 us per replica


def per_replica_seconds(workers: int, devices: int, steps: int) -> float:
    """Wall seconds per replica of one tiny all-reduce on ``SimCluster(workers, devices)`` (after a warm-up)."""

    def program() -> tuple[float, float]:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        value = tf.constant(np.ones(4, np.float32))
        strategy.reduce("sum", value, axis=None)  # warm-up, and lines the workers up before timing

        def step() -> object:
            return tf.distribute.get_replica_context().all_reduce("sum", value)

        start = time.perf_counter()
        for _ in range(steps):
            strategy.run(step)
        return start, time.perf_counter()

    result = SimCluster(workers=workers, devices_per_worker=devices, seed=1).run(program)
    spans = result.values()
    return (max(end for _, end in spans) - min(start for start, _ in spans)) / (steps * workers * devices)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    samples: dict[tuple[int, int], list[float]] = {shape: [] for shape in SHAPES}
    for _ in range(args.repeats):
        for shape in SHAPES:
            samples[shape].append(per_replica_seconds(*shape, args.steps))
    base = min(samples[SHAPES[0]])
    print(f"tiny all-reduce (4 float32), {args.steps} steps, {args.repeats} interleaved repetitions; "
          "per replica (target <= 50 us):")
    for shape, times in samples.items():
        print(f"  SimCluster{shape}: min {min(times) * 1e6:7.1f} us, median {statistics.median(times) * 1e6:7.1f} us, "
              f"min ratio to {SHAPES[0]}: {min(times) / base:5.2f}x, min x target {min(times) / TARGET:5.2f}")


if __name__ == "__main__":
    main()
