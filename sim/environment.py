"""What a simulated worker's program sees: its own TF_CONFIG, its devices, a communicator over the
simulated network, the virtual clock, and fault points before every step and collective."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any


from mirrorlab import errors
from mirrorlab.cluster import ClusterSpec
from mirrorlab.collective.communicator import Communicator
from mirrorlab.distribute.mirror_check import CHECK_MIRRORS_ENV
from mirrorlab.runtime import Environment, WorkerRuntime
from mirrorlab.runtime.seeds import op_seed
from mirrorlab.trace import FAULT_NOTE, TraceNote

from .faults import SAVE_WINDOWS, Fault
from .greenlet_relay import GreenletRelay
from .network import SimTransport
from .worker_setup import WorkerSetup, check_rendezvous

if TYPE_CHECKING:
    from .cluster import SimRun

__all__ = ["SimWorkerEnv", "SimWorkerRuntime"]


class SimWorkerRuntime(WorkerRuntime):
    """A worker runtime whose fault hooks consult the simulation's faults."""

    transport_name = "simulated"

    def __init__(self, comm: Communicator, devices: Sequence[str], env: "SimWorkerEnv") -> None:
        super().__init__(comm, devices, env.run.trace)
        self.env = env
        carrier = env.run.scheduler.carrier
        self._relay = GreenletRelay(carrier.hub) if carrier.greenlets else None

    def make_queue(self) -> Any:
        return super().make_queue() if self._relay is None else self._relay.queue()

    def spawn(self, target: Callable[[], None], name: str) -> Any:
        """Replica threads, or greenlets when the worker itself is a greenlet (it must be able to switch to them)."""
        if self._relay is None:
            return super().spawn(target, name)
        return self._relay.spawn(self.bound_to_caller(target), name)

    def before_step(self, step: int) -> None:
        self.env.fault_point(step=step)

    def before_collective(self, seq: int) -> None:
        self.env.fault_point(collective=seq)
        if self.comm.transport is None or not self.env.run.network.instant:
            self.env.run.scheduler.yield_()  # every collective is a scheduling point
        # (on an instant network, joining the collective's other members is the scheduling point: collective_batch)

    def post_copies(self, key: tuple, post: object) -> dict[int, object]:
        """The other workers' posts for ``key`` so far; a key all workers posted is forgotten."""
        board = self.env.run.posted_copies
        posts = board.setdefault(key, {})
        others = {w: p for w, p in posts.items() if w != self.env.worker}
        posts[self.env.worker] = post
        if len(posts) == len(self.env.run.tasks):
            del board[key]
        return others

    def replica_order(self, replicas: list[int]) -> list[int]:
        """A seed-determined order, so different seeds also interleave replicas differently."""
        order = list(replicas)
        self.env.run.scheduler.rng.shuffle(order)
        return order


