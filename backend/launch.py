"""``mirrorlab launch``: run a script as N local worker processes of one cluster, as a TFJob would on N hosts.

Ports are found free on 127.0.0.1, the cluster token is fresh, each worker gets its own TF_CONFIG, every
output line is prefixed with its task, SIGINT/SIGTERM are forwarded, and the first worker to fail decides
the exit code: the others get a grace period to report their own (named) errors, then are stopped.
Workers start with ``malloc_tuning``'s glibc settings (freed large buffers reused); a variable already set
in the launcher's environment wins.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

from .gpu_devices import launch_gpu_envs
from .malloc_tuning import reuse_freed_memory_env
from .ports import free_ports
from .settings import DEVICES_VAR, TOKEN_VAR

__all__ = ["register", "launch", "tf_configs"]


def tf_configs(addresses: Sequence[str]) -> list[str]:
    """One TF_CONFIG per worker of a cluster of ``addresses``."""
    cluster = {"worker": list(addresses)}
    return [json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}) for i in range(len(addresses))]


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``mirrorlab launch`` to the CLI."""
    parser = commands.add_parser("launch", help="run a script as N local worker processes over gRPC")
    parser.add_argument("--workers", type=int, required=True, help="worker processes to start")
    parser.add_argument("--devices-per-worker", type=int, default=1, help="CPU devices per worker (default 1)")
    parser.add_argument("--gpus-per-worker", type=int, default=0,
                        help="GPUs per worker, each worker its own slice of this host's GPUs (default 0: CPUs)")
    parser.add_argument("--port", type=int, default=None,
                        help="first port (workers use PORT, PORT+1, ...); default: free ports found on 127.0.0.1")
    parser.add_argument("--stop-grace", type=float, default=10.0,
                        help="seconds the other workers get to end on their own after one fails (default 10)")
    parser.add_argument("script", help="the Python script every worker runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    for name, value in (("--workers", args.workers), ("--devices-per-worker", args.devices_per_worker)):
        if value < 1:
            print(f"mirrorlab launch: {name}={value}: need at least 1.", file=sys.stderr)
            return 2
    if args.gpus_per_worker < 0:
        print(f"mirrorlab launch: --gpus-per-worker={args.gpus_per_worker}: need 0 or more.", file=sys.stderr)
        return 2
    if not os.path.isfile(args.script):
        print(f"mirrorlab launch: script {args.script!r} not found.", file=sys.stderr)
        return 2
    try:
        gpu_envs = _gpu_envs(args.workers, args.gpus_per_worker)
    except ValueError as exc:
        print(f"mirrorlab launch: {exc}", file=sys.stderr)
        return 2
    return launch(args.script, args.args, args.workers, args.devices_per_worker, args.port, args.stop_grace,
                  gpu_envs=gpu_envs)


def _gpu_envs(workers: int, gpus_per_worker: int) -> list[dict[str, str]]:
    """Each worker's GPU slice; CuPy is consulted only when GPUs are asked for."""
    if not gpus_per_worker:
        return launch_gpu_envs(workers, 0, 0, None)
    from mirrorlab.runtime.local import count_gpus

    return launch_gpu_envs(workers, gpus_per_worker, count_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))


def launch(script: str, script_args: Sequence[str], workers: int, devices_per_worker: int = 1,
           port: int | None = None, stop_grace: float = 10.0, out: IO[str] = sys.stdout,
           gpu_envs: Sequence[dict[str, str]] | None = None) -> int:
    """Run ``script`` on ``workers`` local processes; returns 0, or the first failing worker's exit code.
    ``gpu_envs[i]`` (``gpu_devices.launch_gpu_envs``) gives worker ``i`` its GPUs."""
    ports = list(range(port, port + workers)) if port else free_ports(workers)
    configs = tf_configs([f"127.0.0.1:{p}" for p in ports])
    token = secrets.token_hex(16)
    procs, relays, lock = [], [], threading.Lock()
    for index, config in enumerate(configs):
        env = reuse_freed_memory_env() | dict(os.environ)  # a setting the user made wins
        env.update({"TF_CONFIG": config, "PYTHONUNBUFFERED": "1", TOKEN_VAR: token,
                    DEVICES_VAR: str(devices_per_worker)})
        env.update(gpu_envs[index] if gpu_envs else {})
        proc = subprocess.Popen([sys.executable, script, *script_args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        procs.append(proc)
        relays.append(threading.Thread(target=_relay, args=(proc.stdout, f"[worker {index}] ", out, lock),
                                       daemon=True))
        relays[-1].start()
    forwarded = _forward_signals(procs)
    try:
        return _supervise(procs, stop_grace, out, lock)
    finally:
        for sig, previous in forwarded.items():
            signal.signal(sig, previous)
        for relay in relays:
            relay.join(2.0)  # the workers' last lines


def _relay(stream: IO[bytes], prefix: str, out: IO[str], lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        with lock:
            out.write(prefix + line.decode("utf-8", "replace").rstrip("\n") + "\n")
            out.flush()
    stream.close()


def _forward_signals(procs: list[subprocess.Popen]) -> dict:
    """Pass SIGINT and SIGTERM on to every worker still running (only from the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def forward(sig: int, frame: object) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(sig)

    return {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}


def _supervise(procs: list[subprocess.Popen], stop_grace: float, out: IO[str], lock: threading.Lock) -> int:
    """Wait for all workers; after the first failure, give the rest ``stop_grace`` s, then SIGTERM, then SIGKILL.
    Returns 0, or the exit code of the first worker to fail (128 + N for signal N)."""
    ended: queue.SimpleQueue = queue.SimpleQueue()  # (index, code) in the order the workers ended
    for index, proc in enumerate(procs):
        threading.Thread(target=lambda i=index, p=proc: ended.put((i, p.wait())), daemon=True).start()
    first: tuple[int, int] | None = None
    for _ in procs:
        try:
            index, code = ended.get(timeout=None if first is None else stop_grace)
        except queue.Empty:
            _stop(procs)
            break
        if code != 0 and first is None:
            first = (index, code)
            with lock:
                out.write(f"[launch] worker {index} exited with {_describe(code)}; stopping the others within "
                          f"{stop_grace:g} s\n")
    if first is None:
        return 0
    return 128 - first[1] if first[1] < 0 else first[1]


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    end = time.monotonic() + 3.0
    for proc in procs:
        try:
            proc.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _describe(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
