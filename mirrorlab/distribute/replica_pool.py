"""Running the replica function once per local replica, and pausing all replicas together at sync points.

Each local replica runs on its own persistent thread (so it can pause mid-function), but only one
replica computes at a time, in an order the runtime chooses (the simulator draws it from its seed):
results never depend on thread timing, and BLAS never fights eight threads over two cores. Everything
replicas share (collectives, merge_call, variable updates) happens at a *sync point*: once every
replica has arrived, the last one to arrive runs the request's handler on all requests at once, in
replica order, acting for the worker (one thread at a time ever talks to other workers). A replica
that returns, raises, or enters a different sync point while the others wait is reported instead of
hanging.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import errors
from ..collective.communicator import FIX_DESYNC

__all__ = ["SyncRequest", "ReplicaPool", "InlinePool", "ThreadPool", "MERGE_CALL"]

MERGE_CALL = "merge_call"
MERGE_CALL_COUNT_ERROR = "Some replicas made a different number of replica_context().merge_call() calls."


@dataclass
class SyncRequest:
    """What one replica asks for at a sync point; ``handler`` turns all replicas' requests into replies."""

    kind: str
    payload: Any
    site: str
    handler: Callable[[list["SyncRequest"]], list[Any]]


class ReplicaPool(ABC):
    """Interface shared by the inline (one replica) and threaded (several replicas) pools."""

    size: int

    @abstractmethod
    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        """Implemented by subclasses."""

    @abstractmethod
    def sync(self, local_id: int, request: SyncRequest) -> Any:
        """Implemented by subclasses."""

    def close(self) -> None:
        """Stop the pool's threads (idempotent)."""


def _reraise_copy(exc: BaseException) -> BaseException:
    return errors.clone(exc) if isinstance(exc, errors.OpError) else exc


class InlinePool(ReplicaPool):
    """One replica: the function runs on the calling thread and sync points resolve at once."""

    size = 1

    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        return [fns[0]()]

    def sync(self, local_id: int, request: SyncRequest) -> Any:
        return request.handler([request])[0]


