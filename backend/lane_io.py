"""Socket plumbing of the data lane: tuning (no Nagle delay, big buffers, keepalive as gRPC's) and exact
reads and writes straight from and into the caller's buffers that give up when told to stop, so no thread
waits on a dead or silent peer forever."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable

from .keepalive import Keepalive

__all__ = ["LaneClosed", "tune", "recv_exactly", "recv_into_all", "send_all", "SOCKET_BUFFER_BYTES", "IO_SLICE"]

SOCKET_BUFFER_BYTES = 4 << 20  # asked for; the kernel caps it at net.core.[rw]mem_max
IO_SLICE = 0.2  # longest uninterruptible wait in a read or write: a stop request is noticed this often
_SEND_CHUNK = 1 << 20  # a TLS socket is given at most this much per call


class LaneClosed(ConnectionError):
    """The lane ended: the peer hung up or reset it, a read timed out, or this side was told to stop."""


def tune(sock: socket.socket, keepalive: Keepalive) -> None:
    """TCP_NODELAY, big socket buffers, and keepalive probes with TCP_USER_TIMEOUT as gRPC sets them, so a
    lane to a vanished host breaks after ``keepalive.timeout_s`` as the gRPC connection does."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER_BYTES)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, max(1, round(keepalive.time_s)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(1, round(keepalive.time_s)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, max(1, round(keepalive.timeout_s * 1000)))


def recv_exactly(sock: socket.socket, count: int, timeout: float) -> bytes:
    """Exactly ``count`` bytes within ``timeout`` seconds in all, else ``LaneClosed``."""
    buffer = bytearray(count)
    end = time.monotonic() + timeout
    recv_into_all(sock, memoryview(buffer), lambda: time.monotonic() >= end, what=f"{timeout:g} s passed")
    return bytes(buffer)


def recv_into_all(sock: socket.socket, view: memoryview, stop: Callable[[], bool], what: str = "told to stop") -> None:
    """Fill ``view`` from ``sock``; ``LaneClosed`` when the peer ends the lane first or ``stop()`` turns true."""
    filled, total = 0, len(view)
    _slice(sock)
    while filled < total:
        got = _attempt(lambda: sock.recv_into(view[filled:]), stop, what, filled, total)
        if got == 0:
            raise LaneClosed(f"the peer closed it after {filled} of {total} bytes")
        filled += got or 0


def send_all(sock: socket.socket, views: list[memoryview], stop: Callable[[], bool]) -> None:
    """Write ``views`` in order to ``sock`` (one ``sendmsg`` for several when the socket is plain TCP);
    ``LaneClosed`` when the peer is gone or ``stop()`` turns true first."""
    views = [view for view in views if len(view)]
    total, sent = sum(len(view) for view in views), 0
    gather = not isinstance(sock, ssl.SSLSocket)  # TLS sockets have no sendmsg
    _slice(sock)
    while views:
        count = _attempt(lambda: sock.sendmsg(views) if gather else sock.send(views[0][:_SEND_CHUNK]), stop,
                         "told to stop", sent, total) or 0
        sent += count
        while views and count >= len(views[0]):
            count -= len(views.pop(0))
        if views:
            views[0] = views[0][count:]


def _attempt(call: Callable[[], int], stop: Callable[[], bool], what: str, done: int, total: int) -> int | None:
    """The bytes one blocking ``call`` moved, or None when it waited a whole slice and ``stop()`` is still false;
    ``LaneClosed`` (saying ``what`` and how far it got) when told to stop or the socket fails."""
    try:
        return call()
    except TimeoutError:
        if stop():
            raise LaneClosed(f"{what} after {done} of {total} bytes") from None
        return None
    except OSError as exc:
        raise LaneClosed(f"{exc.strerror or exc} after {done} of {total} bytes") from None


def _slice(sock: socket.socket) -> None:
    """Make each blocking call on ``sock`` wait at most ``IO_SLICE``; ``LaneClosed`` when it is closed."""
    try:
        sock.settimeout(IO_SLICE)
    except OSError as exc:
        raise LaneClosed(f"it is closed ({exc.strerror or exc})") from None
