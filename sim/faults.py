"""Faults to inject into a simulated cluster: crashes, preemption notices, stragglers, and message delays, drops,
cuts, clogged links and isolated workers.

Each fault is a small frozen dataclass whose repr is valid Python, so a failing run's replay line
reproduces it exactly. Message faults act through the network's single routing hook.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mirrorlab import errors

from .validation import check_count, check_distinct, check_probability, check_seconds

if TYPE_CHECKING:
    from .environment import SimWorkerEnv

__all__ = ["Fault", "Crash", "Preempt", "Slow", "Delay", "Drop", "Cut", "Clog", "Isolate", "route_delay"]


class Fault:
    """Base class of every fault; its repr is the constructor call, without fields left at their default.

    A fault acts through three hooks the simulator calls for every fault: ``at_boundary`` (a worker about to start
    a step or a collective), ``in_save`` (a point inside a checkpoint save) and ``route`` (a message on the
    network); each does nothing unless the fault is of that kind."""

    def at_boundary(self, env: "SimWorkerEnv", step: int | None, collective: int | None) -> None:
        """Act on ``env``'s worker before its ``step``-th step or ``collective``-th collective."""

    def in_save(self, env: "SimWorkerEnv", save: int, point: str) -> None:
        """Act on ``env``'s worker at ``point`` of its ``save``-th checkpoint save."""

    def route(self, src: int, dst: int, delay: float, now: float, counts: dict["Fault", int],
              rng: random.Random) -> float | None:
        """The delivery delay of a message sent from ``src`` to ``dst`` at virtual time ``now`` after this fault:
        ``delay``, more, or None (lost)."""
        return delay

    def loses(self, src: int, dst: int) -> bool:
        """Whether this fault can lose messages from ``src`` to ``dst``."""
        return False

    def __repr__(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                 if f.default is dataclasses.MISSING or getattr(self, f.name) != f.default]
        return f"{type(self).__name__}({', '.join(parts)})"

    def _check_workers(self, *fields: str) -> None:
        """Worker indices are ints >= 0 (whether the cluster has them is checked by ``SimConfig``)."""
        for name in fields:
            check_count(repr(self), name, getattr(self, name), 0, "workers are numbered from 0.")


@dataclass(frozen=True, repr=False)
class Crash(Fault):
    """Kill ``worker`` just before its ``at_step``-th ``strategy.run``, its ``at_collective``-th collective,
    or in the middle of its ``during_save``-th checkpoint write, in ``window``: ``"data"`` (data written, manifest
    not yet), ``"manifest"`` (manifest written, state file not yet) or ``"sweep"`` (new state recorded, an old
    checkpoint half deleted; a save that deletes none is not killed)."""

    worker: int
    at_step: int | None = None
    at_collective: int | None = None
    during_save: int | None = None
    window: str = "data"

    def __post_init__(self) -> None:
        self._check_workers("worker")
        if sum(x is not None for x in (self.at_step, self.at_collective, self.during_save)) != 1:
            raise ValueError(f"{self!r}: give exactly one of at_step=, at_collective= or during_save= "
                             "(all count from 1).")
        for name in ("at_step", "at_collective", "during_save"):
            check_count(repr(self), name, getattr(self, name), 1,
                        f"{name} counts from 1; use {name}=1 for the first one.", optional=True)
        if self.window not in SAVE_WINDOWS:
            raise ValueError(f"{self!r}: window must be one of {', '.join(map(repr, SAVE_WINDOWS))}.")
        if self.window != "data" and self.during_save is None:
            raise ValueError(f"{self!r}: window= applies to during_save= only.")

    def at_boundary(self, env: "SimWorkerEnv", step: int | None, collective: int | None) -> None:
        if self.worker == env.worker and ((step is not None and self.at_step == step)
                                          or (collective is not None and self.at_collective == collective)):
            where = f"step {step}" if step is not None else f"collective #{collective}"
            raise errors.SimulatedCrash(f"{self!r} killed worker {env.worker} before {where}")

    def in_save(self, env: "SimWorkerEnv", save: int, point: str) -> None:
        if self.worker == env.worker and self.during_save == save and SAVE_WINDOWS[self.window] == point:
            raise errors.SimulatedCrash(f"{self!r} killed worker {env.worker} in the middle of save #{save} ({point})")


SAVE_WINDOWS = {"data": "checkpoint-commit", "manifest": "checkpoint-manifest", "sweep": "checkpoint-sweep"}
"""Each ``Crash(window=)`` and the ``io_point`` of a save where it strikes."""


@dataclass(frozen=True, repr=False)
class Preempt(Fault):
    """Tell ``worker`` it will be terminated (a SIGTERM) just before its ``at_step``-th ``strategy.run``: a
    ``PreemptionCheckpointHandler`` then has every worker save and exit. The worker goes on running until then."""

    worker: int
    at_step: int

    def __post_init__(self) -> None:
        self._check_workers("worker")
        check_count(repr(self), "at_step", self.at_step, 1, "at_step counts from 1; use at_step=1 for the first step.")

    def at_boundary(self, env: "SimWorkerEnv", step: int | None, collective: int | None) -> None:
        if self.worker == env.worker and step is not None and self.at_step == step:
            env.notice_termination()


