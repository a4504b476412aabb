"""Per-worker differences of a simulated cluster (``WorkerSetup``) and the start-up checks they meet.

A real cluster's hosts can differ: another ``TF_CONFIG``, another ``LD_LIBRARY_PATH``, another library
version or device count. ``SimCluster(setups=[WorkerSetup(1, ...)])`` gives one simulated worker such a
host, and ``check_rendezvous`` (run when the worker creates its strategy) fails the way a real cluster
would, but at once and naming both workers, until the backend's rendezvous handshake replaces it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mirrorlab import errors
from mirrorlab._version import __version__
from mirrorlab.cluster import ClusterSpec

if TYPE_CHECKING:
    from .environment import SimWorkerEnv

__all__ = ["WorkerSetup", "check_rendezvous", "fingerprint_of"]

_LOOPBACK = ("localhost", "127.", "::1", "[::1]")


@dataclass(frozen=True)
class WorkerSetup:
    """How simulated worker ``worker``'s host differs: environment variables on top of the simulated ones
    (``TF_CONFIG`` replaces the generated one), a device count, and fingerprint entries such as
    ``{"tensorflow": "2.20.0", "cuda_driver": "535.104"}`` that the start-up check compares across workers."""

    worker: int
    environ: dict[str, str] = field(default_factory=dict)
    devices: int | None = None
    fingerprint: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.devices is not None and (not isinstance(self.devices, int) or self.devices < 1):
            raise ValueError(f"WorkerSetup(worker={self.worker}, devices={self.devices!r}): need at least 1 device.")
        for name in ("environ", "fingerprint"):
            for key, value in getattr(self, name).items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise ValueError(f"WorkerSetup(worker={self.worker}).{name}[{key!r}] = {value!r}: keys and "
                                     "values must be strings.")


def fingerprint_of(env: "SimWorkerEnv") -> dict[str, str]:
    """What must agree across workers: mirrorlab's version, device type and count, LD_LIBRARY_PATH, plus the
    setup's own entries (library versions, CUDA driver...)."""
    setup = env.setup
    prints = {"mirrorlab": __version__, "device_type": env.run.config.device_type,
              "device_count": str(env.device_count), "LD_LIBRARY_PATH": setup.environ.get("LD_LIBRARY_PATH", "")}
    prints.update(setup.fingerprint)
    return prints


def _task_name(env: "SimWorkerEnv") -> str:
    return "/job:{}/replica:0/task:{}".format(*env.task)


def _check_fingerprints(env: "SimWorkerEnv") -> None:
    mine = fingerprint_of(env)
    for peer in env.run.envs:
        if peer is env:
            continue
        theirs = fingerprint_of(peer)
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                raise errors.FailedPreconditionError(
                    f"Workers disagree at start-up: worker {env.worker} ({_task_name(env)}) has {key}="
                    f"{mine.get(key)!r} but worker {peer.worker} ({_task_name(peer)}) has {key}="
                    f"{theirs.get(key)!r}. MultiWorkerMirroredStrategy needs every worker to run the same "
                    f"software on the same device layout (a mismatch shows up later as shape mismatches or "
                    f"hangs). Fix: give every host the same {key}.", _task_name(env))


def _endpoint(address: str, own_host: str) -> tuple[str, str]:
    """(host, port) that ``address`` reaches from ``own_host``: a loopback name is the host itself."""
    host, _, port = address.rpartition(":")
    return (own_host if host.startswith(_LOOPBACK) else host), port


def _host(env: "SimWorkerEnv") -> str:
    """The simulated machine a worker runs on: the host of its generated address (one machine per worker)."""
    return env.run.cluster_spec.task_address(*env.task).rpartition(":")[0]


def _listening(env: "SimWorkerEnv") -> tuple[str, str] | None:
    """Where a worker's server listens: its own address in its own TF_CONFIG, on its own host (None when
    that TF_CONFIG names no address for it: that worker fails at its own start-up)."""
    address = _own_address(env.environ.get("TF_CONFIG") or "", *env.task)
    return None if address is None else _endpoint(address, _host(env))


@functools.lru_cache(maxsize=4096)
def _own_address(tf_config: str, job: str, index: int) -> str | None:
    """The address a TF_CONFIG text gives task ``job:index`` (None if it gives none); cached, because every
    worker starting up asks it of every peer's TF_CONFIG."""
    try:
        return ClusterSpec(json.loads(tf_config)["cluster"]).task_address(job, index)
    except (ValueError, KeyError, TypeError):
        return None


def _check_addresses(env: "SimWorkerEnv", spec: ClusterSpec) -> None:
    tasks = [(job, index) for job in spec.jobs for index in spec.task_indices(job)]
    seen: dict[str, tuple[str, int]] = {}
    for job, index in tasks:
        address = spec.task_address(job, index)
        if address in seen:
            other = "/job:{}/replica:0/task:{}".format(*seen[address])
            raise errors.UnknownError(
                f"Could not start gRPC server: worker {env.worker} ({_task_name(env)}) reads a TF_CONFIG where "
                f"{other} and /job:{job}/replica:0/task:{index} share the address {address!r}, so two servers "
                "would bind the same port. Fix: give every task its own host:port in TF_CONFIG.", _task_name(env))
        seen[address] = (job, index)
    for peer in env.run.envs:
        if peer is env or peer.task not in tasks:
            continue
        target = _endpoint(spec.task_address(*peer.task), _host(env))
        actual = _listening(peer)
        if actual is not None and target != actual:
            raise errors.UnavailableError(
                f"Worker {env.worker} ({_task_name(env)}) cannot reach worker {peer.worker} ({_task_name(peer)}): "
                f"its TF_CONFIG says {spec.task_address(*peer.task)!r}, which from its own host {_host(env)!r} "
                f"means {':'.join(target)}, but worker {peer.worker} listens on {':'.join(actual)}. TF would wait "
                "for it forever. Fix: list every task under its machine's real host name in every worker's "
                "TF_CONFIG; 'localhost' works only when all workers share one machine.", _task_name(env))


def check_rendezvous(env: "SimWorkerEnv", spec: ClusterSpec) -> None:
    """Start-up checks of a worker creating its strategy: the cluster's shape, addresses and fingerprints."""
    shape = {job: spec.num_tasks(job) for job in spec.jobs}
    expected = {job: env.run.cluster_spec.num_tasks(job) for job in env.run.cluster_spec.jobs}
    if shape != expected:
        raise ValueError(
            f"simulated worker {env.worker} was given the cluster {spec.as_dict()} ({shape} tasks per job) but it "
            f"runs in a cluster of {expected} tasks per job. Fix: let MultiWorkerMirroredStrategy() read the "
            "simulated TF_CONFIG (pass no cluster_resolver), or describe the simulated cluster's shape.")
    _check_addresses(env, spec)
    _check_fingerprints(env)