class ThreadPool(ReplicaPool):
    """``size`` replica threads that pass one baton along: the replica that stops (at a sync point or at
    its end) wakes the next one of the stretch; the last to stop resolves the sync point (runs the
    handler) and starts the next stretch, or, when all have returned, wakes the thread that called ``run``.

    ``name`` (the worker's label) names its threads and its errors; ``spawn(target, name)`` starts a thread
    bound to the worker's environment, and ``make_queue()`` makes the queues it waits on (the simulator's greenlet
    carrier gives greenlets and queues that switch between them); ``on_desync(error)`` is
    told when replicas disagree, so the worker can abort the cross-worker group too; ``order(ids)``
    gives the order in which the given replicas run their next stretch.
    """

    def __init__(self, size: int, spawn: Callable[[Callable[[], None], str], Any], name: str,
                 on_desync: Callable[[errors.OpError], None],
                 order: Callable[[list[int]], list[int]] = list,
                 make_queue: Callable[[], Any] = queue.SimpleQueue) -> None:
        self.size = size
        self._name = name
        self._on_desync = on_desync
        self._order = order
        self._finished = make_queue()
        self._inboxes = [make_queue() for _ in range(size)]
        self._requests: list[SyncRequest | None] = [None] * size
        self._outcomes: list[tuple[bool, Any] | None] = [None] * size
        self._items: dict[int, Any] = {}
        self._stretch: list[int] = []  # the replicas still to run in this stretch, the next one last
        self._closed = False
        for k in range(size):
            spawn(lambda k=k: self._loop(k), f"{name}/replica:{k}")

    def _loop(self, k: int) -> None:
        inbox = self._inboxes[k]
        while True:
            task = inbox.get()
            if task is None:
                return
            try:
                self._outcomes[k] = (True, task())
            except BaseException as exc:  # delivered to the caller of run(), which re-raises it
                self._outcomes[k] = (False, exc)
            del task  # an idle thread must not keep the replica function (and so its strategy) alive
            self._pass_baton()

    def sync(self, local_id: int, request: SyncRequest) -> Any:
        self._requests[local_id] = request
        self._pass_baton()
        ok, value = self._inboxes[local_id].get()
        if not ok:
            raise _reraise_copy(value)
        return value

    def _start_stretch(self, items: dict[int, Any]) -> None:
        self._items = items
        self._stretch = self._order(sorted(items))[::-1]  # reversed: the next replica is popped from the end
        self._wake_next()

    def _wake_next(self) -> None:
        k = self._stretch.pop()
        self._requests[k] = None
        self._inboxes[k].put(self._items.pop(k))

    def _pass_baton(self) -> None:
        """Called by the replica that just stopped; only the baton holder touches the pool's state."""
        if self._stretch:
            self._wake_next()
            return
        waiting = [k for k in range(self.size) if self._requests[k] is not None]
        if not waiting:
            self._finished.put(True)
            return
        self._start_stretch(self._resolve(waiting))

    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        if self._closed:
            raise RuntimeError("this strategy's replica threads were shut down; create a new strategy")
        self._start_stretch(dict(enumerate(fns)))
        self._finished.get()
        return self._results()

    def _results(self) -> list[Any]:
        outcomes = [o for o in self._outcomes if o is not None]
        self._outcomes = [None] * self.size  # a failure's traceback must not keep the strategy alive
        failures = [exc for ok, exc in outcomes if not ok]
        if failures:
            # A crash beats a user error, which beats the cancellations it caused in other replicas.
            failures.sort(key=lambda e: (not isinstance(e, errors.SimulatedCrash) and isinstance(e, Exception),
                                         isinstance(e, errors.CancelledError)))
            raise failures[0]
        return [value for _, value in outcomes]

    def _resolve(self, waiting: list[int]) -> dict[int, tuple[bool, Any]]:
        requests = [self._requests[k] for k in waiting]
        waiting_set = set(waiting)
        finished = [k for k in range(self.size) if k not in waiting_set]
        first = requests[0]
        failed = [k for k in finished if not self._outcomes[k][0]]
        if failed:
            cause = self._outcomes[failed[0]][1]
            if isinstance(cause, errors.SimulatedCrash):
                return {k: (False, cause) for k in waiting}
            error: BaseException = errors.CancelledError(
                f"local replica {failed[0]} raised {type(cause).__name__}: {cause}; replicas {waiting} were "
                f"waiting for it in {first.kind} at {first.site}")
            return {k: (False, error) for k in waiting}
        if finished:
            if first.kind == MERGE_CALL:
                return {k: (False, RuntimeError(MERGE_CALL_COUNT_ERROR)) for k in waiting}
            return self._desync(waiting, requests, (
                f"local replicas {finished} returned from the replica function while replicas {waiting} "
                f"wait in {first.kind} at {first.site}; that collective can never complete."))
        if len({r.kind for r in requests}) > 1:
            places = "; ".join(f"replica {k}: {r.kind} at {r.site}" for k, r in zip(waiting, requests))
            return self._desync(waiting, requests, f"local replicas entered different collectives: {places}.")
        try:
            replies = first.handler(requests)
        except BaseException as exc:
            if isinstance(exc, errors.CollectiveMismatchError):
                self._on_desync(exc)
            return {k: (False, exc) for k in waiting}
        return {k: (True, v) for k, v in zip(waiting, replies)}

    def _desync(self, waiting: list[int], requests: list[SyncRequest], what: str) -> dict[int, tuple[bool, Any]]:
        error = errors.CollectiveTypeMismatchError(
            f"Collective desync between the local replicas of {self._name}: {what}\n{FIX_DESYNC}")
        self._on_desync(error)
        return {k: (False, error) for k in waiting}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for inbox in self._inboxes:
                inbox.put(None)
