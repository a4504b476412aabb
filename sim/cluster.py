"""``SimCluster``: run one program as N simulated workers x M devices in this process, deterministically.

Each worker runs ``program`` on its own simulated thread with its own TF_CONFIG, so a plain
``MultiWorkerMirroredStrategy()`` inside it joins the simulated cluster. The seed fixes the
interleaving, the fault decisions and therefore the results and the trace; failures say how to replay.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mirrorlab import errors
from mirrorlab.cluster import ClusterSpec
from mirrorlab.collective.communicator import FIX_DESYNC
from mirrorlab.runtime import bind_environment
from mirrorlab.runtime.blas import pin_blas_threads
from mirrorlab.trace import Trace

from .environ import environ_overlay
from .environment import SimWorkerEnv
from .faults import Fault
from .network import SimNetwork, seeded_route
from .process_random import ProcessRandomStates
from .scheduler import Scheduler, SimThread

__all__ = ["SimCluster", "SimConfig", "RunResult", "SimRun"]

HEALTH_TEXT = ("The following tasks are unhealthy (stopped sending heartbeats):\n{task}\nThe tasks have crashed. "
               "Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug "
               "further.")


@dataclass(frozen=True)
class SimConfig:
    """Everything that defines a simulated run besides the program (the replay line prints it)."""

    workers: int
    devices_per_worker: int = 1
    seed: int = 0
    chief: bool = False
    faults: tuple[Fault, ...] = ()
    heartbeat_timeout: float = 10.0
    latency: float = 0.0
    bandwidth: float | None = None
    device_type: str = "CPU"

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"SimCluster(workers={self.workers!r}): need at least 1 worker.")
        if not isinstance(self.devices_per_worker, int) or self.devices_per_worker < 1:
            raise ValueError(f"SimCluster(devices_per_worker={self.devices_per_worker!r}): need at least 1 device.")
        if self.device_type not in ("CPU", "GPU"):
            raise ValueError(f"SimCluster(device_type={self.device_type!r}): use 'CPU' or 'GPU'.")
        for fault in self.faults:
            for attr in ("worker", "src", "dst", "a", "b"):
                index = getattr(fault, attr, None)
                if index is not None and not 0 <= index < self.workers:
                    raise ValueError(f"{fault!r}: {attr}={index} is not a worker of this {self.workers}-worker "
                                     f"cluster (valid: 0..{self.workers - 1}).")

    def constructor(self) -> str:
        """``SimCluster(...)`` text that rebuilds this configuration."""
        defaults = SimConfig(self.workers)
        parts = [f"workers={self.workers}"]
        for name in ("devices_per_worker", "seed", "chief", "faults", "heartbeat_timeout", "latency",
                     "bandwidth", "device_type"):
            value = getattr(self, name)
            if name == "seed" or value != getattr(defaults, name):
                parts.append(f"{name}={value!r}")
        return f"SimCluster({', '.join(parts)})"


@dataclass
class Outcome:
    """How one worker's program ended."""

    value: Any = None
    error: BaseException | None = None
    crashed: bool = False
    end_time: float = 0.0


class RunResult(list):
    """Each worker's return value, or the exception it ended with, indexed by worker; plus the trace."""

    def __init__(self, outcomes: Sequence[Outcome], run: "SimRun") -> None:
        super().__init__(o.error if o.error is not None else o.value for o in outcomes)
        self.outcomes = list(outcomes)
        self.trace: Trace = run.trace
        self.config: SimConfig = run.config
        self.seed = run.config.seed
        self.virtual_time = run.scheduler.now
        self.deadlocks = run.scheduler.deadlocks
        self.messages = run.network.messages
        self.replay = run.replay_line

    @property
    def errors(self) -> dict[int, BaseException]:
        return {w: o.error for w, o in enumerate(self.outcomes) if o.error is not None}

    @property
    def ok(self) -> bool:
        return not self.errors

    def values(self) -> list[Any]:
        """The return values; raises the first worker's error (with the run report) if any failed."""
        for error in self.errors.values():
            raise error
        return list(self)

    def report(self) -> str:
        """One line per worker plus seed, virtual time and the replay line."""
        lines = [f"simulated run: seed={self.seed}, virtual time {self.virtual_time:.3f} s, "
                 f"{len(self.trace)} trace events"]
        for w, o in enumerate(self.outcomes):
            if o.crashed:
                state = f"crashed ({o.error})"
            elif o.error is not None:
                state = f"failed: {type(o.error).__name__}: {str(o.error).splitlines()[0] if str(o.error) else ''}"
            else:
                state = f"returned {o.value!r}"[:200]
            lines.append(f"  worker {w}: {state}")
        lines.append(f"replay: {self.replay}")
        return "\n".join(lines)


