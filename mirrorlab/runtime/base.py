"""The two interfaces between the strategy and the world it runs in."""

from __future__ import annotations

import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from ..cluster import ClusterSpec
from ..collective.communicator import Communicator
from ..trace import Trace

__all__ = ["WorkerRuntime", "Environment"]


class WorkerRuntime:
    """What one worker's strategy is bound to: its devices, its member of the collective group, its
    clock and trace, and the hooks where a simulator injects faults (no-ops here)."""

    transport_name = "local"  # what carries this worker's collectives ("simulated", "grpc", "grpc+lane", "shm")

    def __init__(self, comm: Communicator, devices: Sequence[str], trace: Trace | None = None) -> None:
        self.comm = comm
        self.devices = tuple(devices)
        self.trace = trace
        self._owned: list = []

    def now(self) -> float:
        return self.comm.now()

    def before_collective(self, seq: int) -> None:
        """Called before collective instance ``seq`` starts."""

    def before_step(self, step: int) -> None:
        """Called before the ``step``-th ``strategy.run`` (counting from 1)."""

    def replica_order(self, replicas: list[int]) -> list[int]:
        """The order in which local replicas run their next stretch between sync points."""
        return replicas

    def post_copies(self, key: tuple, post: object) -> dict[int, object]:
        """Post what this worker's copies of a variable hold (``key``: the variable and step; see
        ``distribute.mirror_check``) and return what other workers posted for the same key so far, by rank: the
        simulator's workers share one process; a plain or real worker has no one to compare with here."""
        return {}

    def adopt(self, resource: object) -> None:
        """Keep ``resource`` (something with ``close()``, e.g. a replica pool) until ``close()``."""
        self._owned.append(resource)

    def close(self) -> None:
        """Release what this runtime adopted (the simulator calls it when a worker ends)."""
        for resource in self._owned:
            resource.close()
        self._owned.clear()

    def make_queue(self) -> Any:
        """A queue (``put``, blocking ``get``) between the threads ``spawn`` starts and the caller."""
        return queue.SimpleQueue()

    def spawn(self, target: Callable[[], None], name: str) -> Any:
        """Start a daemon thread that inherits this thread's environment binding (replica threads)."""
        thread = threading.Thread(target=self.bound_to_caller(target), name=name, daemon=True)
        thread.start()
        return thread

    @staticmethod
    def bound_to_caller(target: Callable[[], None]) -> Callable[[], None]:
        """``target``, run bound to the environment of the thread calling this (wherever it then runs)."""
        from .binding import current_environment, bind_environment

        env = current_environment()

        def main() -> None:
            bind_environment(env)
            target()

        return main


class Environment(ABC):
    """Builds worker runtimes: a plain process, a simulated worker, or a real backend process; and is the one
    interface through which library code meets its worker: its clock (``now``, ``sleep``), fault points
    (``io_point``; the runtime's ``before_step``/``before_collective``), op seeds, termination notices and
    per-worker environment variables.

    ``process_state`` holds what a real worker keeps once per process (e.g. Keras' automatic name counters), so
    simulated workers sharing one process each keep their own."""

    owns_process = True  # whether process-wide signals (SIGTERM) are this worker's; not a simulated worker's

    @property
    def process_state(self) -> dict:
        if not hasattr(self, "_process_state"):
            self._process_state: dict = {}
        return self._process_state

    @abstractmethod
    def local_runtime(self, devices: Sequence[str]) -> WorkerRuntime:
        """A single-worker runtime over ``devices`` (MirroredStrategy, or MWMS without a cluster)."""

    @abstractmethod
    def cluster_runtime(self, cluster_spec: ClusterSpec, task_type: str, task_id: int, rank: int,
                        names: Sequence[str], rpc_layer: str | None) -> WorkerRuntime:
        """This task's runtime in the multi-worker cluster; ``rank`` is its id in the cluster and
        ``names[r]`` worker r's task name."""

    def now(self) -> float:
        """Seconds since the epoch on this environment's clock (the wall clock; virtual in the simulator)."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this environment's clock (in the simulator: virtual time, letting others run)."""
        time.sleep(seconds)

    def termination_noticed(self) -> bool:
        """Whether this worker has been told it will be terminated (a simulated preemption; a real process learns
        it from SIGTERM, which ``PreemptionCheckpointHandler`` catches itself)."""
        return False

    def io_point(self, what: str) -> None:
        """A point inside a checkpoint save where a fault may strike (the simulator's ``Crash(during_save=)``, a
        kill test's hook): ``checkpoint-commit`` (data written, manifest not), ``checkpoint-manifest`` (manifest
        written, state file not) or ``checkpoint-sweep`` (state recorded, an old checkpoint half deleted). A real
        process does nothing there."""

    def next_op_seed(self) -> int | None:
        """A seed for an op created without one (a shuffle, an initializer), the same on every run of a simulated
        or real cluster; None in a plain process (fresh OS entropy, as TF)."""
        return None

    environ: dict[str, str | None] | None = None
    """This worker's own environment variables over the process's (a simulated worker's ``TF_CONFIG``; None means
    the process's ``os.environ`` as it is)."""

    @abstractmethod
    def default_device_type(self) -> tuple[str, int]:
        """("GPU", n) when this worker has n GPUs, else ("CPU", 1)."""
