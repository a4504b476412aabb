"""The NCCL unique id of each collective group, made by rank 0 and fetched by the others over the gRPC control
channel (a unary ``NcclId`` call, authenticated by the cluster token like every call): raw bytes both ways, the
request a group number in ASCII, the reply the id or nothing while rank 0 has not made it yet. Never pickled; a
reply or a published id longer than ``MAX_ID_BYTES`` is refused."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from mirrorlab import errors

from .grpc_transport import PeerNode

__all__ = ["UniqueIdExchange", "MAX_ID_BYTES", "METHOD", "id_bytes", "cupy_ids"]

METHOD = "NcclId"
MAX_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
_MAX_GROUP_DIGITS = 9
_RETRY_PAUSE = 0.05
_CALL_SLICE = 1.0


def id_bytes(unique_id: Any) -> bytes:
    """CuPy's unique id as bytes: older CuPy gives a tuple of 128 signed chars, newer gives bytes."""
    return bytes(unique_id) if isinstance(unique_id, (bytes, bytearray)) else bytes(b & 0xFF for b in unique_id)


def cupy_ids(raw: bytes) -> list[Any]:
    """``raw`` in each form a CuPy's ``NcclCommunicator`` may take as ``commId``, to try in turn: bytes (newer
    CuPy), then a tuple of chars, signed (x86) or unsigned (where C's ``char`` is, e.g. aarch64)."""
    return [bytes(raw), struct.unpack(f"{len(raw)}b", raw), tuple(raw)]


class UniqueIdExchange:
    """Serves ``NcclId`` on ``node`` (construct it before ``node.start()``); rank 0 publishes, the others fetch."""

    def __init__(self, node: PeerNode, max_bytes: int = MAX_ID_BYTES) -> None:
        self.node = node
        self.max_bytes = max_bytes
        self._ids: dict[int, bytes] = {}
        self._lock = threading.Lock()
        node.serve(METHOD, self._answer)

    def publish(self, group: int, raw: bytes) -> None:
        """Make collective group ``group``'s id (rank 0 only) available to the others."""
        if self.node.rank != 0:
            raise ValueError(f"worker {self.node.rank} cannot publish an NCCL id: rank 0 makes every group's id")
        self._check_size(raw, "published")
        with self._lock:
            self._ids[group] = bytes(raw)

    def fetch(self, group: int, deadline: float, abort_error: Callable[[], errors.OpError | None]) -> bytes:
        """Group ``group``'s id from rank 0, asking again until it is published; raises the group's abort error,
        or ``DeadlineExceededError`` once ``deadline`` (``time.monotonic``) passes."""
        request = str(group).encode("ascii")
        while True:
            error = abort_error()
            if error is not None:
                raise error
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.DeadlineExceededError(
                    f"{self.node.label(self.node.rank)} got no NCCL unique id for collective group {group} from "
                    f"{self.node.label(0)} in time.\nFix: check that worker is alive and reaches the same "
                    "collective; raise CommunicationOptions(timeout_seconds=...) if it starts slowly.")
            reply = self._call(request, min(_CALL_SLICE, max(left, 0.05)))
            if reply:
                self._check_size(reply, f"sent by {self.node.label(0)}")
                return reply
            time.sleep(min(_RETRY_PAUSE, max(left, 0.0)))

    def _call(self, request: bytes, timeout: float) -> bytes:
        try:
            return self.node.call(0, METHOD, request, timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return b""
            cls = errors.UnauthenticatedError if code == grpc.StatusCode.UNAUTHENTICATED else errors.UnavailableError
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            raise cls(f"NCCL unique id exchange with {self.node.label(0)} failed: {details}") from None

    def _answer(self, request: bytes, caller: int) -> bytes:
        text = request.decode("ascii", "replace")
        if not text.isdigit() or len(text) > _MAX_GROUP_DIGITS:
            raise ValueError(f"NcclId request from worker {caller} must name a collective group as at most "
                             f"{_MAX_GROUP_DIGITS} ASCII digits, got {request[:20]!r}")
        with self._lock:
            return self._ids.get(int(text), b"")

    def _check_size(self, raw: bytes, what: str) -> None:
        if not raw or len(raw) > self.max_bytes:
            raise ValueError(f"NCCL unique id {what} has {len(raw)} bytes; it must have 1 to {self.max_bytes} "
                             f"(NCCL_UNIQUE_ID_BYTES). Fix: every worker must run the same CuPy and NCCL.")
