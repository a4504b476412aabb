"""The collective ``Transport`` between worker processes on one host, over shared-memory rings.

``ShmTransport.connect`` creates this worker's segment (one inbound ring per peer, ``shm_segment.py``),
maps every peer's, and unlinks its own name once all peers have mapped it, so nothing is left in
``/dev/shm`` even if a worker is killed later. Messages to a peer go into the ring ``me -> peer`` in the
peer's segment; a waiting receiver sleeps on a futex word and re-checks, every ``WAIT_SLICE``, the
group's abort notices, its deadline and whether every peer process is still alive (``pid_watch.py``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence

import numpy as np

from mirrorlab import errors
from mirrorlab.collective.message import RESTART_HINT, AbortNotice, Message
from mirrorlab.collective.transport import Transport

from .futex import futex_wait, futex_wake
from .pid_watch import PidWatch
from .shm_frame import FrameError
from .wire import WireLimits
from .shm_ring import Ring
from .shm_segment import ABORT_LEN, ABORT_TEXT, ABORT_TEXT_BYTES, ATTACHED, DATA_BELL, DEPARTED, Segment, segment_path
from .shm_streams import WAIT_SLICE, Incoming, Outgoing

__all__ = ["ShmTransport", "default_ring_bytes"]

_RING_BUDGET = 256 << 20  # per worker, over all its inbound rings
_RING_MIN, _RING_MAX = 4 << 20, 64 << 20


def default_ring_bytes(size: int) -> int:
    """Each inbound ring's size: large enough that a ring all-reduce's chunk of a tensor of up to 64 MiB
    is written in one go by ``send`` (no writer thread, no snapshot copy), within 256 MiB per worker."""
    share = _RING_BUDGET // max(1, size - 1)
    return max(_RING_MIN, min(_RING_MAX, share)) // 4096 * 4096

_SPINS = 50  # polls of the ring (yielding the core between them) before sleeping on the futex
_CLOSE_WAIT = 5.0
_SESSION = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class ShmTransport(Transport):
    """Rank ``rank`` of ``size`` workers of one host; build it with ``connect``."""

    def __init__(self, rank: int, size: int, own: Segment, peers: dict[int, Segment], names: Sequence[str],
                 limits: WireLimits) -> None:
        self.rank = rank
        self.size = size
        self.names = list(names)
        self.limits = limits
        self._own = own
        self._peers = peers
        self._pids = {p: segment.pid for p, segment in peers.items()}
        self._watch = PidWatch(self._pids)
        self.local_state: Callable[[], str] | None = None  # where this worker is, for the error a lost peer gives
        self._abort: errors.OpError | None = None
        self._closed = False
        self._incoming = {p: Incoming(Ring(own, own.slot(p)), p, limits) for p in peers}
        self._outgoing = {p: Outgoing(Ring(segment, segment.slot(rank)), limits, lambda p=p: self._stall_reason(p))
                          for p, segment in peers.items()}

    @classmethod
    def connect(cls, session: str, rank: int, size: int, *, ring_bytes: int | None = None,
                timeout: float = 30.0, names: Sequence[str] | None = None,
                limits: WireLimits = WireLimits()) -> "ShmTransport":
        """Join the ``size``-worker group ``session`` (the same string on every worker) as ``rank``.

        Waits at most ``timeout`` seconds for every peer to appear, then raises ``UnavailableError``
        naming the missing ranks. ``ring_bytes`` (the same on every worker) defaults to
        ``default_ring_bytes(size)``."""
        if not _SESSION.fullmatch(session):
            raise ValueError(f"session must be 1-64 letters, digits, '_', '-' or '.', got {session!r}")
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not in [0, {size}): every worker needs a distinct rank below size")
        ring_bytes = default_ring_bytes(size) if ring_bytes is None else ring_bytes
        if ring_bytes < 4096 or ring_bytes % 64:
            raise ValueError(f"ring_bytes must be a multiple of 64 and at least 4096, got {ring_bytes}")
        names = list(names) if names is not None else [f"worker {r}" for r in range(size)]
        path = segment_path(session, rank)
        try:
            own = Segment.create(path, size, ring_bytes)
        except FileExistsError:
            raise errors.AlreadyExistsError(
                f"{names[rank]}: the shared-memory segment {path} already exists: another process joined session "
                f"{session!r} as rank {rank}, or a crashed run left it. Fix: give each worker its own rank and each "
                f"run a fresh session, or delete {path} if no run uses it.") from None
        peers: dict[int, Segment] = {}
        try:
            _attach_peers(own, peers, session, rank, size, ring_bytes, names, time.monotonic() + timeout)
        except BaseException:
            own.unlink()
            for segment in (own, *peers.values()):
                segment.close()
            raise
        own.unlink()
        return cls(rank, size, own, peers, names, limits)

    # -- Transport -----------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic()

    @property
    def abort_error(self) -> errors.OpError | None:
        if self._abort is None:
            for p in self._peers:
                length = self._own.word(self._own.slot(p) + ABORT_LEN)
                if length:
                    start = self._own.slot(p) + ABORT_TEXT
                    self._abort = _notice_error(bytes(self._own.u8[start:start + length]), p)
                    break
        return self._abort

    def send(self, dst: int, message: Message) -> None:
        self._check_open()
        self._outgoing[dst].put(message)

    def recv(self, src: int, deadline: float | None) -> Message:
        self._check_open()
        incoming = self._incoming[src]
        ring = incoming.ring
        spins = 0
        while True:
            bell = ring.data_bell()
            message = self._poll(incoming)
            if message is not None:  # a message that arrived before an abort still counts
                return message
            if spins < _SPINS:
                spins += 1
                os.sched_yield()  # let a peer sharing this core run; it is likely the one we wait for
                continue
            error = self.abort_error or self._peer_failure(src)
            if error is not None:
                raise errors.clone(error)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise errors.DeadlineExceededError(f"no message from worker {src} by its deadline")
            futex_wait(ring.data_address, bell, WAIT_SLICE if deadline is None else min(WAIT_SLICE, deadline - now))

    def abort(self, error: errors.OpError) -> None:
        if self._abort is not None:
            return
        self._abort = error
        self._tell_peers(AbortNotice.of(self.rank, error))

    def _tell_peers(self, notice: AbortNotice) -> None:
        """Write ``notice`` into this worker's abort slot at every peer and wake them."""
        text = json.dumps(notice.to_json()).encode("utf-8")[:ABORT_TEXT_BYTES]
        for segment in self._peers.values():
            slot = segment.slot(self.rank)
            segment.u8[slot + ABORT_TEXT: slot + ABORT_TEXT + len(text)] = np.frombuffer(text, np.uint8)
            segment.set_word(slot + ABORT_LEN, len(text))
            _wake_every_reader(segment, self.rank)

    def close(self) -> None:
        """Flush (bounded, skipped once aborted), say goodbye to every peer and unmap every segment."""
        if self._closed:
            return
        end = time.monotonic() + (0.0 if self._abort is not None else _CLOSE_WAIT)
        for outgoing in self._outgoing.values():
            outgoing.stop(max(0.0, end - time.monotonic()))
        self._closed = True
        for segment in self._peers.values():
            segment.set_word(segment.slot(self.rank) + DEPARTED, 1)
            _wake_every_reader(segment, self.rank)
        self._watch.close()
        self._incoming.clear()
        self._outgoing.clear()
        for segment in (self._own, *self._peers.values()):
            segment.close()

    def __enter__(self) -> "ShmTransport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- failures ------------------------------------------------------------------------------------

    def label(self, rank: int) -> str:
        pid = os.getpid() if rank == self.rank else self._pids[rank]
        return f"worker {rank} ({self.names[rank]}, pid {pid})"

    def _poll(self, incoming: Incoming) -> Message | None:
        try:
            return incoming.poll()
        except FrameError as exc:
            error = errors.DataLossError(f"{self.label(self.rank)} refused a frame from {self.label(incoming.src)}: "
                                         f"{exc}\nFix: every worker must run the same mirrorlab version.")
            self.abort(error)
            raise error from None

    def _departed(self, peer: int) -> bool:
        return bool(self._own.word(self._own.slot(peer) + DEPARTED))

    def _stall_reason(self, peer: int) -> str | None:
        """Why ``peer`` will never read its ring again, or None while it may."""
        if self._closed:
            return "this transport is closed"
        if self._departed(peer):
            return f"{self.label(peer)} finished its program"
        if peer in self._watch.exited():
            return f"{self.label(peer)} exited"
        return None

    def _peer_failure(self, src: int) -> errors.OpError | None:
        """The error for waiting on ``src`` while it, or any peer, is gone; it also aborts the group."""
        if self._departed(src):
            return self._lose(src, f"{self.label(src)} finished its program while {self.label(self.rank)} still "
                                   "waits for its message.\nFix: every worker must run the same collectives in the "
                                   "same order.")
        dead = sorted(p for p in self._watch.exited() if not self._departed(p))
        if not dead:
            return None
        peer = dead[0]
        here = f" {self.local_state()}" if self.local_state is not None else ""
        return self._lose(peer, f"{self.label(peer)} is unavailable: its process exited while {self.label(self.rank)} "
                                f"waited for a message from worker {src}{here}.\nFix: look at that worker's log for "
                                "an earlier error, or whether it was killed (OOM, preemption, kill -9).")

    def _lose(self, peer: int, why: str) -> errors.OpError:
        """Fail the group with ``UnavailableError`` saying ``why``; peers learn it as an abort notice."""
        if self._abort is None:
            self._abort = errors.UnavailableError(f"Collective ops is aborted by: {why}\n{RESTART_HINT}",
                                                  worker=self.names[peer])
            self._tell_peers(AbortNotice.of(self.rank, errors.UnavailableError(why)))
        return self._abort

    def _check_open(self) -> None:
        if self._closed:
            raise errors.FailedPreconditionError(
                f"{self.names[self.rank]}: the shared-memory transport is closed. Fix: use it only before close().")


