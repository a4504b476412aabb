"""Running the replica function once per local replica, and pausing all replicas together at sync points.

Each local replica runs as its own greenlet on the worker's thread (so it can pause mid-function), one
replica computing at a time, in an order the runtime chooses (the simulator draws it from its seed):
results never depend on thread timing, and BLAS never fights eight threads over two cores. Everything
replicas share (collectives, merge_call, variable updates) happens at a *sync point*: once every
replica has arrived, the last one to arrive runs the request's handler on all requests at once, in
replica order, acting for the worker (one replica at a time ever talks to other workers). A replica
that returns, raises, or enters a different sync point while the others wait is reported instead of
hanging.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from greenlet import getcurrent, greenlet

from .. import errors
from ..collective.communicator import FIX_DESYNC
from ..runtime.binding import bind_environment, current_environment

__all__ = ["SyncRequest", "ReplicaPool", "InlinePool", "GreenletPool", "MERGE_CALL"]

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
    """Interface shared by the inline (one replica) and greenlet (several replicas) pools."""

    size: int

    @abstractmethod
    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        """Implemented by subclasses."""

    @abstractmethod
    def sync(self, local_id: int, request: SyncRequest) -> Any:
        """Implemented by subclasses."""

    def close(self) -> None:
        """Refuse further runs (idempotent)."""


def _reraise_copy(exc: BaseException) -> BaseException:
    return errors.clone(exc) if isinstance(exc, errors.OpError) else exc


class InlinePool(ReplicaPool):
    """One replica: the function runs on the calling thread and sync points resolve at once."""

    size = 1

    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        return [fns[0]()]

    def sync(self, local_id: int, request: SyncRequest) -> Any:
        return request.handler([request])[0]


class GreenletPool(ReplicaPool):
    """``size`` replicas as greenlets on the calling thread that pass one baton along: the replica that stops (at
    a sync point or at its end) switches to the next one of the stretch; the last to stop resolves the sync point
    (runs the handler) and starts the next stretch, or, when all have returned, switches back to the caller of
    ``run``. A switch costs about a microsecond where a handoff between OS threads cost ten or more.

    ``name`` (the worker's label) names its errors; ``on_desync(error)`` is told when replicas disagree, so the
    worker can abort the cross-worker group too; ``order(ids)`` gives the order in which the given replicas run
    their next stretch. A replica blocked in C code (or in real time) blocks its whole worker, as one replica
    thread holding the worker's baton did before.
    """

    def __init__(self, size: int, name: str, on_desync: Callable[[errors.OpError], None],
                 order: Callable[[list[int]], list[int]] = list) -> None:
        self.size = size
        self._name = name
        self._on_desync = on_desync
        self._order = order
        self._caller: greenlet | None = None
        self._replicas: list[greenlet] = []
        self._thread: int | None = None  # the thread whose greenlets ``_replicas`` are
        self._requests: list[SyncRequest | None] = [None] * size
        self._outcomes: list[tuple[bool, Any] | None] = [None] * size
        self._items: dict[int, Any] = {}
        self._stretch: list[int] = []  # the replicas still to run in this stretch, the next one last
        self._closed = False

    def run(self, fns: Sequence[Callable[[], Any]]) -> list[Any]:
        if self._closed:
            raise RuntimeError("this strategy's replicas were shut down; create a new strategy")
        self._caller = getcurrent()
        if self._thread != threading.get_ident():  # greenlets switch only within the thread that made them
            self._thread = threading.get_ident()
            self._replicas = [greenlet(partial(self._replica_main, k)) for k in range(self.size)]
        env = current_environment()
        self._items = {k: (env, fn) for k, fn in enumerate(fns)}
        self._stretch = self._order(sorted(self._items))[::-1]
        task, item = self._pass_baton()
        task.switch(item)  # back here once every replica has returned
        return self._results()

    def _replica_main(self, k: int, work: tuple[Any, Callable[[], Any]]) -> None:
        """Replica ``k``'s greenlet, kept for every ``run`` (a fresh greenlet per call slows the BLAS calls in it
        down): run the function it is handed, hand the baton on, wait for the next function.
        ``replica_label`` names it in hang reports."""
        replica_label = f"{self._name}/replica:{k}"  # noqa: F841 (read by the simulator's watchdog)
        while True:
            env, fn = work
            bind_environment(env)
            try:
                self._outcomes[k] = (True, fn())
            except BaseException as exc:  # delivered to the caller of run(), which re-raises it
                self._outcomes[k] = (False, exc)
            del fn, work  # an idle replica must not keep the replica function (and so its strategy) alive
            task, item = self._pass_baton()
            work = task.switch(item)

    def sync(self, local_id: int, request: SyncRequest) -> Any:
        self._requests[local_id] = request
        task, item = self._pass_baton()
        ok, value = item if task is getcurrent() else task.switch(item)
        if not ok:
            raise _reraise_copy(value)
        return value

    def _pass_baton(self) -> tuple[greenlet, Any]:
        """Called by the replica that just stopped: the task that runs next and what it is handed (the next
        replica of the stretch and its function or reply; else the caller of ``run`` when all have returned)."""
        if not self._stretch:
            waiting = [k for k in range(self.size) if self._requests[k] is not None]
            if not waiting:
                return self._caller, None
            self._items = self._resolve(waiting)
            self._stretch = self._order(sorted(self._items))[::-1]
        k = self._stretch.pop()
        self._requests[k] = None
        return self._replicas[k], self._items.pop(k)

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
        self._closed = True
        self._replicas = []  # their greenlets end when collected
