"""All-reduce latency and bus bandwidth between local processes (issue 29; never asserted in tests).

Every path runs in the same worker processes, interleaved (repetition, then size, then path), so they
share the machine's state: mirrorlab over shared memory (each all-reduce algorithm, and "auto", the one
``collective/algorithm_choice.py`` picks for the size), mirrorlab over gRPC (ring, pipelined ring, auto)
when ``mirrorlab.backend.grpc_transport`` exists, without ("grpc ...") and with TCP data lanes ("grpc+lane ...",
``backend/data_lane.py``), ``torch.distributed`` gloo when torch is importable, and
TensorFlow's ``MultiWorkerMirroredStrategy`` with the RING implementation (CPU collectives over its own
gRPC) when tensorflow is importable. Each repetition starts after a barrier and counts the slowest rank's
time; busbw = bytes / time x 2(n-1)/n, as nccl-tests define it.

Run: ``python benchmarks/bench_allreduce.py [--sizes 4K,64K,1M,16M,64M] [--procs 2,4] [--reps 7] [--reuse-memory]
[--paths "grpc ring,tf ring"]``; ``--gpu``: the NCCL benchmark (``bench_nccl.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from mirrorlab.backend.malloc_tuning import reuse_freed_memory_env
from mirrorlab.backend.shm_transport import ShmTransport
from mirrorlab.collective.algorithm_choice import choose_all_reduce
from mirrorlab.collective.allreduce_gather_reduce import allreduce_gather_reduce
from mirrorlab.collective.allreduce_halving_doubling import allreduce_halving_doubling
from mirrorlab.collective.allreduce_ring import allreduce_ring
from mirrorlab.collective.allreduce_ring_pipelined import allreduce_ring_pipelined
from mirrorlab.communication import CommunicationImplementation
from mirrorlab.collective.barrier import barrier
from mirrorlab.collective.communicator import Communicator
from mirrorlab.collective.message import Fingerprint
from mirrorlab.tensor import frozen

DEFAULT_SIZES = "4K,64K,1M,16M,64M"
HAS_GRPC = importlib.util.find_spec("mirrorlab.backend.grpc_transport") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TF = importlib.util.find_spec("tensorflow") is not None


def parse_size(text: str) -> int:
    """``4K`` -> 4096 bytes, ``64M`` -> 64 MiB, ``100`` -> 100 bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def busbw(nbytes: int, seconds: float, n: int) -> float:
    """Bus bandwidth in bytes/s (nccl-tests): algorithm bandwidth x 2(n-1)/n."""
    return nbytes / seconds * 2 * (n - 1) / n


def chosen_all_reduce(inst: object, x: np.ndarray) -> object:
    """What the strategy runs for ``x`` with AUTO (``algorithm_choice.choose_all_reduce``)."""
    return choose_all_reduce(x.nbytes, inst.size, CommunicationImplementation.AUTO).run(inst, x)


SHM_ALGORITHMS = {"ring": allreduce_ring, "halving-doubling": allreduce_halving_doubling,
                  "gather-reduce": allreduce_gather_reduce, "pipelined ring": allreduce_ring_pipelined,
                  "auto": chosen_all_reduce}
GRPC_ALGORITHMS = ("ring", "gather-reduce", "pipelined ring", "auto")


def _mirrorlab_paths(prefix: str, comm: Communicator, names: Iterable[str]) -> dict[str, Callable]:
    """One timed path per algorithm name, over ``comm``."""
    def path(name: str) -> Callable[[np.ndarray], object]:
        def run(x: np.ndarray) -> object:
            inst = comm.start(Fingerprint("all_reduce", "float32", x.shape, name), "bench", None)
            result = SHM_ALGORITHMS[name](inst, x)
            inst.done()
            return result
        return run
    return {f"{prefix} {name}": path(name) for name in names}


def _gloo_path(rank: int, n: int, port: int) -> Callable[[np.ndarray], object]:
    import torch.distributed as dist
    import torch
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    tensors: dict[int, object] = {}

    def run(x: np.ndarray) -> object:
        tensor = tensors.setdefault(x.size, torch.from_numpy(x.copy()))
        dist.all_reduce(tensor)
        return tensor
    return run


