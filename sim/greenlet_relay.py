"""Local replicas as greenlets, for simulated workers carried by greenlets (``sim/carriers.py``).

A replica pool (``mirrorlab/distribute/replica_pool.py``) passes one baton between its replicas through queues:
whoever stops puts the next one's work in its queue and then waits on its own. Here each ``get`` that finds its
queue empty switches straight to the greenlet the last ``put`` made ready, so the pool runs on the worker's OS
thread, and a replica acting for its worker can block in the scheduler like the worker itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import greenlet

__all__ = ["GreenletRelay", "RelayQueue"]


class _Replica(greenlet.greenlet):
    """A replica's greenlet, named like the OS thread it replaces (hang reports print the name)."""

    name = ""


class RelayQueue:
    """A queue with one consumer greenlet; a ``get`` on an empty queue switches to the greenlet made ready last."""

    def __init__(self, ready: list[tuple[greenlet.greenlet, Any]]) -> None:
        self._items: deque = deque()
        self._waiter: greenlet.greenlet | None = None
        self._ready = ready

    def put(self, item: Any) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            self._items.append(item)
        elif item is not None:  # None tells a waiting replica to stop: it stays parked until it is collected
            self._ready.append((waiter, item))

    def get(self) -> Any:
        if self._items:
            return self._items.popleft()
        self._waiter = greenlet.getcurrent()
        if not self._ready:
            raise RuntimeError("replica pool: every replica greenlet waits and none was made ready (a pool bug)")
        target, value = self._ready.pop()
        return target.switch(value)


class GreenletRelay:
    """Spawns one worker's replica greenlets (children of the scheduler's loop, ``hub``) and their queues."""

    def __init__(self, hub: greenlet.greenlet) -> None:
        self._hub = hub
        self._ready: list[tuple[greenlet.greenlet, Any]] = []

    def queue(self) -> RelayQueue:
        return RelayQueue(self._ready)

    def spawn(self, target: Callable[[], None], name: str) -> greenlet.greenlet:
        """Start ``target`` on a new greenlet; returns once it waits on its first queue."""
        replica = _Replica(lambda *_: target(), parent=self._hub)
        replica.name = name
        self._ready.append((greenlet.getcurrent(), None))
        replica.switch()
        return replica
