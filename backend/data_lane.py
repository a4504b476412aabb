"""TCP data lanes beside the gRPC server: the bytes of large payloads between two workers skip grpcio.

Each worker listens on one more TCP port, on the host its gRPC server binds, and announces it through the
unary ``LanePort`` method of its (token-checked) gRPC server. After the rendezvous, ``open`` connects one lane
to every peer (the ordered pair me -> peer) and authenticates it (``lane_auth.py``; with TLS, inside mutual TLS).
A message of at least ``min_bytes`` then goes as a frame on the gRPC stream that carries its header, dtype,
shape and payload length, and as raw payload bytes on the lane, queued in the same order under one lock; the
receiving stream handler reads exactly that many bytes from the lane into the array's buffer, in header order,
so each pair stays FIFO. A lane that breaks fails the node as a broken gRPC stream does (``PeerNode.peer_lost``).
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable

import numpy as np

from mirrorlab.tensor import immutable

from . import wire
from .grpc_transport import PeerNode
from .keepalive import Keepalive
from .lane_auth import LaneAuthError, answer_challenge, challenge
from .lane_io import LaneClosed, recv_into_all, send_all, tune
from .lane_settings import LaneSettings
from .settings import DEFAULT_KEEPALIVE

__all__ = ["DataLanes", "LANE_PORT_METHOD"]

LANE_PORT_METHOD = "LanePort"
HANDSHAKE_TIMEOUT_S = 5.0
_INBOUND_WAIT_S = 10.0  # longest wait for a peer's lane to be registered once a frame says bytes follow on it
_DRAIN_SLICE = 0.05

log = logging.getLogger("mirrorlab.backend")


class DataLanes:
    """This worker's data lanes on ``node`` (create before ``node.start()``, ``open`` after the rendezvous)."""

    def __init__(self, node: PeerNode, token: str, settings: LaneSettings = LaneSettings(),
                 keepalive: Keepalive = DEFAULT_KEEPALIVE, tls: tuple[ssl.SSLContext, ssl.SSLContext] | None = None):
        self.node = node
        self.settings = settings
        self._token = token
        self._keepalive = keepalive
        self._server_tls, self._client_tls = tls or (None, None)
        self._cond = threading.Condition()
        self._outgoing: dict[int, _OutLane] = {}
        self._incoming: dict[int, socket.socket] = {}
        self._stopping = False
        self.refused: list[str] = []  # why each client that failed the handshake was dropped
        host = node.bind_host
        self._listener = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                              backlog=2 * node.size + 4)
        self.port = self._listener.getsockname()[1]
        node.serve(LANE_PORT_METHOD, lambda request, caller: json.dumps({"port": self.port}).encode("utf-8"))
        node.lanes = self
        threading.Thread(target=self._accept, name="mirrorlab-lane-accept", daemon=True).start()

    @property
    def peers(self) -> list[int]:
        """The peers this worker has an open lane to."""
        with self._cond:
            return sorted(self._outgoing)

    # -- connecting ----------------------------------------------------------------------------------

    def open(self, timeout: float) -> list[int]:
        """Connect and authenticate a lane to every peer within ``timeout`` seconds; the peers it could not
        reach keep every byte on gRPC (logged). Returns the peers with a lane."""
        node = self.node
        for peer in range(node.size):
            if peer == node.rank:
                continue
            try:
                self._connect(peer, timeout)
            except (OSError, ValueError, KeyError) as exc:
                log.warning("%s: no data lane to %s (%s); its messages stay on gRPC", node.label(node.rank),
                            node.label(peer), exc)
        return self.peers

    def _connect(self, peer: int, timeout: float) -> None:
        node = self.node
        reply = json.loads(node.call(peer, LANE_PORT_METHOD, b"", timeout=timeout).decode("utf-8"))
        port = int(reply["port"])
        host = node.addresses[peer].rpartition(":")[0].strip("[]")
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            tune(sock, self._keepalive)
            if self._client_tls is not None:
                sock = self._client_tls.wrap_socket(sock, server_hostname=host)
            answer_challenge(sock, self._token, node.rank, peer, HANDSHAKE_TIMEOUT_S)
        except BaseException:
            sock.close()
            raise
        with self._cond:
            self._outgoing[peer] = _OutLane(self, peer, sock)

    def _accept(self) -> None:
        while not self._stopping:
            try:
                sock, address = self._listener.accept()
            except OSError:
                return  # the listener was closed
            threading.Thread(target=self._admit, args=(sock, address), name="mirrorlab-lane-admit",
                             daemon=True).start()

    def _admit(self, sock: socket.socket, address: tuple) -> None:
        """Authenticate a connecting worker within the handshake timeout, else drop it (logged)."""
        node = self.node
        try:
            tune(sock, self._keepalive)
            if self._server_tls is not None:
                sock.settimeout(HANDSHAKE_TIMEOUT_S)
                sock = self._server_tls.wrap_socket(sock, server_side=True)
            src = challenge(sock, self._token, node.rank, node.size, HANDSHAKE_TIMEOUT_S)
        except (OSError, LaneAuthError) as exc:
            why = f"{address[0]}:{address[1]}: {exc}"
            self.refused.append(why)
            log.warning("%s refused a data-lane client at %s", node.label(node.rank), why)
            sock.close()
            return
        with self._cond:
            old = self._incoming.get(src)
            self._incoming[src] = sock
            self._cond.notify_all()
        if old is not None:
            old.close()

    # -- sending and receiving -----------------------------------------------------------------------

    def send(self, peer: int, group: int, message: wire.Message) -> bool:
        """Send ``message`` to ``peer`` with its payload on the lane; False (nothing sent) when it is smaller than
        ``min_bytes`` or there is no lane to ``peer``."""
        lane = self._outgoing.get(peer)
        if lane is None or np.asarray(message.payload).nbytes < self.settings.min_bytes:
            return False
        head, payload = wire.lane_parts(group, message)
        lane.put(head, payload)
        return True

    def read(self, src: int, frame: wire.Frame) -> wire.Frame:
        """``frame`` (its payload on the lane) with the payload read from ``src``'s lane; ``LaneClosed`` when
        that lane ends first or never opens."""
        end = time.monotonic() + _INBOUND_WAIT_S
        with self._cond:
            while (sock := self._incoming.get(src)) is None:
                if self._stopping or time.monotonic() >= end:
                    raise LaneClosed(f"a frame says {frame.lane_bytes} bytes follow on its data lane, which is "
                                     "not open")
                self._cond.wait(0.1)
        buffer = np.empty(frame.lane_bytes, np.uint8)
        recv_into_all(sock, memoryview(buffer), lambda: self._stopping)
        return wire.with_lane_payload(frame, buffer)

    def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until every queued payload has been written."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not all(lane.idle() for lane in list(self._outgoing.values())):
            time.sleep(_DRAIN_SLICE)

    def close(self) -> None:
        """Stop every lane thread and close every socket (queued payloads not yet written are dropped)."""
        self._stopping = True
        self._listener.close()
        with self._cond:
            sockets = [*self._incoming.values(), *(lane.sock for lane in self._outgoing.values())]
            lanes = list(self._outgoing.values())
            self._cond.notify_all()
        for lane in lanes:
            lane.finish()
        for sock in sockets:
            sock.close()