class SimRun:
    """The state of one simulated run: scheduler, network, trace and the workers' environments."""

    def __init__(self, config: SimConfig, program: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.config = config
        self.program = program
        self.args = args
        self.kwargs = kwargs
        self.random_states = ProcessRandomStates(config.workers)
        self.scheduler = Scheduler(config.seed, on_deadlock=self._deadlock_error,
                                   on_switch=lambda thread: self.random_states.switch(thread.owner))
        fault_rng = random.Random(f"faults:{config.seed}")
        self.network = SimNetwork(self.scheduler, seeded_route(config.faults, config.latency, config.bandwidth,
                                                               fault_rng))
        self.tasks = [("chief", 0)] if config.chief else []
        self.tasks += [("worker", i) for i in range(config.workers - len(self.tasks))]
        jobs: dict[str, list[str]] = {}
        for task_type, index in self.tasks:
            jobs.setdefault(task_type, []).append(f"sim-{task_type}-{index}:2222")
        self.cluster_spec = ClusterSpec(jobs)
        self.trace = Trace(meta={"seed": config.seed, "workers": config.workers,
                                 "devices_per_worker": config.devices_per_worker, "clock": "virtual",
                                 "tasks": [f"/job:{t}/replica:0/task:{i}" for t, i in self.tasks]})
        self.envs = [SimWorkerEnv(self, w, json.dumps({"cluster": jobs, "task": {"type": t, "index": i}}))
                     for w, (t, i) in enumerate(self.tasks)]
        self.outcomes = [Outcome() for _ in self.tasks]
        self.threads: list[SimThread] = []
        name = getattr(program, "__qualname__", repr(program))
        module = getattr(program, "__module__", None)
        target = f"{module}.{name}" if module and module != "__main__" else name
        self.replay_line = f"mirrorlab.sim.{config.constructor()}.run({target})"

    def execute(self) -> RunResult:
        pin_blas_threads()  # as a real worker does, so both compute the same bits
        for w in range(len(self.tasks)):
            self.threads.append(self.scheduler.spawn(f"worker {w}", lambda w=w: self._worker_main(w), owner=w))
        with environ_overlay(), self.random_states:
            self.scheduler.run()
        return RunResult(self.outcomes, self)

    def _worker_main(self, w: int) -> None:
        env = self.envs[w]
        outcome = self.outcomes[w]
        bind_environment(env)
        try:
            outcome.value = self.program(*self.args, **self.kwargs)
        except errors.SimulatedCrash as crash:
            outcome.error, outcome.crashed = crash, True
            self._peers_notice_death(w)
        except BaseException as exc:  # the worker's process would die with this error
            outcome.error = exc
            self._peers_notice_death(w)
            if isinstance(exc, errors.OpError):
                _add_note(exc, self._cluster_state(w))
            _add_note(exc, f"[mirrorlab.sim] worker {w} failed at virtual time {self.scheduler.now:.3f} s "
                           f"(seed={self.config.seed}). Replay: {self.replay_line}")
        finally:
            outcome.end_time = self.scheduler.now
            env.close()
            bind_environment(None)

    def _peers_notice_death(self, w: int) -> None:
        """Like TF's coordination service: after ``heartbeat_timeout`` every peer's collectives fail."""
        task = "/job:{}/replica:0/task:{}".format(*self.tasks[w])
        error = errors.UnavailableError(
            "Collective ops is aborted by: " + HEALTH_TEXT.format(task=task)
            + "\nThe error could be from a previous operation. Restart your program to reset.")

        def abort_all() -> None:
            for peer_env in self.envs:
                if peer_env.worker == w:
                    continue
                for transport in self.network.groups_of(peer_env.worker):
                    transport.receive_abort(error)

        self.scheduler.call_at(self.scheduler.now + self.config.heartbeat_timeout, abort_all)

    def _cluster_state(self, failing: int) -> str:
        """Where every worker is when ``failing`` raises: its collective and call site, or how it ended."""
        lines = [f"[mirrorlab.sim] cluster at virtual time {self.scheduler.now:.3f} s:"]
        for w, (task_type, index) in enumerate(self.tasks):
            if w == failing:
                last = self.envs[w].communicators[-1].last_completed if self.envs[w].communicators else None
                state = f"raised this error{' in ' + last.describe() if last else ''}"
            else:
                state = self._worker_state(w)
            lines.append(f"  worker {w} (/job:{task_type}/replica:0/task:{index}): {state}")
        return "\n".join(lines)

    def _worker_state(self, w: int) -> str:
        env, thread, outcome = self.envs[w], self.threads[w], self.outcomes[w]
        comm = next((c for c in reversed(env.communicators) if c.current is not None), None)
        if thread.state == "done":
            how = "crashed" if outcome.crashed else ("raised " + type(outcome.error).__name__
                                                     if outcome.error is not None else "returned")
            last = env.communicators[-1].last_completed if env.communicators else None
            after = f"; its last collective was {last.describe()}" if last else ""
            return f"finished its program ({how}) at t={outcome.end_time:.3f} s{after}"
        if comm is not None:
            waiting = next((t.waiting_for for t in self.network.groups_of(w) if t.waiting_for is not None), None)
            peer = f" for worker {waiting}" if waiting is not None else ""
            return f"waits{peer} in {comm.current.describe()}"
        return f"blocked: {thread.blocked_on}" if thread.state == "blocked" else "running (not in a collective)"

    def _deadlock_error(self, blocked: list[SimThread]) -> BaseException:
        lines = [f"Deadlock at virtual time {self.scheduler.now:.3f} s: every live worker waits for another "
                 "and nothing can wake them (TF would hang here forever)."]
        for w, (task_type, index) in enumerate(self.tasks):
            lines.append(f"  worker {w} (/job:{task_type}/replica:0/task:{index}): {self._worker_state(w)}")
        lines.append(FIX_DESYNC)
        lines.append(f"seed={self.config.seed}; replay: {self.replay_line}")
        return errors.DeadlockError("\n".join(lines))


def _add_note(exc: BaseException, note: str) -> None:
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


@dataclass
class SimCluster:
    """A simulated cluster of ``workers`` x ``devices_per_worker`` replicas (see ``SimConfig`` fields).

    ``SimCluster(workers=2, devices_per_worker=2, seed=7).run(program, *args)`` runs ``program`` on
    every worker and returns a ``RunResult`` (one value or exception per worker, plus the trace).
    """

    workers: int
    devices_per_worker: int = 1
    seed: int = 0
    chief: bool = False
    faults: Sequence[Fault] = field(default_factory=tuple)
    heartbeat_timeout: float = 10.0
    latency: float = 0.0
    bandwidth: float | None = None
    device_type: str = "CPU"

    def __post_init__(self) -> None:
        self.config = SimConfig(self.workers, self.devices_per_worker, self.seed, self.chief, tuple(self.faults),
                                self.heartbeat_timeout, self.latency, self.bandwidth, self.device_type)

    def run(self, program: Callable[..., Any], *args: Any, **kwargs: Any) -> RunResult:
        """Run ``program(*args, **kwargs)`` on every simulated worker; never hangs."""
        return SimRun(self.config, program, args, kwargs).execute()
