"""Deterministic scheduling of simulated threads on virtual time (SimPy's environment, Trio's MockClock).

Only the simulated thread holding the baton runs; at each scheduling point the baton goes to a runnable thread
chosen by a seeded RNG, so one seed is one interleaving, whatever carries the threads (``sim/carriers.py``: OS
threads, or greenlets on the caller's thread). When nothing is runnable the virtual clock jumps to the next timer;
when there is no timer either, every blocked thread is woken with the deadlock report instead of hanging. A thread
that holds the baton but blocks in real time (outside the scheduler) is given up by the wall-clock watchdog, and the
others go on.
"""

from __future__ import annotations

import heapq
import random
import threading
from collections.abc import Callable
from typing import Any

from mirrorlab.errors import DeadlockError

from .carriers import Carrier, ThreadCarrier

__all__ = ["Scheduler", "SimThread", "TIMEOUT", "WOKEN"]

TIMEOUT = "timeout"
WOKEN = "woken"


class SimThread:
    """A simulated thread: runs ``fn`` when given the baton, one step at a time (its carrier sets ``resume``, and
    ``os_thread`` when it has one of its own)."""

    def __init__(self, scheduler: "Scheduler", name: str, fn: Callable[[], None], owner: Any = None) -> None:
        self.scheduler = scheduler
        self.name = name
        self.owner = owner
        self._fn = fn
        self.state = "runnable"
        self.blocked_on = ""
        self._wake: Any = None
        self._token = 0
        self.resume: Any = None
        self.os_thread: threading.Thread | None = None

    def main(self) -> "SimThread | None":
        """Run ``fn``, then leave the schedule; returns the thread to run next (None: the run is over)."""
        try:
            self._fn()
        finally:
            nxt = self.scheduler._exit(self)
        return nxt

    def __repr__(self) -> str:
        return f"SimThread({self.name!r}, {self.state})"


