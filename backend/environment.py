"""The real backend's ``Environment``: this process is one worker of a multi-worker cluster; collectives run
over shared memory when every worker is on this host, else over gRPC (``transport_choice.py``) with its
messages on TCP data lanes (``data_lane.py``), after a rendezvous over gRPC, with heartbeats and aborts over
gRPC watching every peer.

The first ``MultiWorkerMirroredStrategy`` starts this worker's server and rendezvous; later strategies in
the same process are new collective groups over the same connections (as on the simulator).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import re
import sys
import threading
from collections.abc import Sequence

from mirrorlab import errors
from mirrorlab._version import __version__
from mirrorlab.cluster import ClusterSpec, TFConfigClusterResolver, id_in_cluster
from mirrorlab.collective.communicator import Communicator
from mirrorlab.diagnostics.findings import Finding
from mirrorlab.diagnostics.live_hang import check_live_hang
from mirrorlab.runtime.base import WorkerRuntime
from mirrorlab.runtime.blas import pin_blas_threads
from mirrorlab.runtime.local import LocalEnvironment
from mirrorlab.runtime.seeds import op_seed

from .data_lane import DataLanes
from .diagnosed_transport import DiagnosedTransport
from .flight_recorder import FlightRecorder
from .gpu_devices import check_visible, gpus_per_worker
from .gpu_lane import GpuLane
from .grpc_transport import ALL_GROUPS, GrpcTransport, PeerNode
from .lane_tls import lane_contexts
from .liveness import Heartbeats
from .nccl_choice import fallback_label
from .nccl_comm import nccl_fact
from .nccl_unique_id import UniqueIdExchange
from .peer_views import group_progress, worker_views
from .rendezvous import Rendezvous, WorkerFacts
from .settings import BackendSettings, devices_per_worker, fingerprint
from .shm_transport import ShmTransport
from .transport_choice import choose_transport

__all__ = ["BackendEnvironment"]

_TASK = re.compile(r"^/job:(\w+)/replica:0/task:(\d+)$")
LANE_SUFFIX = "+lane"  # strategy.extended.transport_name "grpc+lane": messages travel on TCP data lanes

log = logging.getLogger("mirrorlab.backend")


class BackendEnvironment(LocalEnvironment):
    """A worker process of a real cluster (its TF_CONFIG names several workers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._node: PeerNode | None = None
        self._heartbeats: Heartbeats | None = None
        self._cluster: dict | None = None
        self._groups = 0
        self.communicators: list[Communicator] = []
        self._group_comms: dict[int, Communicator] = {}  # by collective group, for progress reports
        self.recorder: FlightRecorder | None = None
        self._op_seeds = 0
        self._settings: BackendSettings | None = None
        self._shm: dict[int, ShmTransport] = {}  # by collective group
        self.transport_name = "grpc"
        self._lane_peers: list[int] = []  # peers with a TCP data lane (data_lane.py)
        self._ids: UniqueIdExchange | None = None  # NCCL unique ids over gRPC (gpu_lane.py)
        self._gpu_lanes: list[GpuLane] = []

    def default_device_type(self) -> tuple[str, int]:
        gpus = gpus_per_worker()
        if gpus is not None:  # mirrorlab launch --gpus-per-worker
            device_type, visible = super().default_device_type()
            resolver = TFConfigClusterResolver()
            task = f"/job:{resolver.task_type}/replica:0/task:{resolver.task_id}"
            check_visible(gpus, visible if device_type == "GPU" else 0, task)
            return "GPU", gpus
        count = devices_per_worker()
        return ("CPU", count) if count is not None else super().default_device_type()

    def cluster_runtime(self, cluster_spec: ClusterSpec, task_type: str, task_id: int, rank: int,
                        names: Sequence[str], rpc_layer: str | None) -> WorkerRuntime:
        if rpc_layer not in (None, "", "grpc"):
            raise ValueError(f"rpc_layer={rpc_layer!r}: the mirrorlab backend speaks gRPC only. Fix: use 'grpc' or "
                             "leave it unset.")
        device_type, count = self.default_device_type()
        with self._lock:
            if self._node is None:
                self._connect(cluster_spec, rank, names, count, device_type == "GPU")
            elif cluster_spec.as_dict() != self._cluster:
                raise ValueError(f"this worker joined the cluster {self._cluster}; a later strategy names "
                                 f"{cluster_spec.as_dict()}. Fix: one process is one task of one cluster.")
            group = self._groups
            self._groups += 1
        transport = DiagnosedTransport(self._transport(group, rank, names), lambda: self.hang_findings(group),
                                       self.recorder.path)
        comm = Communicator(rank, len(names), names, transport)
        self.communicators.append(comm)
        self._group_comms[group] = comm
        prefix = f"/job:{task_type}/replica:0/task:{task_id}"
        runtime = self.make_runtime(comm, [f"{prefix}/device:{device_type}:{k}" for k in range(count)])
        runtime.transport_name = self.transport_name + (LANE_SUFFIX if self._lane_peers else "")
        comm.lane = self._gpu_lane(group, device_type == "GPU", runtime)
        return runtime

    def _gpu_lane(self, group: int, has_gpus: bool, runtime: WorkerRuntime) -> GpuLane:
        """Group ``group``'s device lane; a fall-back from NCCL shows in ``runtime.transport_name``."""
        def fell_back() -> None:
            runtime.transport_name = fallback_label(runtime.transport_name)

        lane = GpuLane(group, self._ids, self._settings.rendezvous_timeout, has_gpus, fell_back)
        self._gpu_lanes.append(lane)
        return lane

    def make_runtime(self, comm: Communicator, devices: Sequence[str]) -> WorkerRuntime:
        """This worker's runtime for one collective group (the scenario runner's workers add fault hooks here)."""
        return WorkerRuntime(comm, devices, self.recorder)

    def _transport(self, group: int, rank: int, names: Sequence[str]) -> GrpcTransport | ShmTransport:
        """Collective group ``group``'s transport; a shared-memory session is named from the cluster token (fresh
        per run, the same on every worker) and the group, so runs and groups never share segments."""
        if self.transport_name == "grpc":
            return GrpcTransport(self._node, group)
        secret = f"{self._settings.token}/{json.dumps(self._cluster, sort_keys=True)}"
        session = f"{hashlib.sha256(secret.encode()).hexdigest()[:24]}-g{group}"
        transport = ShmTransport.connect(session, rank, len(names), names=names,
                                         timeout=self._settings.rendezvous_timeout)
        transport.local_state = self.describe_state
        self._shm[group] = transport
        return transport

    def _connect(self, cluster_spec: ClusterSpec, rank: int, names: Sequence[str], devices: int,
                 has_gpus: bool) -> None:
        settings = BackendSettings.from_environ()
        addresses = [cluster_spec.task_address(*_task_of(name)) for name in names]
        self.transport_name = choose_transport(addresses)
        self._settings = settings
        node = PeerNode(rank, names, addresses, settings.token, settings.bind_host, tls=settings.tls,
                        keepalive=settings.keepalive)
        node.local_state = self.describe_state
        node.on_abort = self._abort_shm
        cluster = json.dumps(cluster_spec.as_dict(), sort_keys=True)
        facts = WorkerFacts(__version__, cluster, names[rank], devices, pin_blas_threads(),
                            fingerprint() | nccl_fact(has_gpus))
        rendezvous = Rendezvous(node, facts)
        lanes = None
        if self.transport_name == "grpc" and settings.uses_data_lanes:
            lanes = DataLanes(node, settings.token, settings.keepalive,
                              lane_contexts(settings.tls) if settings.tls else None, settings.data_lane_port,
                              settings.data_lane_connect_timeout)
        self._ids = UniqueIdExchange(node)
        heartbeats = Heartbeats(node, settings.heartbeat_timeout, self.describe_state, self.progress)
        node.start()
        self._node, self._cluster = node, cluster_spec.as_dict()
        self.recorder = FlightRecorder({"workers": len(names), "devices_per_worker": devices, "clock": "wall",
                                        "tasks": list(names), "task": names[rank], "worker": rank,
                                        "transport": self.transport_name})
        self.recorder.dump_on_sigusr1()
        _install_exit_hooks(self)
        rendezvous.wait(settings.rendezvous_timeout)
        if lanes is not None:
            self._lane_peers = lanes.open(settings.rendezvous_timeout)
            if self._lane_peers:
                self.recorder.meta["transport"] = self.transport_name + LANE_SUFFIX
            log.info("%s: collectives over gRPC, their messages on TCP data lanes to workers %s", node.label(rank),
                     self._lane_peers)
        heartbeats.start()
        self._heartbeats = heartbeats

    def next_op_seed(self) -> int:
        """A seed for an op created without one: the simulator's rule for this worker, so results match it."""
        with self._lock:
            self._op_seeds += 1
            count = self._op_seeds
        resolver = TFConfigClusterResolver()
        return op_seed(id_in_cluster(resolver.cluster_spec(), resolver.task_type, resolver.task_id), count)

    def describe_state(self) -> str:
        """Where this worker is: the collective it waits in, else the last it finished."""
        for comm in reversed(self.communicators):
            if comm.current is not None:
                return f"in {comm.current.describe()}"
        done = [c.last_completed for c in self.communicators if c.last_completed is not None]
        if done:
            return f"after {max(done, key=lambda s: s.seq).describe()}"
        return "not yet in a collective"

    def progress(self) -> dict:
        """Per collective group (its number as a string), the collective completed last and the one in progress:
        what a Ping reply tells peers, so that a peer whose collective fails can say who never entered it."""
        return {str(group): group_progress(comm, self.recorder) for group, comm in list(self._group_comms.items())}

    def hang_findings(self, group: int) -> list[Finding]:
        """Why collective group ``group`` hangs, from this worker's state and every peer's answer to a ping sent
        now (within a fifth of the heartbeat timeout, at most 1 s): the findings trace analysis would give."""
        if self._heartbeats is None or group not in self._group_comms:
            return []
        comm = self._group_comms[group]
        timeout = min(1.0, self._settings.heartbeat_timeout / 5)
        return check_live_hang(worker_views(group, comm, self.recorder, comm.names, self._heartbeats, timeout))

    def fail(self, exc: BaseException) -> None:
        """Abort every group on every peer with this worker's unhandled error, and dump the flight recorder."""
        if self._node is None:
            return
        if len(self.recorder):  # a worker that failed before any collective has nothing to show
            self.recorder.dump(f"{type(exc).__name__} on this worker")
        if isinstance(exc, errors.OpError):
            error = exc
        else:
            error = errors.UnknownError(f"{self._node.label(self._node.rank)} failed with "
                                        f"{type(exc).__name__}: {exc}")
        self._node.abort(ALL_GROUPS, error)

    def _abort_shm(self, group: int, error: errors.OpError) -> None:
        """An abort over gRPC (a lost heartbeat, a peer's error, this worker's) also fails the shared-memory
        group(s) it names, so no waiter stays blocked on a ring."""
        for index, transport in list(self._shm.items()):
            if group in (ALL_GROUPS, index):
                transport.abort(error)

    def close(self) -> None:
        """Stop heartbeats, say goodbye to the peers, unmap shared memory and stop serving (bounded)."""
        if self._heartbeats is not None:
            self._heartbeats.stop()
        for transport in self._shm.values():
            transport.close()
        self._shm.clear()
        for lane in self._gpu_lanes:
            lane.close()
        if self._node is not None:
            self._node.close()
            self._node = None


def _task_of(name: str) -> tuple[str, int]:
    match = _TASK.match(name)
    if match is None:
        raise ValueError(f"unexpected task name {name!r}")
    return match[1], int(match[2])


def _install_exit_hooks(env: BackendEnvironment) -> None:
    """An unhandled error aborts the peers' collectives at once; a normal exit says goodbye."""
    previous = sys.excepthook

    def hook(kind: type, exc: BaseException, tb: object) -> None:
        env.fail(exc)
        previous(kind, exc, tb)

    sys.excepthook = hook
    # Close before interpreter shutdown stops thread pools (gRPC's server runs on one): threading's exit hooks
    # run then, atexit's only after. Python without that hook falls back to atexit.
    register = getattr(threading, "_register_atexit", atexit.register)
    register(env.close)