def _attach_peers(own: Segment, peers: dict[int, Segment], session: str, rank: int, size: int, ring_bytes: int,
                  names: Sequence[str], deadline: float) -> None:
    """Map every peer's segment and mark ours attached there, then wait until every peer did the same."""
    missing = set(range(size)) - {rank}
    while missing or not all(own.word(own.slot(p) + ATTACHED) for p in peers):
        for peer in sorted(missing):
            segment = Segment.attach(segment_path(session, peer))
            if segment is None:
                continue
            peers[peer] = segment
            missing.discard(peer)
            if (segment.size, segment.capacity) != (size, ring_bytes):
                raise errors.InvalidArgumentError(
                    f"{names[rank]}: {names[peer]} joined session {session!r} with size={segment.size}, "
                    f"ring_bytes={segment.capacity}; this worker has size={size}, ring_bytes={ring_bytes}. "
                    "Fix: start every worker with the same cluster size and ring size.")
            segment.set_word(segment.slot(rank) + ATTACHED, 1)
        if time.monotonic() > deadline:
            late = sorted(missing | {p for p in peers if not own.word(own.slot(p) + ATTACHED)})
            raise errors.UnavailableError(
                f"{names[rank]}: workers {late} of session {session!r} did not join the shared-memory group in time. "
                "Fix: start every worker of the cluster (on this host) with the same session, or raise the timeout.")
        time.sleep(0.002)


def _wake_every_reader(segment: Segment, writer: int) -> None:
    """Ring every data bell of ``segment``: its owner may be waiting on any peer.

    Only ``writer``'s own bell is rung exactly; the others are best effort (a lost ring costs one slice)."""
    for src in range(segment.size):
        offset = segment.slot(src) + DATA_BELL
        segment.ring_bell(offset)
        futex_wake(segment.base_address + offset)


def _notice_error(raw: bytes, sender: int) -> errors.OpError:
    try:
        return AbortNotice.from_json(json.loads(raw.decode("utf-8"))).to_error()
    except (ValueError, KeyError, TypeError):
        return errors.UnknownError(f"worker {sender} aborted the group with an unreadable notice")
