"""A single-producer single-consumer byte ring in one slot of a shared-memory segment.

The producer copies bytes in at ``head`` and then publishes the new head; the consumer copies them
out at ``tail`` and publishes the new tail. Both counters only grow (bytes ever written/read), so the
fill level is ``head - tail`` and neither side ever waits on a lock. Each publish rings a futex word
that the other side sleeps on (``futex.py``).
"""

from __future__ import annotations

import numpy as np

from .futex import futex_wake
from .shm_segment import DATA_BELL, HEAD, SLOT_META, SPACE_BELL, TAIL, Segment

__all__ = ["Ring"]

PUBLISH_BYTES = 1 << 20  # publish at least this often, so the consumer copies while the producer writes


class Ring:
    """Slot ``slot`` (a byte offset) of ``segment``, seen by either its producer or its consumer."""

    def __init__(self, segment: Segment, slot: int) -> None:
        self.segment = segment
        self.slot = slot
        self.capacity = segment.capacity
        self.data = segment.u8[slot + SLOT_META: slot + SLOT_META + segment.capacity]
        self.data_address = segment.base_address + slot + DATA_BELL
        self.space_address = segment.base_address + slot + SPACE_BELL

    def _head(self) -> int:
        return self.segment.word(self.slot + HEAD)

    def _tail(self) -> int:
        return self.segment.word(self.slot + TAIL)

    def available(self) -> int:
        """Bytes the consumer can take now."""
        return self._head() - self._tail()

    def free(self) -> int:
        """Bytes the producer can put now."""
        return self.capacity - (self._head() - self._tail())

    def data_bell(self) -> int:
        return self.segment.bell(self.slot + DATA_BELL)

    def space_bell(self) -> int:
        return self.segment.bell(self.slot + SPACE_BELL)

    def put(self, source: np.ndarray) -> int:
        """Producer: copy a prefix of the uint8 array ``source`` in; returns how many bytes went in."""
        head = self._head()
        count = min(len(source), self.capacity - (head - self._tail()))
        done = 0
        while done < count:
            piece = min(count - done, PUBLISH_BYTES)
            head = self._copy(self.data, head, source[done:done + piece], into_ring=True)
            done += piece
            self.segment.set_word(self.slot + HEAD, head)
            self.segment.ring_bell(self.slot + DATA_BELL)
            futex_wake(self.data_address)
        return count

    def take(self, target: np.ndarray) -> int:
        """Consumer: copy up to ``len(target)`` available bytes out into the uint8 array ``target``."""
        tail = self._tail()
        count = min(len(target), self._head() - tail)
        if count:
            tail = self._copy(self.data, tail, target[:count], into_ring=False)
            self.segment.set_word(self.slot + TAIL, tail)
            self.segment.ring_bell(self.slot + SPACE_BELL)
            futex_wake(self.space_address)
        return count

    def _copy(self, ring: np.ndarray, position: int, outside: np.ndarray, into_ring: bool) -> int:
        """Copy ``outside`` to/from the ring at counter ``position`` (wrapping once); the new counter."""
        start = position % self.capacity
        first = min(len(outside), self.capacity - start)
        pairs = [(ring[start:start + first], outside[:first]), (ring[:len(outside) - first], outside[first:])]
        for inside, out in pairs:
            if len(out):
                if into_ring:
                    inside[:] = out
                else:
                    out[:] = inside
        return position + len(outside)