@dataclass(frozen=True, repr=False)
class Slow(Fault):
    """Make ``worker`` a straggler: each step and each collective costs it extra virtual seconds."""

    worker: int
    seconds_per_step: float = 0.0
    seconds_per_collective: float = 0.0

    def __post_init__(self) -> None:
        self._check_workers("worker")
        for name in ("seconds_per_step", "seconds_per_collective"):
            check_seconds(repr(self), name, getattr(self, name), False, "give the extra virtual seconds, e.g. 0.5.")

    def at_boundary(self, env: "SimWorkerEnv", step: int | None, collective: int | None) -> None:
        if self.worker == env.worker:
            env.stall(self.seconds_per_step if step is not None else self.seconds_per_collective)


@dataclass(frozen=True, repr=False)
class Delay(Fault):
    """Delay every message from ``src`` to ``dst`` by ``seconds`` (order between the pair is kept)."""

    src: int
    dst: int
    seconds: float

    def __post_init__(self) -> None:
        self._check_workers("src", "dst")
        check_distinct(repr(self), "src", "dst", self.src, self.dst)
        check_seconds(repr(self), "seconds", self.seconds, False, "give the extra virtual seconds, e.g. 0.5.")

    def route(self, src: int, dst: int, delay: float, now: float, counts: dict[Fault, int],
              rng: random.Random) -> float | None:
        return delay + self.seconds if (self.src, self.dst) == (src, dst) else delay


@dataclass(frozen=True, repr=False)
class Drop(Fault):
    """Drop messages from ``src`` to ``dst``: each with ``probability``, after the first ``after`` pass."""

    src: int
    dst: int
    probability: float = 1.0
    after: int = 0

    def __post_init__(self) -> None:
        self._check_workers("src", "dst")
        check_distinct(repr(self), "src", "dst", self.src, self.dst)
        check_probability(repr(self), "probability", self.probability)
        check_count(repr(self), "after", self.after, 0, "after= is how many messages pass before drops start.")

    def route(self, src: int, dst: int, delay: float, now: float, counts: dict[Fault, int],
              rng: random.Random) -> float | None:
        if not self.loses(src, dst):
            return delay
        counts[self] = counts.get(self, 0) + 1
        return None if counts[self] > self.after and rng.random() < self.probability else delay

    def loses(self, src: int, dst: int) -> bool:
        return (self.src, self.dst) == (src, dst)


@dataclass(frozen=True, repr=False)
class Cut(Fault):
    """A firewall between workers ``a`` and ``b``: nothing gets through in either direction."""

    a: int
    b: int

    def __post_init__(self) -> None:
        self._check_workers("a", "b")
        check_distinct(repr(self), "a", "b", self.a, self.b)

    def route(self, src: int, dst: int, delay: float, now: float, counts: dict[Fault, int],
              rng: random.Random) -> float | None:
        return None if self.loses(src, dst) else delay

    def loses(self, src: int, dst: int) -> bool:
        return {src, dst} == {self.a, self.b}


@dataclass(frozen=True, repr=False)
class Clog(Fault):
    """Clog the link between workers ``a`` and ``b`` for ``seconds`` of virtual time from ``start``: messages sent
    either way in that window are held, not lost, and delivered in order once it ends (a congested or flapping
    link that TCP rides out)."""

    a: int
    b: int
    start: float
    seconds: float

    def __post_init__(self) -> None:
        self._check_workers("a", "b")
        check_distinct(repr(self), "a", "b", self.a, self.b)
        check_seconds(repr(self), "start", self.start, False, "give the virtual time the clog begins, e.g. 2.0.")
        check_seconds(repr(self), "seconds", self.seconds, True, "give how long the link stays clogged, e.g. 5.0.")

    def route(self, src: int, dst: int, delay: float, now: float, counts: dict[Fault, int],
              rng: random.Random) -> float | None:
        end = self.start + self.seconds
        if {src, dst} == {self.a, self.b} and self.start <= now < end:
            return end - now + delay
        return delay


@dataclass(frozen=True, repr=False)
class Isolate(Fault):
    """Cut every link of ``worker`` from virtual time ``start`` on, for ``seconds`` or (None) for good: messages
    it sends or should receive in that window are lost, as behind a failed switch port."""

    worker: int
    start: float = 0.0
    seconds: float | None = None

    def __post_init__(self) -> None:
        self._check_workers("worker")
        check_seconds(repr(self), "start", self.start, False, "give the virtual time the isolation begins, e.g. 3.0.")
        check_seconds(repr(self), "seconds", self.seconds, True,
                      "give how long the worker stays cut off, e.g. 5.0, or None for the rest of the run.",
                      optional=True)

    def route(self, src: int, dst: int, delay: float, now: float, counts: dict[Fault, int],
              rng: random.Random) -> float | None:
        ended = self.seconds is not None and now >= self.start + self.seconds
        return None if self.loses(src, dst) and self.start <= now and not ended else delay

    def loses(self, src: int, dst: int) -> bool:
        return self.worker in (src, dst)


def route_delay(faults: tuple[Fault, ...], src: int, dst: int, base: float, now: float, counts: dict[Fault, int],
                rng: random.Random) -> float | None:
    """Delivery delay of one message sent from ``src`` to ``dst`` at ``now``, or None when a fault drops it."""
    delay: float | None = base
    for fault in faults:
        delay = fault.route(src, dst, delay, now, counts, rng)
        if delay is None:
            return None
    return delay
