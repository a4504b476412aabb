"""The watchdog for simulated workers carried by greenlets on the main thread.

A greenlet that blocks in real time (``threading.Event().wait()``, ``time.sleep``, a socket) blocks the whole OS
thread, so no other worker could run. A monitor thread measures stillness as the OS-thread watchdog does; when the
baton holder has stood still too long it sends the main thread ``SIGNAL``. Lock and condition waits, sleeps and
socket calls on the main thread are interrupted by a signal and run its handler, which gives the holder up and
switches to the scheduler's loop from inside it: the hung worker stays frozen where it blocked (never resumed, as a
hung OS thread stays blocked) and the others go on. A C extension that blocks without checking for signals holds the
run until it returns.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

import greenlet

from .watchdog import StillnessMeter

if TYPE_CHECKING:
    from .scheduler import Scheduler, SimThread

__all__ = ["HangInterrupt", "SIGNAL"]

SIGNAL = signal.SIGUSR2


class HangInterrupt:
    """Between ``start`` and ``stop`` (on the main thread), gives up a baton holder that stands still for the
    scheduler's ``watchdog`` seconds."""

    def __init__(self, scheduler: "Scheduler", hub: greenlet.greenlet) -> None:
        self._scheduler = scheduler
        self._hub = hub
        self._request: tuple["SimThread", float] | None = None
        self._stopped = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="sim:watchdog", daemon=True)
        self._previous: object = None

    def start(self) -> None:
        self._previous = signal.signal(SIGNAL, self._on_signal)
        self._monitor.start()

    def stop(self) -> None:
        self._stopped.set()
        self._monitor.join()
        signal.signal(SIGNAL, self._previous)

    def _watch(self) -> None:
        """The monitor thread: asks the main thread to give up a holder that stood still too long."""
        watchdog = self._scheduler.watchdog
        main = threading.main_thread().ident
        meter = StillnessMeter()
        while not self._stopped.wait(min(0.1, watchdog / 4)):
            still = meter.still_for()
            holder = self._scheduler.current
            if still >= watchdog and holder is not None and holder.state == "running":
                self._request = (holder, still)
                signal.pthread_kill(main, SIGNAL)
                meter.reset()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """On the main thread, inside whatever it was running: give up the hung holder and freeze it here."""
        request, self._request = self._request, None
        if request is None or greenlet.getcurrent() is self._hub:
            return
        holder, still = request
        if holder is not self._scheduler.current or holder.state != "running":
            return  # it moved on meanwhile
        carrier = greenlet.getcurrent()
        stacks = [(getattr(carrier, "name", f"sim:{holder.name}"), frame)]
        nxt = self._scheduler.give_up(holder, still, stacks)
        holder.resume = None
        self._hub.switch(nxt)  # never switched back: the hung worker stays frozen where it blocked
