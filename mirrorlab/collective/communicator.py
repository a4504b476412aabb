"""One worker's member of the cross-worker collective group.

It numbers collective instances, stamps every message with the instance's fingerprint and identity
(what it is for and the user's call site), checks both on every message it receives, enforces
``timeout_seconds`` and, on any failure, aborts the group so that every member fails with a message
naming the workers, their collectives and call sites (TF instead hangs, or fails with "Shape mismatch
in the collective instance N", or silently combines two different collectives).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .. import errors
from ..tensor import array_module
from .closed_form import ClosedForm
from .device_lane import HOST_LANE, DeviceLane
from .message import Fingerprint, Header, Message
from .request_kind import current_kind
from .transport import Transport

__all__ = ["Communicator", "Instance", "CollectiveState", "shape_mismatch_text", "CHECK_SITES_ENV"]

CHECK_SITES_ENV = "MIRRORLAB_CHECK_CALL_SITES"  # "0": a strategy created then does not compare call sites

FIX_DESYNC = ("Fix: every worker must run the same collectives (reduce, all_reduce, gather, variable "
              "creation, ON_READ reads, checkpoint saves) in the same order with the same dtypes and shapes; "
              "look for code that only some workers run (e.g. `if is_chief:`) or data that differs in shape.")


class CollectiveState(NamedTuple):
    """Where a worker is: the collective it is in (or last finished) and the user's call site (a named tuple: one is
    made per collective instance)."""

    seq: int
    fingerprint: Fingerprint
    site: str
    kind: str = ""

    def describe(self) -> str:
        return f"{self.fingerprint.describe()} #{self.seq} at {self.site}"


class Communicator:
    """Collective instances over a ``Transport`` for rank ``rank`` of ``size`` workers.

    ``names[r]`` is worker r's device-style name, used in error messages. ``transport`` may be None
    for a single worker.
    """

    def __init__(self, rank: int, size: int, names: Sequence[str], transport: Transport | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if size > 1 and transport is None:
            raise ValueError("a communicator of more than one worker needs a transport")
        self.rank = rank
        self.size = size
        self.names = list(names)
        self.transport = transport
        self._clock = clock if transport is None else transport.now
        self.seq = 0
        self.current: CollectiveState | None = None
        self.last_completed: CollectiveState | None = None
        self._local_error: errors.OpError | None = None
        self.check_sites = True  # compare call sites across workers (the strategy may opt out, see CHECK_SITES_ENV)
        self.lane: DeviceLane = HOST_LANE  # where device arrays travel (a real backend with GPUs sets its own)

    def now(self) -> float:
        return self._clock()

    @property
    def error(self) -> errors.OpError | None:
        """The error that poisoned this group, if any (every later collective raises it)."""
        if self._local_error is not None:
            return self._local_error
        return self.transport.abort_error if self.transport is not None else None

    def start(self, fingerprint: Fingerprint, site: str, timeout: float | None) -> "Instance":
        """Begin the next collective instance; raises at once if the group is already aborted."""
        self.seq += 1
        state = CollectiveState(self.seq, fingerprint, site, current_kind())
        self.current = state
        if self.error is not None:
            raise errors.clone(self.error)
        deadline = None if not timeout else self.now() + float(timeout)
        return Instance(self, state, deadline, timeout)

    def finish(self, instance: "Instance") -> None:
        self.last_completed = instance.state
        self.current = None

    def fail(self, error: errors.OpError) -> errors.OpError:
        """Poison the group with ``error`` (telling peers) and return it for raising."""
        if self.error is None:
            self._local_error = error
            if self.transport is not None:
                self.transport.abort(error)
        return error

    def worker_label(self, rank: int) -> str:
        return f"worker {rank} ({self.names[rank]})"


class Instance:
    """One collective instance: sends and receives stamped with its fingerprint and deadline."""

    def __init__(self, comm: Communicator, state: CollectiveState, deadline: float | None,
                 timeout: float | None) -> None:
        self.comm = comm
        self.state = state
        self.deadline = deadline
        self.timeout = timeout
        self.algorithm: str | None = None  # the cross-worker algorithm's name, where the group chose one

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.size

    def run(self, body: Callable[["Instance"], Any], closed_form: ClosedForm | None = None) -> Any:
        """``body(self)``: the algorithm of this instance, run through the transport's ``execute`` (which may
        compute ``closed_form`` instead, the same result stated whole)."""
        transport = self.comm.transport
        return body(self) if transport is None else transport.execute(self, body, closed_form)

    def empty_like(self, like: Any) -> Any:
        """A new, uninitialized array of ``like``'s shape and dtype (NumPy or CuPy, as ``like``), for an algorithm to
        write its result into; the simulator's dry run describes it instead (``sim/collective_batch.py``)."""
        return array_module(like).empty(like.shape, like.dtype)

    def combine(self, total: Callable[[Sequence[Any]], Any], arrays: Sequence[Any]) -> Any:
        """``total(arrays)``: an algorithm's last, local step over every rank's array (gather-reduce's sum); the
        simulator's dry run describes it instead (``sim/collective_batch.py``)."""
        return total(arrays)

    def send(self, peer: int, payload: Any, step: int) -> None:
        header = Header(self.state.seq, self.state.fingerprint, step, self.comm.rank, self.state.site,
                        self.state.kind)
        self.comm.transport.send(peer, Message(header, payload))

    def recv(self, peer: int, step: int) -> Any:
        """The payload of the next message from ``peer``, after checking it belongs to this collective."""
        try:
            message = self.comm.transport.recv(peer, self.deadline)
        except errors.DeadlockError as exc:
            raise self.comm.fail(exc) from None
        except errors.DeadlineExceededError as exc:
            if errors.is_copy_of(exc, self.comm.error):
                raise  # a peer's timeout passed on: its own words (and, on real workers, the diagnosis)
            raise self.timed_out(f"{self.comm.worker_label(peer)}, which has not sent its part") from exc
        self._check(peer, message.header)
        return message.payload

    def timed_out(self, waiting_for: str) -> errors.OpError:
        """TF's timeout error for this instance, naming what it waited for, after failing the group with it; or, when
        a peer's abort failed the group first (it arrived as this deadline passed), that abort, in its own words."""
        error = self.comm.fail(errors.DeadlineExceededError(
            "Collective has timed out during execution.\n"
            f"{self.comm.worker_label(self.rank)} waited {self.timeout} s in {self.state.describe()} "
            f"for {waiting_for}.\n"
            "Fix: check that worker is alive and runs the same collectives; raise "
            "CommunicationOptions(timeout_seconds=...) if it is merely slow."))
        group_error = self.comm.error
        return error if group_error is error else errors.clone(group_error)

    def _check(self, peer: int, header: Header) -> None:
        mine, theirs = self.state, CollectiveState(header.seq, header.fingerprint, header.site, header.kind)
        if header.seq == mine.seq and header.fingerprint == mine.fingerprint and same_identity(
                mine, theirs, self.comm.check_sites):
            return
        raise self.comm.fail(mismatch_error(self.comm, peer, mine, theirs))

    def done(self) -> None:
        self.comm.finish(self)


