"""Faults to inject into a simulated cluster: crashes, preemption notices, stragglers, and message delays, drops
and cuts.

Each fault is a small frozen dataclass whose repr is valid Python, so a failing run's replay line
reproduces it exactly. Message faults act through the network's single routing hook.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from .validation import check_count, check_distinct, check_probability, check_seconds

__all__ = ["Fault", "Crash", "Preempt", "Slow", "Delay", "Drop", "Cut", "route_delay"]


class Fault:
    """Base class of every fault; its repr is the constructor call, without fields left at their default."""

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


@dataclass(frozen=True, repr=False)
class Cut(Fault):
    """A firewall between workers ``a`` and ``b``: nothing gets through in either direction."""

    a: int
    b: int

    def __post_init__(self) -> None:
        self._check_workers("a", "b")
        check_distinct(repr(self), "a", "b", self.a, self.b)


def route_delay(faults: tuple[Fault, ...], src: int, dst: int, base: float, counts: dict[Fault, int],
                rng: random.Random) -> float | None:
    """Delivery delay of one message from ``src`` to ``dst``, or None when a fault drops it."""
    delay = base
    for fault in faults:
        if isinstance(fault, Cut) and {src, dst} == {fault.a, fault.b}:
            return None
        if isinstance(fault, Drop) and (fault.src, fault.dst) == (src, dst):
            counts[fault] = counts.get(fault, 0) + 1
            if counts[fault] > fault.after and rng.random() < fault.probability:
                return None
        if isinstance(fault, Delay) and (fault.src, fault.dst) == (src, dst):
            delay += fault.seconds
    return delay