class SimWorkerEnv(Environment):
    """Simulated worker ``worker`` of a run; also the per-thread TF_CONFIG overlay (``environ``)."""

    owns_process = False  # it shares the caller's process (and, carried by a greenlet, its main thread)

    def __init__(self, run: "SimRun", worker: int, tf_config: str, setup: WorkerSetup | None = None) -> None:
        self.run = run
        self.worker = worker
        self.setup = setup if setup is not None else WorkerSetup(worker)
        self.environ: dict[str, str | None] = {"TF_CONFIG": tf_config,
                                               CHECK_MIRRORS_ENV: "1" if run.config.check_mirrors else "0",
                                               **self.setup.environ}
        self.communicators: list[Communicator] = []
        self.runtimes: list[WorkerRuntime] = []
        self._groups = 0
        self._saves = 0  # checkpoint writes so far (see io_point)
        self._op_seeds = 0
        self._terminating = False  # a Preempt fault has told this worker it will be terminated
        self.hung = False  # the watchdog gave up on this worker: it must never touch the simulation again

    @property
    def task(self) -> tuple[str, int]:
        return self.run.tasks[self.worker]

    @property
    def device_count(self) -> int:
        """This worker's devices: its setup's count, else the cluster's ``devices_per_worker``."""
        return self.setup.devices or self.run.config.devices_per_worker

    def _devices(self, prefix: str) -> list[str]:
        return [f"{prefix}/device:{self.run.config.device_type}:{k}"
                for k in range(self.device_count)]

    def _runtime(self, comm: Communicator, devices: Sequence[str]) -> SimWorkerRuntime:
        self.communicators.append(comm)
        runtime = SimWorkerRuntime(comm, devices, self)
        self.runtimes.append(runtime)
        return runtime

    def local_runtime(self, devices: Sequence[str]) -> WorkerRuntime:
        comm = Communicator(0, 1, [f"/job:{self.task[0]}/replica:0/task:{self.task[1]}"], None,
                            clock=lambda: self.run.scheduler.now)
        return self._runtime(comm, devices)

    def cluster_runtime(self, cluster_spec: ClusterSpec, task_type: str, task_id: int, rank: int,
                        names: Sequence[str], rpc_layer: str | None) -> WorkerRuntime:
        if (task_type, task_id) != self.task:
            raise ValueError(
                f"simulated worker {self.worker} is task {self.task[0]}:{self.task[1]} but its strategy was "
                f"created as {task_type}:{task_id}. Fix: do not override task_type/task_id inside a SimCluster.")
        check_rendezvous(self, cluster_spec)
        group = self._groups
        self._groups += 1
        transport = SimTransport(self.run.network, group, rank, len(names))
        prefix = f"/job:{task_type}/replica:0/task:{task_id}"
        return self._runtime(Communicator(rank, len(names), names, transport), self._devices(prefix))

    def default_device_type(self) -> tuple[str, int]:
        return self.run.config.device_type, self.device_count

    def _check_alive(self) -> None:
        """Stop a worker the watchdog gave up on at its next call into the simulation (it lost its turn)."""
        if self.hung:
            raise errors.SimulatedCrash(f"worker {self.worker} was given up as hung by the simulator's watchdog")

    def now(self) -> float:
        """The run's wall-clock epoch plus virtual time: library code's timestamps and polls follow the simulation."""
        return self.run.epoch + self.run.scheduler.now

    def sleep(self, seconds: float) -> None:
        """Wait in virtual time, so the other workers run meanwhile (e.g. the chief writing what this one polls for)."""
        self._check_alive()
        self.run.scheduler.sleep(seconds)

    def fault_point(self, step: int | None = None, collective: int | None = None) -> None:
        """Apply this worker's faults at a step or collective boundary."""
        self._check_alive()
        for fault in self.run.activation.faults:
            with self._noting_crash(fault):
                fault.at_boundary(self, step, collective)

    def notice_termination(self) -> None:
        """A termination notice reaches this worker (a simulated SIGTERM: ``Preempt``)."""
        self._terminating = True
        self.note_fault("preemption notice")

    def stall(self, seconds: float) -> None:
        """This worker loses ``seconds`` of virtual time (a straggler: ``Slow``)."""
        if seconds > 0:
            self.note_fault("stall", seconds=seconds)
        self.run.scheduler.sleep(seconds)

    def note_fault(self, effect: str, **details: object) -> None:
        """Record in the trace that a fault acted on this worker now (only then: a run without faults firing keeps
        its trace byte for byte), so timelines show it (``mirrorlab trace export``)."""
        self.run.trace.add_note(TraceNote(FAULT_NOTE, self.worker, self.run.scheduler.now, "simulator",
                                          {"effect": effect, **details}))

    @contextmanager
    def _noting_crash(self, fault: Fault) -> Iterator[None]:
        try:
            yield
        except errors.SimulatedCrash as exc:
            self.note_fault("crash", fault=repr(fault), message=str(exc))
            raise

    def termination_noticed(self) -> bool:
        return self._terminating

    def io_point(self, what: str) -> None:
        """A point inside a checkpoint save where a Crash(during_save=k, window=...) strikes; saves are counted by
        their data writes (``checkpoint-commit``)."""
        self._check_alive()
        if what == SAVE_WINDOWS["data"]:
            self._saves += 1
        for fault in self.run.activation.faults:
            with self._noting_crash(fault):
                fault.in_save(self, self._saves, what)

    def next_op_seed(self) -> int:
        """A seed for an op created without one (a shuffle, an initializer): distinct per worker and op, and
        independent of the scheduling seed, so a program computes the same under every interleaving."""
        self._op_seeds += 1
        return op_seed(self.worker, self._op_seeds)

    def close(self) -> None:
        for runtime in self.runtimes:
            runtime.close()