def mismatch_error(comm: Communicator, peer: int, mine: CollectiveState,
                   theirs: CollectiveState) -> errors.CollectiveMismatchError:
    """TF's first sentence and error class for the mismatch, then both sides and the fix."""
    a, b = mine.fingerprint, theirs.fingerprint
    device = comm.names[comm.rank]
    cls: type[errors.CollectiveMismatchError] = errors.CollectiveTypeMismatchError
    fix = FIX_DESYNC
    if mine.seq != theirs.seq:
        cls = errors.CollectiveMismatchError
        head = (f"Collective desync: collective instance {mine.seq} on {device} received a message that "
                f"belongs to collective instance {theirs.seq} of another member.")
    elif a.op != b.op or a.detail != b.detail:
        head = (f"Collective instance {mine.seq} expected {a.describe()} at device {device} but got "
                f"{b.describe()} from another member in the group.")
    elif a == b:  # same op, dtype and shape, but not the same request
        cls = errors.CollectiveMismatchError
        head = (f"Collective desync: collective instance {mine.seq} paired two different collectives that both "
                f"are {a.describe()}: {mine.kind or 'a collective'} at {mine.site} on {comm.worker_label(comm.rank)} "
                f"and {theirs.kind or 'a collective'} at {theirs.site} on {comm.worker_label(peer)} (TF would silently "
                "combine their values).")
        fix += (f"\nIf identical code legitimately runs from different lines on different workers, set "
                f"{CHECK_SITES_ENV}=0 before creating the strategy (what each collective is for is still compared).")
    elif a.dtype != b.dtype:
        head = (f"Collective instance {mine.seq} expected data_type {a.dtype} at device {device} but got "
                f"data_type {b.dtype} from another member in the group.")
    else:
        cls = errors.CollectiveShapeMismatchError
        head = shape_mismatch_text(mine.seq, device, a.shape, b.shape)
    return cls(f"{head}\n  {comm.worker_label(comm.rank)}: {mine.describe()}\n"
               f"  {comm.worker_label(peer)}: {theirs.describe()}\n{fix}")


def same_identity(mine: CollectiveState, theirs: CollectiveState, check_sites: bool) -> bool:
    """Whether two members' collectives are the same request (same kind; same call site unless not checked or
    unknown on either side)."""
    if mine.kind != theirs.kind:
        return False
    if not check_sites or UNKNOWN_SITE in (mine.site, theirs.site):
        return True
    return mine.site == theirs.site


UNKNOWN_SITE = "<unknown>"


def shape_mismatch_text(seq: int, device: str, expected: tuple, got: tuple) -> str:
    """TF's sentence for members of one collective passing different shapes."""
    return (f"Shape mismatch in the collective instance {seq}. Op at device {device} expected shape "
            f"{_dims(expected)} but another member in the group expected shape {_dims(got)}. "
            "This is likely due to different input shapes at different members of the collective op.")


def _dims(shape: tuple) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
