"""The plain-process environment: one worker, local devices, wall-clock time, no faults."""

from __future__ import annotations

from collections.abc import Sequence

from ..cluster import ClusterSpec
from ..collective.communicator import Communicator
from ..placement import gpu_module
from .base import Environment, WorkerRuntime

__all__ = ["LocalEnvironment", "count_gpus"]


def count_gpus() -> int:
    """GPUs CuPy can see; 0 without CuPy (never imported unless installed)."""
    found = gpu_module()
    return found[1] if found is not None else 0


class LocalEnvironment(Environment):
    """Runs strategies in this process; a multi-worker cluster given by an explicit resolver is handed to the
    real backend (a process whose TF_CONFIG names one gets the backend environment from the start)."""

    _backend: Environment | None = None

    def local_runtime(self, devices: Sequence[str]) -> WorkerRuntime:
        return WorkerRuntime(Communicator(0, 1, ["/job:localhost/replica:0/task:0"], None), devices)

    def cluster_runtime(self, cluster_spec: ClusterSpec, task_type: str, task_id: int, rank: int,
                        names: Sequence[str], rpc_layer: str | None) -> WorkerRuntime:
        if self._backend is None:
            from mirrorlab.backend.environment import BackendEnvironment

            self._backend = BackendEnvironment()
        return self._backend.cluster_runtime(cluster_spec, task_type, task_id, rank, names, rpc_layer)

    def default_device_type(self) -> tuple[str, int]:
        gpus = count_gpus()
        return ("GPU", gpus) if gpus else ("CPU", 1)