class _OutLane:
    """Payloads to one peer, written in ``put`` order by one thread; a write that fails fails the node."""

    def __init__(self, lanes: DataLanes, peer: int, sock: socket.socket) -> None:
        self.lanes = lanes
        self.peer = peer
        self.sock = sock
        self._order = threading.Lock()  # a header and its payload are queued together
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending = 0
        self._count = threading.Lock()
        threading.Thread(target=self._write, name=f"mirrorlab-lane-{peer}", daemon=True).start()

    def put(self, head: bytes, payload: np.ndarray) -> None:
        """Queue ``head`` on the gRPC stream and ``payload`` (snapshotted if still mutable) on the lane."""
        if not immutable(payload):
            payload = payload.copy()
        with self._count:
            self._pending += 1
        with self._order:
            self.lanes.node.send_frame(self.peer, head)
            self._queue.put(payload)

    def idle(self) -> bool:
        with self._count:
            return self._pending == 0

    def finish(self) -> None:
        self._queue.put(None)

    def _write(self) -> None:
        stop: Callable[[], bool] = lambda: self.lanes._stopping
        while (payload := self._queue.get()) is not None:
            try:
                send_all(self.sock, memoryview(payload), stop)
            except LaneClosed as exc:
                if not self.lanes._stopping:
                    self.lanes.node.peer_lost(self.peer, f"the data lane to it broke ({exc})")
                return
            finally:
                with self._count:
                    self._pending -= 1
