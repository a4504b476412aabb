"""NCCL all-reduce through mirrorlab against CuPy's own ``NcclCommunicator.allReduce`` on the same buffers
(issue 29's GPU target: within 10%); run as ``bench_allreduce.py --gpu`` or on its own. Never asserted in tests.

With two or more GPUs, two processes (one GPU each; NCCL refuses two ranks on one GPU) time, interleaved per
repetition and size: ``cupy nccl`` (the raw call, then a stream synchronize), ``mirrorlab nccl`` (the backend's
NCCL collective inside a collective instance: id exchange done, stream wait by polling) and ``mirrorlab
all_reduce`` (a whole ``CollectiveGroup.all_reduce`` as ``strategy.reduce`` runs it, NCCL chosen). With one GPU,
one process times the first two on a one-rank communicator: mirrorlab's overhead around the same NCCL call.
Each repetition counts the slowest rank; busbw = bytes / time x 2(n-1)/n (nccl-tests).

Run: ``python benchmarks/bench_nccl.py [--sizes 4K,64K,1M,16M,64M] [--reps 20]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from bench_allreduce import _free_ports, _human, busbw, parse_size
from mirrorlab.placement import gpu_module

DEFAULT_SIZES = "4K,64K,1M,16M,64M"
RAW, LANE, GROUP = "cupy nccl", "mirrorlab nccl", "mirrorlab all_reduce"


def worker(rank: int, n: int, config: dict) -> tuple[list[str], np.ndarray]:
    """One process on its own GPU: set up NCCL twice (raw and mirrorlab's), time each path; returns the path
    names and the seconds (reps, sizes, paths)."""
    if n > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)  # before CuPy loads: this process sees its GPU as 0
    import cupy
    from cupy.cuda import nccl

    from mirrorlab.aggregation import ReduceOp
    from mirrorlab.backend.gpu_lane import GpuLane
    from mirrorlab.backend.grpc_transport import GrpcTransport, PeerNode
    from mirrorlab.backend.nccl_comm import new_communicator
    from mirrorlab.backend.nccl_unique_id import UniqueIdExchange, id_bytes
    from mirrorlab.collective.barrier import barrier
    from mirrorlab.collective.communicator import Communicator
    from mirrorlab.collective.group import CollectiveGroup
    from mirrorlab.collective.message import Fingerprint
    from mirrorlab.communication import CommunicationImplementation, Options

    names = [f"/job:worker/replica:0/task:{r}" for r in range(n)]
    node = PeerNode(rank, names, [f"127.0.0.1:{p}" for p in config["ports"]], token=f"bench-{config['ports'][0]}")
    ids = UniqueIdExchange(node)
    node.start()
    comm = Communicator(rank, n, names, GrpcTransport(node, group=0) if n > 1 else None)
    lane = GpuLane(0, ids, 120.0, True, lambda: None)
    comm.lane = lane
    group = CollectiveGroup(comm, 1, [f"{names[rank]}/device:GPU:0"],
                            Options(implementation=CommunicationImplementation.NCCL))
    if rank == 0:
        raw_id = id_bytes(nccl.get_unique_id())
        ids.publish(1, raw_id)
    else:
        raw_id = ids.fetch(1, time.monotonic() + 120, lambda: None)
    raw = new_communicator(nccl, n, raw_id, rank)
    stream = cupy.cuda.Stream(non_blocking=True)

    def run_raw(x: object, y: object) -> None:
        raw.allReduce(x.data.ptr, y.data.ptr, x.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
        stream.synchronize()

    def run_lane(x: object, y: object) -> None:
        inst = comm.start(Fingerprint("all_reduce", "float32", tuple(x.shape), "SUM"), "bench", None)
        lane.nccl.all_reduce(inst, x)
        inst.done()

    def run_group(x: object, y: object) -> None:
        group.all_reduce(ReduceOp.SUM, [[x]], "bench")

    paths = {RAW: run_raw, LANE: run_lane, **({GROUP: run_group} if n > 1 else {})}
    inputs = [cupy.full(size // 4, rank + 1, cupy.float32) for size in config["sizes"]]
    outputs = [cupy.empty_like(x) for x in inputs]
    times = np.zeros((config["reps"], len(inputs), len(paths)))
    for rep in range(config["warmup"] + config["reps"]):
        for s, (x, y) in enumerate(zip(inputs, outputs)):
            for p, run in enumerate(paths.values()):
                if n > 1:
                    inst = comm.start(Fingerprint("barrier"), "bench barrier", None)
                    barrier(inst)
                    inst.done()
                cupy.cuda.Device().synchronize()
                start = time.perf_counter()
                run(x, y)
                if rep >= config["warmup"]:
                    times[rep - config["warmup"], s, p] = time.perf_counter() - start
    lane.close()
    raw.abort()
    node.close()
    return list(paths), times


def measure(n: int, sizes: list[int], reps: int, warmup: int, timeout: float = 600.0) -> dict[str, np.ndarray]:
    """Per path, (reps, sizes) of the slowest rank's seconds from ``n`` spawned processes."""
    config = {"sizes": sizes, "reps": reps, "warmup": warmup, "ports": _free_ports(n)}
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = [pool.submit(worker, r, n, config) for r in range(n)]
        outcomes = [run.result(timeout) for run in runs]
    names = outcomes[0][0]
    slowest = np.max([times for _, times in outcomes], axis=0)
    return {name: slowest[:, :, k] for k, name in enumerate(names)}


def report(n: int, sizes: list[int], results: dict[str, np.ndarray]) -> str:
    """Per size and path: min/median latency, busbw at the median, and CuPy's median over this one's (above
    0.91: within the 10% target)."""
    reps = len(next(iter(results.values())))
    lines = [f"\n{n} process(es), one GPU each, float32 NCCL all-reduce ({reps} reps, slowest rank)",
             f"{'size':>8} {'path':<22} {'min ms':>9} {'median ms':>10} {'busbw GB/s':>11} {'cupy/this':>10}"]
    for s, size in enumerate(sizes):
        raw = float(np.median(results[RAW][:, s]))
        for name, times in results.items():
            median = float(np.median(times[:, s]))
            lines.append(f"{_human(size):>8} {name:<22} {times[:, s].min() * 1e3:9.3f} {median * 1e3:10.3f} "
                         f"{busbw(size, median, n) / 1e9:11.3f} {raw / median:9.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated byte sizes (4K, 1M, ...)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    found = gpu_module()
    if found is None:
        print("GPU benchmark skipped: it needs CuPy (pip install 'mirrorlab[cuda12]' or [cuda13]) and a CUDA GPU; "
              "none is visible here.")
        return 0
    n = 2 if found[1] >= 2 else 1
    if n == 1:
        print("1 GPU visible: NCCL refuses two ranks on one GPU, so this times a one-rank communicator (mirrorlab's "
              "overhead around the same NCCL call); two GPUs time two processes.")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    print(report(n, sizes, measure(n, sizes, args.reps, args.warmup)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