class Scheduler:
    """Runs simulated threads one at a time in a seed-determined order on a virtual clock.

    ``watchdog``: wall-clock seconds the baton holder may stand still (with every other thread) before it is
    given up as hung: ``on_hang(thread, seconds)`` is told, and the other threads go on (None: wait forever).
    ``on_idle`` (set once the network exists, which needs this scheduler) is asked, whenever no thread is runnable,
    before the clock moves or a deadlock is declared, whether it made threads runnable (the network's waiting
    collectives fall back to messages then). ``carrier`` runs the threads (OS threads unless given)."""

    def __init__(self, seed: int, on_deadlock: Callable[[list[SimThread]], BaseException] | None = None,
                 on_switch: Callable[[SimThread], None] | None = None, watchdog: float | None = None,
                 on_hang: Callable[[SimThread, float], None] | None = None, carrier: Carrier | None = None) -> None:
        self.rng = random.Random(seed)
        self.now = 0.0
        self.threads: list[SimThread] = []
        self.current: SimThread | None = None
        self._runnable: list[SimThread] = []
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timer_seq = 0
        self.all_done = threading.Event()
        self._live = 0
        self._on_deadlock = on_deadlock
        self._on_switch = on_switch
        self.watchdog = watchdog
        self._on_hang = on_hang
        self.carrier: Carrier = carrier if carrier is not None else ThreadCarrier()
        self.on_idle: Callable[[], bool] | None = None
        self.deadlocks = 0

    # -- setup ------------------------------------------------------------------------------------

    def spawn(self, name: str, fn: Callable[[], None], owner: Any = None) -> SimThread:
        """Create a runnable simulated thread (it starts when the scheduler gives it the baton); ``owner`` is
        what ``on_switch`` is told about (the simulated worker it belongs to)."""
        thread = SimThread(self, name, fn, owner)
        self.threads.append(thread)
        self._runnable.append(thread)
        self._live += 1
        self.carrier.prepare(thread)
        return thread

    def run(self) -> None:
        """Run until every simulated thread has finished (called from a non-simulated thread)."""
        if self.threads:
            self.carrier.run(self, self._pick())

    # -- primitives for the running thread ---------------------------------------------------------

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` (on the baton holder) once the virtual clock reaches ``when``."""
        self._timer_seq += 1
        heapq.heappush(self._timers, (max(when, self.now), self._timer_seq, callback))

    def block(self, reason: str, deadline: float | None = None) -> str:
        """Suspend the current thread until ``wake`` (returns WOKEN) or ``deadline`` (returns TIMEOUT).

        If the whole simulation deadlocks, raises the exception built by ``on_deadlock``."""
        me = self.current
        me.state = "blocked"
        me.blocked_on = reason
        me._token += 1
        if deadline is not None:
            token = me._token
            self.call_at(deadline, lambda: self._timeout(me, token))
        self._switch(me)
        wake, me._wake = me._wake, None
        if isinstance(wake, BaseException):
            raise wake
        return wake

    def wake(self, thread: SimThread) -> None:
        """Make a blocked thread runnable again (it resumes when picked)."""
        if thread.state == "blocked":
            thread.state = "runnable"
            thread._wake = WOKEN
            thread._token += 1
            self._runnable.append(thread)

    def yield_(self) -> None:
        """A scheduling point: another runnable thread may run first (seed-dependent)."""
        me = self.current
        if self._runnable:
            self._runnable.append(me)
            self._switch(me)

    def sleep(self, seconds: float) -> None:
        """Advance this thread's virtual time by ``seconds`` without costing wall time."""
        if seconds > 0:
            self.block(f"sleeping {seconds:g} s", self.now + seconds)

    # -- internals ---------------------------------------------------------------------------------

    def _timeout(self, thread: SimThread, token: int) -> None:
        if thread.state == "blocked" and thread._token == token:
            thread.state = "runnable"
            thread._wake = TIMEOUT
            self._runnable.append(thread)

    def _pick(self) -> SimThread | None:
        """Next thread to run: a random runnable one, else advance the clock, else resolve a deadlock."""
        while True:
            if self._runnable:
                return self._runnable.pop(self.rng.randrange(len(self._runnable)))
            if not self._live:
                return None
            if self.on_idle is not None and self.on_idle():
                continue
            if self._timers:
                when, _, callback = heapq.heappop(self._timers)
                self.now = max(self.now, when)
                callback()
                continue
            blocked = [t for t in self.threads if t.state == "blocked"]
            if not blocked:
                return None
            self.deadlocks += 1
            for thread in blocked:
                thread.state = "runnable"
                thread._wake = self._deadlock_error(blocked)
                thread._token += 1
                self._runnable.append(thread)

    def _deadlock_error(self, blocked: list[SimThread]) -> BaseException:
        """The exception each deadlocked thread wakes up with (never raises itself: the run must end)."""
        try:
            if self._on_deadlock is not None:
                return self._on_deadlock(blocked)
        except Exception as exc:  # a broken report must not hang the simulation
            return DeadlockError(f"deadlock among {[t.name for t in blocked]} (the report failed: {exc!r})")
        return DeadlockError(f"deadlock among {[t.name for t in blocked]}")

    def _switch(self, me: SimThread) -> None:
        """Hand the baton to the next thread and wait until it comes back to ``me``."""
        nxt = self._pick()
        if nxt is me:
            me.state = "running"
            return
        self.make_current(nxt)
        self.carrier.switch(me, nxt)
        me.state = "running"

    def give_up(self, thread: SimThread, seconds: float, stacks: Any = None) -> SimThread | None:
        """Take the baton from ``thread``, blocked in real time for ``seconds``, and return the thread to run next
        (None: the run is over); it never gets the baton back (its environment makes it stop at its next call into
        the simulation). ``stacks``: what the carrier saw of it, passed to ``on_hang``."""
        thread.state = "hung"
        self._live -= 1
        if self._on_hang is not None:
            self._on_hang(thread, seconds, stacks)
        return self._next_or_done()

    def _exit(self, me: SimThread) -> SimThread | None:
        """``me`` finished: the thread to run next (None: the run is over, or ``me`` was given up already)."""
        if me.state == "hung":  # given up by the watchdog: no longer part of the schedule
            return None
        me.state = "done"
        self._live -= 1
        return self._next_or_done()

    def _next_or_done(self) -> SimThread | None:
        """The next runnable thread, or None after marking the run finished when none is left."""
        nxt = self._pick()
        if nxt is None:
            self.current = None
            self.all_done.set()
        return nxt

    def make_current(self, nxt: SimThread) -> None:
        """Give the baton to ``nxt`` (after ``on_switch`` has set up its process-wide state); its carrier then
        resumes it."""
        if self._on_switch is not None:
            self._on_switch(nxt)
        self.current = nxt
        nxt.state = "running"
