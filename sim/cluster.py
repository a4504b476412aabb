"""``SimCluster``: run one program as N simulated workers x M devices in this process, deterministically.

Each worker runs ``program`` on its own simulated thread with its own TF_CONFIG, so a plain
``MultiWorkerMirroredStrategy()`` inside it joins the simulated cluster. The seed fixes the
interleaving, the fault decisions and therefore the results and the trace; failures say how to replay.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from dataclasses import dataclass
from typing import Any

from mirrorlab import errors
from mirrorlab.cluster import ClusterSpec
from mirrorlab.collective.communicator import FIX_DESYNC
from mirrorlab.runtime import bind_environment
from mirrorlab.runtime.liveness import peer_lost_error
from mirrorlab.runtime.blas import pin_blas_threads
from mirrorlab.trace import Trace

from .environ import environ_overlay
from .environment import SimWorkerEnv
from .faults import Fault
from .gc_pacing import young_collections_paced
from .network import SimNetwork, seeded_route
from .process_random import ProcessRandomStates
from .randomized_faults import Maybe, activate
from .root_cause import failure_order, headline, passed_on_from
from .carriers import choose_carrier
from .scheduler import Scheduler, SimThread
from .tracebacks import raise_site, trim_traceback
from .validation import check_count, check_seconds
from .watchdog import frame_of, hang_report
from .worker_setup import WorkerSetup

__all__ = ["SimCluster", "SimConfig", "RunResult", "SimRun"]

TRACE_KEEP = 100_000  # trace events a run keeps in memory by default (about 40 MB)


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
    watchdog: float | None = 5.0
    trace_values: bool = False
    setups: tuple[WorkerSetup, ...] = ()
    trace_keep: int | None = TRACE_KEEP
    trace_file: str | None = None
    check_mirrors: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "faults", tuple(self.faults))  # any sequence; kept as a tuple (hashable, replayable)
        object.__setattr__(self, "setups", tuple(self.setups))
        check_count("SimCluster", "trace_keep", self.trace_keep, 1,
                    f"give how many trace events to keep in memory, e.g. {TRACE_KEEP} (the default), or None to keep "
                    "all.", optional=True)
        check_count("SimCluster", "workers", self.workers, 1, "give the number of simulated workers, e.g. workers=2.")
        check_count("SimCluster", "devices_per_worker", self.devices_per_worker, 1,
                    "give the replicas per worker, e.g. devices_per_worker=1.")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"SimCluster: seed={self.seed!r} must be an integer. Fix: e.g. seed=0.")
        if not isinstance(self.chief, bool):
            raise ValueError(f"SimCluster: chief={self.chief!r} must be True or False. Fix: chief=True makes worker 0 "
                             "the chief task, chief=False (the default) has only worker tasks.")
        if not isinstance(self.check_mirrors, bool):
            raise ValueError(f"SimCluster: check_mirrors={self.check_mirrors!r} must be True or False. Fix: True (the "
                             "default) raises when a mirrored variable's copies differ after a step, False lets them "
                             "differ silently, as TF does.")
        if self.device_type not in ("CPU", "GPU"):
            raise ValueError(f"SimCluster: device_type={self.device_type!r} is not a device type. Fix: use 'CPU' or "
                             "'GPU'.")
        check_seconds("SimCluster", "heartbeat_timeout", self.heartbeat_timeout, True,
                      "give the virtual seconds after which peers notice a dead worker, e.g. 10.0 (the default).")
        check_seconds("SimCluster", "latency", self.latency, False,
                      "give every message's delivery delay in virtual seconds, e.g. 0.001, or 0.0 (the default).")
        check_seconds("SimCluster", "bandwidth", self.bandwidth, True,
                      "give bytes per virtual second, e.g. 1e9, or None (the default) for unlimited.", optional=True)
        check_seconds("SimCluster", "watchdog", self.watchdog, True,
                      "give the real seconds a worker may block outside mirrorlab before it is reported as hung, "
                      "e.g. 5.0 (the default), or None to wait forever.", optional=True)
        for fault in self.faults:
            if not isinstance(fault, Fault):
                raise ValueError(f"SimCluster: faults=[..., {fault!r}, ...] holds something that is not a fault. "
                                 "Fix: use Crash, Preempt, Slow, Delay, Drop, Cut, Clog, Isolate or Maybe from mirrorlab.sim.")
            target = fault.fault if isinstance(fault, Maybe) else fault
            for attr in ("worker", "src", "dst", "a", "b"):
                index = getattr(target, attr, None)
                if index is not None and not 0 <= index < self.workers:
                    raise ValueError(f"{fault!r}: {attr}={index} is not a worker of this {self.workers}-worker "
                                     f"cluster (valid: 0..{self.workers - 1}). Fix: number workers from 0, or "
                                     "add workers.")
        workers = [setup.worker for setup in self.setups]
        for setup in self.setups:
            if not 0 <= setup.worker < self.workers or workers.count(setup.worker) > 1:
                raise ValueError(f"{setup!r}: worker={setup.worker} must be a worker of this {self.workers}-worker "
                                 f"cluster (valid: 0..{self.workers - 1}) with at most one setup.")

    def constructor(self) -> str:
        """``SimCluster(...)`` text that rebuilds this configuration."""
        defaults = SimConfig(self.workers)
        parts = [f"workers={self.workers}"]
        for name in (f.name for f in dataclasses.fields(self)[1:]):  # every setting after workers, in order
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
    """Each worker's return value, or the exception it ended with, indexed by worker; plus the trace.

    ``values()`` and ``report()`` lead with the root cause: the first error that was not passed on from another
    worker's failure. Errors keep only the user's frames in their tracebacks (``MIRRORLAB_TRACEBACK=1`` keeps
    mirrorlab's frames too)."""

    def __init__(self, outcomes: Sequence[Outcome], run: "SimRun") -> None:
        super().__init__(o.error if o.error is not None else o.value for o in outcomes)
        self.outcomes = list(outcomes)
        self.trace: Trace = run.trace
        self.config: SimConfig = run.config
        self.seed = run.config.seed
        self.virtual_time = run.scheduler.now
        self.deadlocks = run.scheduler.deadlocks
        self.messages = run.network.messages
        self.computed_once = run.network.meetings.computed  # collective instances not run message by message
        self.replay = run.replay_line + run.activation.fired_comment()
        self.network_losses = run.network.loss_report(run.activation.faults)
        self.randomized_faults = run.activation.summary()

    @property
    def errors(self) -> dict[int, BaseException]:
        """Each failed worker's error, root cause first."""
        failures = [(w, o.error, o.end_time) for w, o in enumerate(self.outcomes) if o.error is not None]
        return {w: self.outcomes[w].error for w in failure_order(failures)}

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def root_cause(self) -> int | None:
        """The worker whose error caused the run's other errors, or None when every worker returned."""
        return next(iter(self.errors), None)

    def values(self) -> list[Any]:
        """The return values; raises the root cause's error, with the other workers' errors and the trace
        analysis' coded findings in notes."""
        failed = self.errors
        if not failed:
            return list(self)
        root = self.root_cause
        error = failed.pop(root)
        if failed:
            _add_note(error, f"[mirrorlab.sim] worker {root}'s error is the root cause; the other workers' errors:\n"
                      + "\n".join(f"  worker {w}: {self._state(w)}" for w in failed))
        findings = self.findings_text()
        if findings and findings not in getattr(error, "__notes__", ()):
            _add_note(error, findings)
        raise error

    @functools.cached_property
    def findings(self) -> list:
        """What ``mirrorlab trace analyze`` finds in this run's trace (errors and warnings; none for a clean run)."""
        if self.ok:
            return []
        from mirrorlab.diagnostics.findings import Severity
        from mirrorlab.diagnostics.trace_analysis import analyze_trace_texts

        found = analyze_trace_texts([("run", self.trace.to_jsonl())])
        return [f for f in found if f.severity in (Severity.ERROR, Severity.WARNING)]

    def findings_text(self) -> str:
        """The findings as lines: code, message and fix ("" when there are none)."""
        return "\n".join(f"[mirrorlab.diagnostics] {f.code}: {f.message}\n  Fix: {f.fix}" for f in self.findings)

    def report(self) -> str:
        """The root cause, one line per worker, the network's losses, seed, virtual time and the replay line."""
        lines = [f"simulated run: seed={self.seed}, virtual time {self.virtual_time:.3f} s, "
                 f"{len(self.trace)} trace events"]
        if self.root_cause is not None:
            lines.append(f"root cause: worker {self.root_cause} {self._state(self.root_cause)}")
        lines += [f"  worker {w}: {self._state(w)}" for w in range(len(self.outcomes))]
        if self.network_losses:
            lines.append(self.network_losses)
        if self.randomized_faults:
            lines.append(self.randomized_faults)
        if self.findings:
            lines.append(self.findings_text())
        lines.append(f"replay: {self.replay}")
        return "\n".join(lines)

    def _state(self, w: int) -> str:
        """How worker ``w`` ended, in one unabridged line."""
        o = self.outcomes[w]
        if o.error is None:
            return f"returned {o.value!r}"[:200]
        site = raise_site(o.error)
        where = f" at {site}" if site else ""
        if o.crashed:
            return f"crashed{where} ({headline(o.error)})"
        origin = passed_on_from(o.error)
        cause = f" (passed on from worker {origin})" if origin is not None else ""
        return f"failed{where}: {type(o.error).__name__}{cause}: {headline(o.error)}"


class SimRun:
    """The state of one simulated run: scheduler, network, trace and the workers' environments."""

    def __init__(self, config: SimConfig, program: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.config = config
        self.program = program
        self.args = args
        self.kwargs = kwargs
        self.random_states = ProcessRandomStates(config.workers)
        self.scheduler = Scheduler(config.seed, on_deadlock=self._deadlock_error,
                                   on_switch=lambda thread: self.random_states.switch(thread.owner),
                                   watchdog=config.watchdog, on_hang=self._hung,
                                   carrier=choose_carrier(config.watchdog))
        self.epoch = time.time()  # the simulated workers' wall clock reads epoch + virtual time
        fault_rng = random.Random(f"faults:{config.seed}")
        self.activation = activate(config.faults, config.seed)
        instant = not config.latency and config.bandwidth is None and not any(
            type(f).route is not Fault.route for f in self.activation.faults)
        self.network = SimNetwork(self.scheduler, seeded_route(self.activation.faults, config.latency,
                                                               config.bandwidth, fault_rng),
                                  on_loss=self._message_lost, instant=instant)
        self.scheduler.on_idle = self.network.meetings.release_all
        self.tasks = [("chief", 0)] if config.chief else []
        self.tasks += [("worker", i) for i in range(config.workers - len(self.tasks))]
        jobs: dict[str, list[str]] = {}
        for task_type, index in self.tasks:
            jobs.setdefault(task_type, []).append(f"sim-{task_type}-{index}:2222")
        self.cluster_spec = ClusterSpec(jobs)
        self.trace = Trace(meta={"seed": config.seed, "workers": config.workers,
                                 "devices_per_worker": config.devices_per_worker, "clock": "virtual",
                                 "tasks": [f"/job:{t}/replica:0/task:{i}" for t, i in self.tasks]},
                           record_values=config.trace_values, keep_last=config.trace_keep)
        setups = {setup.worker: setup for setup in config.setups}
        self.envs = [SimWorkerEnv(self, w, json.dumps({"cluster": jobs, "task": {"type": t, "index": i}}),
                                  setups.get(w)) for w, (t, i) in enumerate(self.tasks)]
        self.outcomes = [Outcome() for _ in self.tasks]
        self.posted_copies: dict[tuple, dict[int, object]] = {}  # mirrored copies' digests (SimWorkerRuntime)
        self.threads: list[SimThread] = []
        name = getattr(program, "__qualname__", repr(program))
        module = getattr(program, "__module__", None)
        target = f"{module}.{name}" if module and module != "__main__" else name
        self.replay_line = f"mirrorlab.sim.{config.constructor()}.run({target})"

    def execute(self) -> RunResult:
        pin_blas_threads()  # as a real worker does, so both compute the same bits
        for w in range(len(self.tasks)):
            self.threads.append(self.scheduler.spawn(f"worker {w}", lambda w=w: self._worker_main(w), owner=w))
        if self.config.trace_file is not None:
            self.trace.stream_to(self.config.trace_file)
        try:
            with environ_overlay(), self.random_states, young_collections_paced():
                self.scheduler.run()
        finally:
            self.trace.close()
        return RunResult(self.outcomes, self)

    def _worker_main(self, w: int) -> None:
        env = self.envs[w]
        outcome = self.outcomes[w]
        bind_environment(env)
        try:
            value = self.program(*self.args, **self.kwargs)
            if not env.hung:
                outcome.value = value
        except BaseException as exc:
            if not env.hung:  # a worker the watchdog gave up on has its outcome already
                self._failed(w, exc)
        finally:
            if not env.hung:
                outcome.end_time = self.scheduler.now
                env.close()
            bind_environment(None)

    def _failed(self, w: int, exc: BaseException) -> None:
        """Record how worker ``w`` died: a crash, or an error its process would die with."""
        trim_traceback(exc)
        outcome = self.outcomes[w]
        outcome.error, outcome.crashed = exc, isinstance(exc, errors.SimulatedCrash)
        self._peers_notice_death(w)
        if outcome.crashed:
            return
        site = raise_site(exc)
        _add_note(exc, f"[mirrorlab.sim] worker {w} failed{' at ' + site if site else ''} at virtual time "
                       f"{self.scheduler.now:.3f} s (seed={self.config.seed}). Replay: {self.replay_line}")
        _add_note(exc, self._cluster_state(w))
        losses = self.network.loss_report(self.activation.faults)
        if losses and isinstance(exc, errors.OpError):
            _blame_network(exc, losses)
        if self.activation.summary():
            _add_note(exc, f"[mirrorlab.sim] {self.activation.summary()}")

    def _message_lost(self, src: int, dst: int, nbytes: int) -> None:
        """A fault dropped a message: a fault note on the sender, naming the faults that lose src -> dst."""
        culprits = [repr(f) for f in self.config.faults if f.loses(src, dst)]
        self.envs[src].note_fault("message lost", dst=dst, bytes=nbytes, fault=", ".join(culprits),
                                  lost_so_far=self.network.lost[(src, dst)])

    def _hung(self, thread: SimThread, seconds: float, stacks: list[tuple[str, FrameType | None]]) -> None:
        """The watchdog gave up on ``thread``: its worker ends with a HangError naming where it blocked (``stacks``:
        what its carrier saw, plus its replica threads' stacks when they are OS threads)."""
        w = thread.owner
        self.envs[w].hung = True
        stacks = stacks + [(t.name, frame_of(t)) for t in threading.enumerate() if t.name.startswith(f"worker {w} (")]
        error = errors.HangError(hang_report(f"worker {w} (/job:{self.tasks[w][0]}/replica:0/task:{self.tasks[w][1]})",
                                             seconds, stacks, self.config.watchdog))
        _add_note(error, f"[mirrorlab.sim] worker {w} hung at virtual time {self.scheduler.now:.3f} s "
                         f"(seed={self.config.seed}). Replay: {self.replay_line}")
        self.outcomes[w].error, self.outcomes[w].end_time = error, self.scheduler.now

    def _peers_notice_death(self, w: int) -> None:
        """Like TF's coordination service: after ``heartbeat_timeout`` every peer's collectives fail."""
        task = "/job:{}/replica:0/task:{}".format(*self.tasks[w])
        error = peer_lost_error(task, passed_on_from=w)

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
        if thread.state == "hung":
            return f"hung outside mirrorlab at t={outcome.end_time:.3f} s (see its HangError)"
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
        lines.append(self.network.loss_report(self.activation.faults) or FIX_DESYNC)
        lines.append(f"seed={self.config.seed}; replay: {self.replay_line}")
        return errors.DeadlockError("\n".join(lines))


def _blame_network(exc: errors.OpError, losses: str) -> None:
    """Put the network's losses where ``exc`` blames mismatched collectives (a lost message desyncs the
    sequence numbers of a pair), else add them as a note."""
    if FIX_DESYNC in exc.message:
        exc.message = exc.message.replace(FIX_DESYNC, losses)
        exc.args = (exc.message, *exc.args[1:])
    else:
        _add_note(exc, f"[mirrorlab.sim] {losses}")


def _add_note(exc: BaseException, note: str) -> None:
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


@dataclass
class SimCluster:
    """A simulated cluster of ``workers`` x ``devices_per_worker`` replicas (see ``SimConfig`` fields).

    ``SimCluster(workers=2, devices_per_worker=2, seed=7).run(program, *args)`` runs ``program`` on
    every worker and returns a ``RunResult`` (one value or exception per worker, plus the trace).
    ``watchdog``: real seconds a worker may block outside mirrorlab before it is reported as hung (None: never).
    ``trace_values=True`` adds each collective's step, non-finite count and result digest to the trace.
    ``trace_keep``: how many trace events (and notes) the result keeps in memory, the latest ones (None: all), so a
    long run's memory stays flat; ``trace_file``: a path that receives the whole trace as JSON lines while it runs.
    ``check_mirrors``: a mirrored variable whose copies differ after a ``strategy.run`` (updated in replica context
    with aggregation NONE) raises ``MirroredCopiesDifferError``, on a worker or across workers (False: TF's silence).
    """

    def __init__(self, *args: Any, **options: Any) -> None:
        self.config = SimConfig(*args, **options)

    def __repr__(self) -> str:
        return self.config.constructor()

    def run(self, program: Callable[..., Any], *args: Any, **kwargs: Any) -> RunResult:
        """Run ``program(*args, **kwargs)`` on every simulated worker; never hangs."""
        return SimRun(self.config, program, args, kwargs).execute()
