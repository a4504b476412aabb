"""The benchmark scripts still run (tiny sizes; speed itself is never asserted here)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_sim_step.py"


@functools.cache
def _load():
    spec = importlib.util.spec_from_file_location("bench_sim_step", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_simulated_step_runs_and_split_gradients_add_up_to_the_whole_batch():
    """The 8-replica step runs on a simulated cluster (4 devices here), and the benchmark's premise holds: the
    gradients of two halves of the batch, each scaled by the global batch, add up to the whole batch's."""
    bench = _load()
    assert bench.simulated(steps=1, devices=4) > 0.0
    x, y = bench.data()
    params = bench.init_params()
    _, whole = bench.loss_and_grads(params, x, y, bench.GLOBAL_BATCH)
    halves = [bench.loss_and_grads(params, x[k * 128:(k + 1) * 128],
                                   y[k * 128:(k + 1) * 128], bench.GLOBAL_BATCH)[1] for k in range(2)]
    for g, a, b in zip(whole, *halves):
        np.testing.assert_allclose(g, a + b, rtol=1e-4, atol=1e-6)


def test_allreduce_timing_runs_on_several_workers():
    """The all-reduce timing runs across workers (2 x 2 replicas, 16 values) and reports one time per repeat."""
    bench = _load()
    for shared in (False, True):
        times = bench.allreduce_1m(workers=2, devices=2, repeats=2, size=16, shared=shared)
        assert len(times) == 2 and all(t >= 0.0 for t in times)


def test_allreduce_benchmark_runs_and_reports_bus_bandwidth(monkeypatch):
    """The all-reduce benchmark runs 2 processes on a tiny size and prints one row per path; busbw follows
    nccl-tests (bytes / time x 2(n-1)/n). Speed itself is not asserted."""
    monkeypatch.syspath_prepend(str(BENCH.parent))  # spawned workers import the script by name
    bench = importlib.import_module("bench_allreduce")
    assert bench.parse_size("4K") == 4096 and bench.parse_size("64MiB") == 64 << 20
    assert bench.busbw(1000, 1.0, 4) == 1500.0
    results = bench.measure(2, [4096], reps=2, warmup=0, use_grpc=False, use_torch=False, timeout=120,
                            reuse_memory=True)
    assert set(results) == {"shm ring", "shm halving-doubling", "shm gather-reduce", "shm pipelined ring", "shm auto"}
    assert all(times.shape == (2, 1) and (times > 0).all() for times in results.values())
    table = bench.report(2, [4096], results)
    assert "4 KiB" in table and "shm ring" in table and "busbw GB/s" in table


def test_allreduce_benchmark_times_the_grpc_path_with_data_lanes(monkeypatch):
    """The gRPC rows with data lanes ("grpc+lane ...") run on their own nodes, set up only when asked for."""
    monkeypatch.syspath_prepend(str(BENCH.parent))
    bench = importlib.import_module("bench_allreduce")
    results = bench.measure(2, [4096, 1 << 20], reps=1, warmup=0, use_grpc=True, use_torch=False, timeout=120,
                            only=["grpc+lane ring", "grpc+lane auto"])
    assert set(results) == {"grpc+lane ring", "grpc+lane auto"}
    assert all(times.shape == (1, 2) and (times > 0).all() for times in results.values())


def test_tiny_collective_benchmark_reports_a_time_per_replica():
    """The tiny-collective benchmark runs on a few workers and reports a positive time per replica."""
    spec = importlib.util.spec_from_file_location("bench_tiny_collective", BENCH.parent / "bench_tiny_collective.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.per_replica_seconds(workers=3, devices=1, steps=2) > 0.0


def test_simulated_step_runs_on_several_workers():
    """The MLP step also runs with the replicas spread over workers, as the (2, 4) and (8, 1) variants do."""
    assert _load().simulated(steps=1, devices=2, workers=2) > 0.0


def test_stacked_hand_written_step_runs_and_computes_the_per_replica_gradients():
    """The ``@batch_safe`` variant of the step runs stacked, and its stacked loss and gradients are each replica's
    (to rounding here: exp and log are NumPy's; the benchmark prints whether they agree bit for bit)."""
    bench = _load()
    assert bench.simulated(steps=1, devices=4, stacked=True) > 0.0
    x, y = bench.data()
    params = bench.init_params()
    loss, grads = bench.stacked_loss_and_grads(params, x.reshape(4, 64, 784), y.reshape(4, 64), bench.GLOBAL_BATCH)
    for k in range(4):
        one_loss, one = bench.loss_and_grads(params, x[k * 64:(k + 1) * 64], y[k * 64:(k + 1) * 64], bench.GLOBAL_BATCH)
        np.testing.assert_allclose(loss[k], one_loss, rtol=1e-6)
        for g, h in zip(grads, one):
            np.testing.assert_allclose(g[k], h, rtol=1e-5, atol=1e-7)


def test_keras_variants_run():
    """Keras fit, stacked and per replica, and the TF-style tape loop run a step on a simulated cluster."""
    bench = _load()
    assert bench.keras_fit(1, stack=True, devices=2) > 0.0 and bench.keras_fit(1, stack=False, devices=2) > 0.0
    assert bench.tape_loop(1, devices=2) > 0.0



def test_keras_fits_stacked_arithmetic_alone_leaves_fits_weights_bit_for_bit(monkeypatch):
    """The benchmark's floor under Keras fit is fit's own arithmetic: run alone, it ends on the weights of fit and
    of the stacked tape loop (on 4 replicas too); with the bias gradients summed in NumPy's order instead of TF's,
    it does not."""
    bench = _load()
    assert bench.keras_arithmetic_matches_fit(steps=1) and bench.keras_arithmetic_matches_fit(steps=1, devices=4)
    assert bench.keras_arithmetic(steps=1, devices=2) > 0.0
    monkeypatch.setattr(bench, "tf_sum_each", lambda values: values.sum(axis=1))
    assert not bench.keras_arithmetic_matches_fit(steps=1)
