"""Tells whether peer processes on this host are still running, by pidfd (Linux 5.3+).

A pidfd opened while the peer runs stays bound to that process: it reports the exit even when the
process is a zombie nobody has reaped yet, and never confuses a reused pid with the peer.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Mapping

__all__ = ["PidWatch"]


class PidWatch:
    """Watches the processes ``pids`` (rank -> pid); ``exited()`` lists the ranks whose process ended."""

    def __init__(self, pids: Mapping[int, int]) -> None:
        self.pids = dict(pids)
        self._fds: dict[int, int] = {}
        self._gone: set[int] = set()
        for rank, pid in self.pids.items():
            try:
                self._fds[rank] = os.pidfd_open(pid)
            except ProcessLookupError:
                self._gone.add(rank)
        self._lock = threading.Lock()  # poll objects refuse concurrent use (writer threads ask too)
        self._poll = select.poll()
        self._rank_of = {fd: rank for rank, fd in self._fds.items()}
        for fd in self._fds.values():
            self._poll.register(fd, select.POLLIN)

    def exited(self) -> set[int]:
        """Ranks whose process has ended (checked now, without blocking)."""
        with self._lock:
            if self._fds:
                for fd, _ in self._poll.poll(0):
                    self._gone.add(self._rank_of[fd])
            return set(self._gone)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                self._poll.unregister(fd)
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