def _tf_path(rank: int, n: int, ports: list[int]) -> Callable[[np.ndarray], object]:
    """TF 2.21's MWMS with CommunicationImplementation.RING: the all-reduce TF users run over gRPC."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                          "task": {"type": "worker", "index": rank}})
    import tensorflow as tf
    ring = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=ring)
    tensors: dict[int, object] = {}

    def all_reduce(t: object) -> object:
        return strategy.run(lambda v: tf.distribute.get_replica_context().all_reduce("SUM", v), args=(t,))

    def run(x: np.ndarray) -> object:
        if x.size not in tensors:  # a per-replica value, placed on the replica's device as MWMS needs
            tensors[x.size] = strategy.experimental_distribute_values_from_function(lambda _: tf.constant(x))
        return all_reduce(tensors[x.size]).numpy()
    return run


def _grpc_comm(rank: int, n: int, ports: list[int], names: list[str], lanes: bool) -> tuple[Communicator, object]:
    """A communicator over gRPC, with data lanes for payloads of at least the default size when ``lanes``."""
    from mirrorlab.backend.data_lane import DataLanes
    from mirrorlab.backend.grpc_transport import GrpcTransport, PeerNode
    token = f"bench-{ports[0]}"
    node = PeerNode(rank, names, [f"127.0.0.1:{p}" for p in ports], token=token)
    lane = DataLanes(node, token) if lanes else None
    node.start()
    if lane is not None and len(lane.open(120)) != n - 1:
        raise RuntimeError("could not open a data lane to every peer")
    return Communicator(rank, n, names, GrpcTransport(node, group=0)), node


def worker(rank: int, n: int, config: dict, out: str) -> None:
    """One benchmark process: set up every path, then time them interleaved; save times as ``<rank>.npy``."""
    names = [f"/job:worker/task:{r}" for r in range(n)]
    closers, grpc_comms = [], {}
    for prefix, lanes in (("grpc", False), ("grpc+lane", True)):
        if config["grpc"] and _wanted(prefix, config["only"]):
            grpc_comms[prefix], node = _grpc_comm(rank, n, config[f"{prefix} ports"], names, lanes)
            closers.append(node.close)
    with ShmTransport.connect(config["session"], rank, n, names=names, timeout=120) as transport:
        comm = Communicator(rank, n, names, transport)
        paths = _mirrorlab_paths("shm", comm, SHM_ALGORITHMS)
        for prefix, grpc_comm in grpc_comms.items():
            paths.update(_mirrorlab_paths(prefix, grpc_comm, GRPC_ALGORITHMS))
        if config["torch"]:
            paths["gloo"] = _gloo_path(rank, n, config["gloo_port"])
        if config["tf"]:
            paths["tf ring"] = _tf_path(rank, n, config["tf_ports"])
        paths = {name: run for name, run in paths.items() if config["only"] is None or name in config["only"]}
        inputs = [frozen(np.full(size // 4, rank + 1, np.float32)) for size in config["sizes"]]
        times = np.zeros((config["reps"], len(inputs), len(paths)))
        for rep in range(config["warmup"] + config["reps"]):
            for s, x in enumerate(inputs):
                for p, run in enumerate(paths.values()):
                    inst = comm.start(Fingerprint("barrier"), "bench barrier", None)
                    barrier(inst)
                    inst.done()
                    start = time.perf_counter()
                    run(x)
                    if rep >= config["warmup"]:
                        times[rep - config["warmup"], s, p] = time.perf_counter() - start
        np.save(Path(out) / f"{rank}.npy", times, allow_pickle=False)
        (Path(out) / "paths.txt").write_text("\n".join(paths))
    for close in closers:
        close()


def _wanted(prefix: str, only: list[str] | None) -> bool:
    """Whether any path of transport ``prefix`` (e.g. "grpc+lane") is to be timed."""
    return only is None or any(name.split(" ")[0] == prefix for name in only)


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def measure(n: int, sizes: list[int], reps: int, warmup: int, use_grpc: bool, use_torch: bool,
            timeout: float = 1800.0, reuse_memory: bool = False, use_tf: bool = False,
            only: list[str] | None = None) -> dict[str, np.ndarray]:
    """Per path, an array (reps, sizes) of the slowest rank's seconds, from ``n`` spawned processes
    (started with ``malloc_tuning``'s environment when ``reuse_memory``: it applies to every path);
    ``only`` keeps the paths of those names."""
    ports = _free_ports(3 * n + 1)
    config = {"session": f"bench{uuid.uuid4().hex[:10]}", "sizes": sizes, "reps": reps, "warmup": warmup,
              "grpc": use_grpc, "torch": use_torch, "tf": use_tf, "only": only, "grpc ports": ports[:n],
              "grpc+lane ports": ports[2 * n + 1:], "gloo_port": ports[n], "tf_ports": ports[n + 1:2 * n + 1]}
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as out:
        processes = [context.Process(target=worker, args=(r, n, config, out), daemon=True) for r in range(n)]
        saved = dict(os.environ)
        os.environ.update(reuse_freed_memory_env() if reuse_memory else {})
        try:
            for p in processes:
                p.start()  # a spawned process starts with this process's environment
        finally:
            os.environ.clear()
            os.environ.update(saved)
        end = time.monotonic() + timeout
        for p in processes:
            p.join(max(0.1, end - time.monotonic()))
        for p in processes:
            if p.is_alive():
                p.kill()
                p.join(5)
        if any(p.exitcode != 0 for p in processes):
            raise RuntimeError(f"benchmark workers exited with {[p.exitcode for p in processes]}")
        slowest = np.max([np.load(Path(out) / f"{r}.npy", allow_pickle=False) for r in range(n)], axis=0)
        names = (Path(out) / "paths.txt").read_text().split("\n")
    return {name: slowest[:, :, k] for k, name in enumerate(names)}


def report(n: int, sizes: list[int], results: dict[str, np.ndarray]) -> str:
    """A table: per size and path, min/median latency, busbw at the median, and the ratios of gloo's median,
    of the same transport's ring's median (what AUTO ran up to 8 workers before the choice by size) and of
    TF's MWMS ring's median to it (above 1: this path is faster)."""
    reps = len(next(iter(results.values())))
    lines = [f"\n{n} processes, float32 all-reduce (slowest rank per repetition; {reps} reps)",
             (f"{'size':>8} {'path':<22} {'min ms':>9} {'median ms':>10} {'busbw GB/s':>11} {'vs gloo':>8} "
              f"{'vs ring':>8} {'vs tf':>8}")]
    for s, size in enumerate(sizes):
        for name, times in results.items():
            median = float(np.median(times[:, s]))
            ring = f"{name.split(' ')[0]} ring"
            ratios = [f"{np.median(results[other][:, s]) / median:7.2f}x" if other in results and other != name else ""
                      for other in ("gloo", ring, "tf ring")]
            lines.append(f"{_human(size):>8} {name:<22} {times[:, s].min() * 1e3:9.3f} {median * 1e3:10.3f} "
                         f"{busbw(size, median, n) / 1e9:11.3f} {ratios[0]:>8} {ratios[1]:>8} {ratios[2]:>8}")
    return "\n".join(lines)


def _human(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated byte sizes (4K, 1M, ...)")
    parser.add_argument("--procs", default="2,4", help="comma-separated process counts")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--no-torch", action="store_true", help="leave gloo out even when torch is importable")
    parser.add_argument("--no-grpc", action="store_true", help="leave the gRPC path out even when it exists")
    parser.add_argument("--no-tf", action="store_true",
                        help="leave TF's MWMS ring out even when tensorflow is importable")
    parser.add_argument("--paths", default=None,
                        help='comma-separated path names to time, e.g. "grpc ring,tf ring" (default: all present)')
    parser.add_argument("--reuse-memory", action="store_true",
                        help="start the workers with glibc's large-buffer reuse (backend/malloc_tuning.py)")
    parser.add_argument("--gpu", action="store_true",
                        help="instead: NCCL through mirrorlab vs CuPy's own call (bench_nccl.py; skips without GPUs)")
    args = parser.parse_args(argv)
    if args.gpu:  # GPU section: bench_nccl.py
        from bench_nccl import main as gpu_main

        gpu_main(["--sizes", args.sizes])
        return
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    use_torch, use_grpc = HAS_TORCH and not args.no_torch, HAS_GRPC and not args.no_grpc
    only = [name.strip() for name in args.paths.split(",")] if args.paths else None
    use_torch = use_torch and (only is None or "gloo" in only)  # set up only what will be timed
    use_tf = HAS_TF and not args.no_tf and (only is None or "tf ring" in only)
    print(f"host: {os.cpu_count()} CPUs; gloo: {'yes' if use_torch else 'skipped (torch not importable)'}; "
          f"TF MWMS ring: {'yes' if use_tf else 'skipped (tensorflow not importable)'}; "
          f"gRPC: {'yes' if use_grpc else 'skipped (mirrorlab.backend.grpc_transport not present)'}; "
          f"glibc buffer reuse: {'on' if args.reuse_memory else 'off'}")
    for n in (int(p) for p in args.procs.split(",")):
        print(report(n, sizes, measure(n, sizes, args.reps, args.warmup, use_grpc, use_torch,
                                       reuse_memory=args.reuse_memory, use_tf=use_tf, only=only)), flush=True)


if __name__ == "__main__":
    main()
