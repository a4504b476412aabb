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
    """Runs strategies in this process; multi-worker clusters need the real backend or a SimCluster."""

    def local_runtime(self, devices: Sequence[str]) -> WorkerRuntime:
        return WorkerRuntime(Communicator(0, 1, ["/job:localhost/replica:0/task:0"], None), devices)

    def cluster_runtime(self, cluster_spec: ClusterSpec, task_type: str, task_id: int, rank: int,
                        names: Sequence[str], rpc_layer: str | None) -> WorkerRuntime:
        raise RuntimeError(
            f"TF_CONFIG describes a cluster of {len(names)} workers ({task_type}:{task_id} is this task), but "
            "this process is not a simulated worker and this mirrorlab version has no real multi-process "
            "backend yet. Fix: run the program on a simulated cluster, "
            "`mirrorlab.sim.SimCluster(workers=N).run(program)`, or unset TF_CONFIG for single-worker mode.")

    def default_device_type(self) -> tuple[str, int]:
        gpus = count_gpus()
        return ("GPU", gpus) if gpus else ("CPU", 1)
