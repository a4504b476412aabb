"""The two ends of one ordered pair's shared-memory ring: frames going out and frames coming in.

``Outgoing`` writes what fits at once in the caller's thread (small messages never touch another
thread) and hands the rest to one writer thread per peer, so ``send`` never waits for the receiver.
``Incoming`` parses the byte stream back into messages without blocking, keeping a partly arrived
frame across calls.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import numpy as np

from mirrorlab.collective.message import Message
from mirrorlab.tensor import immutable

from .futex import futex_wait
from .shm_frame import PREFIX_BYTES, encode, header_length, parse_header
from .wire import WireLimits
from .shm_ring import Ring

__all__ = ["Outgoing", "Incoming"]

WAIT_SLICE = 0.05  # longest sleep between checks of a peer's liveness, aborts and deadlines


class Outgoing:
    """Frames to one peer, in send order. ``stalled()`` names why the peer cannot take more (or None)."""

    def __init__(self, ring: Ring, limits: WireLimits, stalled: Callable[[], str | None]) -> None:
        self.ring = ring
        self.limits = limits
        self._stalled = stalled
        self._pending: deque[np.ndarray] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stop = False

    def put(self, message: Message) -> None:
        """Queue ``message``; never blocks on the receiver (the payload is snapshotted if still mutable)."""
        prefix, payload = encode(message, self.limits)
        with self._cond:
            was_idle = not self._pending
            self._pending.extend(part for part in (prefix, payload) if len(part))
            if was_idle:
                self._write_some()
            if self._pending:
                if self._pending[-1].base is not None and not immutable(self._pending[-1]):
                    self._pending[-1] = self._pending[-1].copy()
                self._start_thread()
                self._cond.notify()

    def idle(self) -> bool:
        with self._cond:
            return not self._pending

    def stop(self, timeout: float) -> None:
        """Flush for at most ``timeout`` seconds, then end the writer thread and drop what is left."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._cond:
            self._pending.clear()

    def _write_some(self) -> None:
        """Put queued bytes into the ring until it is full or the queue empty (caller holds the lock)."""
        while self._pending:
            part = self._pending[0]
            done = self.ring.put(part)
            if done < len(part):
                self._pending[0] = part[done:]
                return
            self._pending.popleft()

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mirrorlab-shm-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if not self._pending:
                    return
                bell = self.ring.space_bell()
                self._write_some()
                if not self._pending or self.ring.free():
                    continue
            if self._stalled() is not None:
                with self._cond:
                    self._pending.clear()
                continue
            futex_wait(self.ring.space_address, bell, WAIT_SLICE)


class Incoming:
    """Frames from worker ``src``, parsed as bytes arrive."""

    def __init__(self, ring: Ring, src: int, limits: WireLimits) -> None:
        self.ring = ring
        self.src = src
        self.limits = limits
        self._reset()

    def _reset(self) -> None:
        self._buffer = np.empty(PREFIX_BYTES, np.uint8)
        self._filled = 0
        self._stage = "prefix"
        self._meta: tuple | None = None

    def poll(self) -> Message | None:
        """The next whole message if it has arrived, else None (bytes so far are kept)."""
        while True:
            self._filled += self.ring.take(self._buffer[self._filled:])
            if self._filled < len(self._buffer):
                return None
            if self._stage == "prefix":
                self._buffer = np.empty(header_length(self._buffer.tobytes(), self.limits), np.uint8)
                self._filled, self._stage = 0, "header"
            elif self._stage == "header":
                header, dtype, shape = parse_header(self._buffer.tobytes(), self.src, self.limits)
                self._meta = (header, dtype, shape)
                self._buffer = np.empty(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, np.uint8)
                self._filled, self._stage = 0, "payload"
            else:
                header, dtype, shape = self._meta
                array = self._buffer.view(dtype.newbyteorder("<")).reshape(shape).astype(dtype, copy=False)
                array.flags.writeable = False
                self._reset()
                return Message(header, array)
