"""Running the replica function once per local replica, and pausing all replicas together at sync points.

Each local replica runs on its own persistent thread (so it can pause mid-function), but only one
replica computes at a time, in an order the runtime chooses (the simulator draws it from its seed):
results never depend on thread timing, and BLAS never fights eight threads over two cores. Everything
replicas share (collectives, merge_call, variable updates) happens at a *sync point*: once every
replica has arrived, the worker's own thread runs the request's handler on all requests at once, in
replica order, so only the worker thread ever talks to other workers. A replica that returns, raises,
or enters a different sync point while the others wait is reported instead of hanging.
"""

from __future__ import annotations

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


class ReplicaPool:
    """Interface shared by the inline (one replica) and threaded (several replicas) pools."""

    size: int

    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        raise NotImplementedError

    def sync(self, local_id: int, request: SyncRequest) -> Any:
        raise NotImplementedError

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
    """``size`` replica threads coordinated by the thread that calls ``run``.

    ``spawn(target, name)`` starts a thread bound to the worker's environment; ``on_desync(error)`` is
    told when replicas disagree, so the worker can abort the cross-worker group too; ``order(ids)``
    gives the order in which the given replicas run their next stretch.
    """

    def __init__(self, size: int, spawn: Callable[[Callable[[], None], str], Any], name: str,
                 on_desync: Callable[[errors.OpError], None],
                 order: Callable[[list[int]], list[int]] = list) -> None:
        self.size = size
        self._on_desync = on_desync
        self._order = order
        self._arrivals: queue.SimpleQueue = queue.SimpleQueue()
        self._inboxes = [queue.SimpleQueue() for _ in range(size)]
        self._requests: list[SyncRequest | None] = [None] * size
        self._outcomes: list[tuple[bool, Any] | None] = [None] * size
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
            except BaseException as exc:  # delivered to the coordinator, re-raised by run()
                self._outcomes[k] = (False, exc)
            self._arrivals.put(k)

    def sync(self, local_id: int, request: SyncRequest) -> Any:
        self._requests[local_id] = request
        self._arrivals.put(local_id)
        ok, value = self._inboxes[local_id].get()
        if not ok:
            raise _reraise_copy(value)
        return value

    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        if self._closed:
            raise RuntimeError("this strategy's replica threads were shut down; create a new strategy")
        items: dict[int, Any] = dict(enumerate(fns))
        for k in items:
            self._outcomes[k] = None
        while True:
            for k in self._order(sorted(items)):
                self._requests[k] = None
                self._inboxes[k].put(items[k])
                self._arrivals.get()  # replica k ran until its next sync point, or to its end
            waiting = [k for k in range(self.size) if self._requests[k] is not None]
            if not waiting:
                break
            items = self._resolve(waiting)
        return self._results()

    def _results(self) -> list[Any]:
        outcomes = [o for o in self._outcomes if o is not None]
        failures = [exc for ok, exc in outcomes if not ok]
        if failures:
            # A crash beats a user error, which beats the cancellations it caused in other replicas.
            failures.sort(key=lambda e: (not isinstance(e, errors.SimulatedCrash) and isinstance(e, Exception),
                                         isinstance(e, errors.CancelledError)))
            raise failures[0]
        return [value for _, value in outcomes]

    def _resolve(self, waiting: list[int]) -> dict[int, tuple[bool, Any]]:
        requests = [self._requests[k] for k in waiting]
        finished = [k for k in range(self.size) if k not in waiting]
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
        error = errors.CollectiveTypeMismatchError(f"Collective desync between replicas: {what}\n{FIX_DESYNC}")
        self._on_desync(error)
        return {k: (False, error) for k in waiting}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for inbox in self._inboxes:
                inbox.put(None)
