"""What carries the simulated threads: OS threads passing a lock, or greenlets switched on one OS thread.

Both run exactly the thread the scheduler picked, so a seed gives the same interleaving and the same trace with
either. Greenlets make a switch between simulated workers one greenlet switch (a few microseconds) instead of an
OS-thread wake-up (10-100 us on a loaded machine), but a greenlet that blocks in real time blocks its whole OS
thread: ``choose_carrier`` picks greenlets only where the watchdog can still interrupt such a wait (the carrier is
the main thread, see ``sim/hang_interrupt.py``) or there is no watchdog.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

import greenlet

from .greenlet_locals import LocalsPerGreenlet
from .hang_interrupt import HangInterrupt
from .watchdog import StillnessMeter, frame_of

if TYPE_CHECKING:
    from .scheduler import Scheduler, SimThread

__all__ = ["Carrier", "ThreadCarrier", "GreenletCarrier", "choose_carrier"]


class Carrier(Protocol):
    """How simulated threads are started, switched and waited for."""

    greenlets: bool

    def prepare(self, thread: "SimThread") -> None:
        """Get ``thread`` ready to run ``thread.main`` when it is first given the baton."""

    def switch(self, me: "SimThread", nxt: "SimThread") -> None:
        """Resume ``nxt`` (already made current) and return once ``me`` is given the baton back."""

    def run(self, scheduler: "Scheduler", first: "SimThread | None") -> None:
        """Give the baton to ``first`` and return once every simulated thread has finished or been given up."""


class ThreadCarrier:
    """Each simulated thread on an OS thread of its own, waiting on its lock for the baton. The watchdog runs on
    the caller's thread; a hung thread stays blocked, given up, while the others go on."""

    greenlets = False

    def prepare(self, thread: "SimThread") -> None:
        go = threading.Lock()
        go.acquire()
        thread.resume = go

        def body() -> None:
            go.acquire()
            self._resume(thread.scheduler, thread.main())

        thread.os_thread = threading.Thread(target=body, name=f"sim:{thread.name}", daemon=True)
        thread.os_thread.start()

    def switch(self, me: "SimThread", nxt: "SimThread") -> None:
        nxt.resume.release()
        me.resume.acquire()

    @staticmethod
    def _resume(scheduler: "Scheduler", nxt: "SimThread | None") -> None:
        if nxt is not None:
            scheduler.make_current(nxt)
            nxt.resume.release()

    def run(self, scheduler: "Scheduler", first: "SimThread | None") -> None:
        self._resume(scheduler, first)
        if scheduler.watchdog is None:
            scheduler.all_done.wait()
            return
        meter = StillnessMeter()
        while not scheduler.all_done.wait(min(0.1, scheduler.watchdog / 4)):
            still = meter.still_for()
            holder = scheduler.current
            if still >= scheduler.watchdog and holder is not None and holder.state == "running":
                stacks = [(holder.os_thread.name, frame_of(holder.os_thread))]
                self._resume(scheduler, scheduler.give_up(holder, still, stacks))
                meter.reset()


class GreenletCarrier:
    """Each simulated thread on a greenlet of the caller's thread, started from the scheduler's loop (a shallow
    stack, so a switch copies little); a switch is one greenlet switch, straight from one thread to the next.
    Thread-locals are kept per greenlet (``LocalsPerGreenlet``); with a watchdog the caller must be the main thread
    (``HangInterrupt``)."""

    greenlets = True

    def __init__(self) -> None:
        self.hub: greenlet.greenlet | None = None

    def prepare(self, thread: "SimThread") -> None:
        thread.resume = greenlet.greenlet(thread.main)  # its parent is the caller's greenlet: the loop in run()

    def switch(self, me: "SimThread", nxt: "SimThread") -> None:
        me.resume = greenlet.getcurrent()  # a local replica's greenlet may be carrying ``me`` now
        if nxt.resume:
            nxt.resume.switch()
        else:  # not started yet: the loop starts it, so it starts on a shallow stack (and recursion depth)
            self.hub.switch(nxt)

    def run(self, scheduler: "Scheduler", first: "SimThread | None") -> None:
        self.hub = greenlet.getcurrent()
        interrupt = HangInterrupt(scheduler, self.hub) if scheduler.watchdog is not None else None
        with LocalsPerGreenlet():
            if interrupt is not None:
                interrupt.start()
            try:
                nxt = first
                while nxt is not None:  # a thread that finishes, is given up or is to be started names it
                    scheduler.make_current(nxt)  # (again, harmlessly, for one to be started)
                    nxt = nxt.resume.switch()
            finally:
                if interrupt is not None:
                    interrupt.stop()


def choose_carrier(watchdog: float | None) -> Carrier:
    """Greenlets where a hung worker can still be given up (no watchdog, or the caller is the main thread, which
    a signal can interrupt); OS threads elsewhere."""
    if watchdog is None or threading.current_thread() is threading.main_thread():
        return GreenletCarrier()
    return ThreadCarrier()
