"""A scenario's faults on real worker processes: which kinds have a real counterpart, and how a worker process
applies its own (a crash is SIGKILL, a preemption notice SIGTERM, a straggler sleeps).

Worker faults keep the simulator's own rules for when they strike (``Crash.at_boundary`` and the like are called
with ``ProcessHost`` in place of a simulated worker); network faults are nftables and tc rules in the namespaces
``netns_faults.py`` makes. A ``Maybe`` site is enabled or not by the run's seed exactly as on the simulator.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from mirrorlab import errors
from mirrorlab.sim import Clog, Crash, Cut, Delay, Drop, Fault, Isolate, Maybe, Preempt, Slow
from mirrorlab.sim.randomized_faults import activate

__all__ = ["WORKER_FAULTS", "NETWORK_FAULTS", "unsupported_on_real", "plain_fault", "enabled_faults", "ProcessHost",
           "ProcessFaults"]

WORKER_FAULTS = (Crash, Preempt, Slow)
NETWORK_FAULTS = (Cut, Drop, Delay, Clog, Isolate)


def plain_fault(fault: Fault) -> Fault:
    """The fault a ``Maybe`` wraps, or ``fault`` itself."""
    return fault.fault if isinstance(fault, Maybe) else fault


def unsupported_on_real(fault: Fault) -> str | None:
    """Why ``fault`` has no counterpart on real processes (None when it has one)."""
    inner = plain_fault(fault)
    if isinstance(inner, Drop) and inner.after:
        return ("after= counts messages, and on real processes the network sees packets, not messages: a real "
                "Drop starts at once")
    if isinstance(fault, Maybe) and isinstance(inner, NETWORK_FAULTS) and fault.fire_probability != 1.0:
        return ("a network fault's fire_probability acts per message on the simulator; on real processes a network "
                "rule is on or off for the whole run (fire_probability = 1.0)")
    return None


@dataclass
class ProcessHost:
    """What a fault's hooks act on in a real worker process (in place of the simulator's worker environment)."""

    worker: int

    def notice_termination(self) -> None:
        """A preemption notice: the SIGTERM a cloud sends (``PreemptionCheckpointHandler`` catches it)."""
        os.kill(os.getpid(), signal.SIGTERM)

    def stall(self, seconds: float) -> None:
        """A straggler's extra seconds, in wall-clock time."""
        time.sleep(seconds)

    def die(self) -> None:
        """A crash: SIGKILL, as the OOM killer or a lost machine, with no chance to say goodbye."""
        os.kill(os.getpid(), signal.SIGKILL)


class ProcessFaults:
    """The worker faults that target one worker process in one run (``Maybe`` sites decided by ``seed``)."""

    def __init__(self, worker: int, faults: tuple[Fault, ...], seed: int) -> None:
        self.host = ProcessHost(worker)
        mine = tuple(f for f in faults if isinstance(plain_fault(f), WORKER_FAULTS) and plain_fault(f).worker == worker)
        activation = activate(mine, seed)
        armed = {id(site): site for site in activation.armed}
        # (the fault, its enabled Maybe site or None): a site's random stream is the simulator's for that seed
        self._chances = [(armed[id(f)].site.fault, armed[id(f)]) if id(f) in armed else (f, None)
                         for f in activation.faults]

    def __bool__(self) -> bool:
        return bool(self._chances)

    def _acting(self) -> list[Fault]:
        """The faults that get this chance: plain ones always, an enabled ``Maybe`` with its fire probability."""
        return [fault for fault, site in self._chances if site is None or site.rng.random() < site.site.fire_probability]

    def at_boundary(self, step: int | None, collective: int | None) -> None:
        """Before this worker's ``step``-th step or ``collective``-th collective."""
        for fault in self._acting():
            self._strike(lambda: fault.at_boundary(self.host, step, collective))

    def in_save(self, save: int, point: str) -> None:
        """At ``point`` of this worker's ``save``-th checkpoint save."""
        for fault in self._acting():
            self._strike(lambda: fault.in_save(self.host, save, point))

    def _strike(self, hook: Callable[[], None]) -> None:
        try:
            hook()
        except errors.SimulatedCrash:
            self.host.die()


def enabled_faults(faults: tuple[Fault, ...], seed: int) -> tuple[Fault, ...]:
    """The plain faults of ``faults`` that act in the run with ``seed`` (a ``Maybe`` site enabled by the seed
    contributes the fault it wraps): for network rules, which are on for the whole run."""
    activation = activate(faults, seed)
    armed = {id(site): site.site.fault for site in activation.armed}
    return tuple(armed.get(id(f), f) for f in activation.faults)
