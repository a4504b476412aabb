"""TCP data lanes beside the gRPC server: the messages between two workers skip grpcio.

Each worker listens on one more TCP port, on the host its gRPC server binds, and announces it through the
unary ``LanePort`` method of its (token-checked) gRPC server. After the rendezvous, ``open`` connects one lane
to every peer (the ordered pair me -> peer) and authenticates it (``lane_auth.py``; with TLS, inside mutual TLS).
Every message to that peer then travels on its lane, and so does the goodbye, so the pair stays FIFO: a frame
carrying the header, dtype, shape and payload length (``wire.lane_parts``, checked against ``WireLimits`` before
anything is allocated) followed by the raw payload, read by the receiver straight into the array's buffer. gRPC
keeps the rendezvous, heartbeats and abort notices. A lane that breaks fails the node as a broken gRPC stream
does (``PeerNode.peer_lost``), so a dead peer never leaves a waiter blocked.
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

import grpc
import numpy as np

from mirrorlab import errors
from mirrorlab.tensor import immutable

from . import wire
from .grpc_transport import BROKEN_CONNECTION_GRACE, PeerNode
from .keepalive import Keepalive
from .lane_auth import LaneAuthError, answer_challenge, challenge
from .lane_io import LaneClosed, recv_into_all, send_all, tune
from .settings import DATA_LANE_CONNECT_DEFAULT_S, DATA_LANE_PORT_VAR, DATA_LANE_VAR, DEFAULT_KEEPALIVE

__all__ = ["DataLanes", "LANE_PORT_METHOD"]

LANE_PORT_METHOD = "LanePort"
HANDSHAKE_TIMEOUT_S = 5.0
_DRAIN_SLICE = 0.05

log = logging.getLogger("mirrorlab.backend")


class DataLanes:
    """This worker's data lanes on ``node`` (create before ``node.start()``, ``open`` after the rendezvous);
    ``tls``: the (listening, connecting) contexts of mutual TLS (``lane_tls.py``); ``port``: where it listens (0: any
    free port; ``MIRRORLAB_DATA_LANE_PORT`` sets it for a firewall); ``connect_timeout``: how long one lane connect may
    take before its pair stays on gRPC (``MIRRORLAB_DATA_LANE_CONNECT_TIMEOUT``)."""

    def __init__(self, node: PeerNode, token: str, keepalive: Keepalive = DEFAULT_KEEPALIVE,
                 tls: tuple[ssl.SSLContext, ssl.SSLContext] | None = None, port: int = 0,
                 connect_timeout: float = DATA_LANE_CONNECT_DEFAULT_S) -> None:
        self.node = node
        self._token = token
        self._keepalive = keepalive
        self._connect_timeout = connect_timeout
        self._opened = False  # once ``open`` has returned, a late connect is dropped (its pair already uses gRPC)
        self._server_tls, self._client_tls = tls or (None, None)
        self._cond = threading.Condition()
        self._outgoing: dict[int, _OutLane] = {}
        self._incoming: dict[int, socket.socket] = {}
        self._stopping = False
        self.refused: list[str] = []  # why each client that failed the handshake was dropped
        host = node.bind_host
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._listener = socket.create_server((host, port), family=family, backlog=2 * node.size + 4)
        except OSError as exc:
            raise errors.UnavailableError(
                f"{node.label(node.rank)} could not listen for data lanes on {host}:{port}: {exc.strerror}. Fix: "
                f"set {DATA_LANE_PORT_VAR} to a free port of this machine (or unset it for any free port), or "
                f"{DATA_LANE_VAR}=off to keep every message on gRPC.") from None
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
        """Connect and authenticate a lane to every peer at once, within ``timeout`` seconds, so that a firewall
        dropping lane ports costs start-up one connect timeout whatever the number of peers; the peers it could not
        reach keep every byte on gRPC (logged, naming the peer and the fix). Returns the peers with a lane."""
        node, start = self.node, time.monotonic()
        end = start + timeout
        failed: dict[int, tuple[float, BaseException]] = {}
        ports: dict[int, int] = {}  # the lane port each peer announced

        def connect(peer: int) -> None:
            try:
                self._connect(peer, end, ports)
            except (OSError, ValueError, KeyError, grpc.RpcError) as exc:
                failed[peer] = (time.monotonic() - start, exc)

        connecting = [threading.Thread(target=connect, args=(peer,), name=f"mirrorlab-lane-connect-{peer}",
                                       daemon=True) for peer in range(node.size) if peer != node.rank]
        for thread in connecting:
            thread.start()
        # Each connect is bounded (the port query by ``end``, the connect by the connect timeout, TLS by the same,
        # the challenge by its own timeout), so they all end before this bound; one that did not would be dropped
        # below, and its peer, which may have admitted it, would take the closed lane for a lost peer.
        bound = end + self._connect_timeout + HANDSHAKE_TIMEOUT_S + 1.0
        for thread in connecting:
            thread.join(max(0.0, bound - time.monotonic()))
        with self._cond:
            self._opened = True
            peers = sorted(self._outgoing)
        for peer in sorted(set(range(node.size)) - set(peers) - {node.rank}):
            seconds, exc = failed.get(peer, (time.monotonic() - start, TimeoutError("still connecting")))
            port = f"TCP port {ports[peer]}" if peer in ports else "the data-lane port"
            log.warning("%s: no data lane to %s after %.1f s (%s: %s); its messages stay on gRPC. Fix: let this "
                        "host reach %s of that worker's host (fix the port with %s and open it in the firewall), "
                        "or set %s=off", node.label(node.rank), node.label(peer), seconds, type(exc).__name__, exc,
                        port, DATA_LANE_PORT_VAR, DATA_LANE_VAR)
        return peers

    def _lane_port(self, peer: int, end: float) -> int:
        """``peer``'s lane port, asked over gRPC until it answers (it may still be starting) or ``end`` passes."""
        while True:
            try:
                slice_s = max(0.05, min(1.0, end - time.monotonic()))
                reply = self.node.call(peer, LANE_PORT_METHOD, b"", timeout=slice_s)
                return int(json.loads(reply.decode("utf-8"))["port"])
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) \
                        or time.monotonic() >= end:
                    raise
            time.sleep(0.1)

    def _connect(self, peer: int, end: float, ports: dict[int, int]) -> None:
        node = self.node
        port = ports[peer] = self._lane_port(peer, end)
        timeout = max(0.05, end - time.monotonic())
        host = node.addresses[peer].rpartition(":")[0].strip("[]")
        sock = socket.create_connection((host, port), timeout=min(self._connect_timeout, timeout))
        try:
            tune(sock, self._keepalive)
            if self._client_tls is not None:
                sock = self._client_tls.wrap_socket(sock, server_hostname=host)
            answer_challenge(sock, self._token, node.rank, peer, HANDSHAKE_TIMEOUT_S)
        except BaseException:
            sock.close()
            raise
        with self._cond:
            if self._opened:  # too late: this pair's messages already go over gRPC
                sock.close()
                return
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
            if src in self._incoming or self._stopping:
                log.warning("%s refused a second data lane from worker %d", node.label(node.rank), src)
                sock.close()
                return
            self._incoming[src] = sock
        self._read(src, sock)

    # -- sending and receiving -----------------------------------------------------------------------

    def send(self, peer: int, group: int, message: wire.Message) -> bool:
        """Queue ``message`` of ``group`` on the lane to ``peer``; False (nothing queued) when there is none."""
        lane = self._outgoing.get(peer)
        if lane is None:
            return False
        lane.put(*wire.lane_parts(group, message))
        return True

    def say_bye(self, peer: int) -> bool:
        """Queue the goodbye on the lane to ``peer``, after every message; False when there is none."""
        lane = self._outgoing.get(peer)
        if lane is None:
            return False
        lane.put(wire.encode_bye(), np.empty(0, np.uint8))
        return True

    def _read(self, src: int, sock: socket.socket) -> None:
        """File every frame from ``src``'s lane with the node until its goodbye; a lane that ends or sends a
        malformed frame first fails the node, naming ``src``."""
        node, stop = self.node, lambda: self._stopping
        try:
            while True:
                prefix = bytearray(wire.PREFIX_BYTES)
                recv_into_all(sock, memoryview(prefix), stop)
                head = bytearray(wire.PREFIX_BYTES + wire.header_length(prefix, node.limits))
                head[:wire.PREFIX_BYTES] = prefix
                recv_into_all(sock, memoryview(head)[wire.PREFIX_BYTES:], stop)
                frame = wire.decode(head, node.limits)
                if frame.layout is not None:
                    payload = np.empty(frame.lane_bytes, np.uint8)
                    recv_into_all(sock, memoryview(payload), stop)
                    frame = wire.with_lane_payload(frame, payload)
                node.accept(src, frame)
                if frame.kind == "bye":
                    return
        except LaneClosed as exc:
            if not self._stopping:
                node.peer_lost(src, f"the data lane from it broke ({exc})", BROKEN_CONNECTION_GRACE)
        except wire.WireError as exc:
            log.warning("%s refused a frame from worker %d on its data lane: %s", node.label(node.rank), src, exc)
            node.peer_lost(src, f"it sent a malformed frame on its data lane ({exc})")
        finally:
            sock.close()

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
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked on it at once
            except OSError:
                pass  # already closed or reset
            sock.close()


class _OutLane:
    """Frames to one peer, written in ``put`` order by one thread; a write that fails fails the node, and the
    lane drops what is queued after it."""

    def __init__(self, lanes: DataLanes, peer: int, sock: socket.socket) -> None:
        self.lanes = lanes
        self.peer = peer
        self.sock = sock
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending = 0
        self._count = threading.Lock()
        self._broken = False
        threading.Thread(target=self._write, name=f"mirrorlab-lane-{peer}", daemon=True).start()

    def put(self, head: bytes, payload: np.ndarray) -> None:
        """Queue ``head`` and ``payload`` (snapshotted if still mutable); never blocks."""
        if self._broken:
            return
        if not immutable(payload):
            payload = payload.copy()
        with self._count:
            self._pending += 1
        self._queue.put((head, payload))

    def idle(self) -> bool:
        """Whether everything queued has been written (or can never be)."""
        with self._count:
            return self._broken or self._pending == 0

    def finish(self) -> None:
        self._queue.put(None)

    def _write(self) -> None:
        stop: Callable[[], bool] = lambda: self.lanes._stopping
        while (frame := self._queue.get()) is not None:
            head, payload = frame
            try:
                send_all(self.sock, [memoryview(head), memoryview(payload)], stop)
            except LaneClosed as exc:
                self._broken = True
                if not self.lanes._stopping:
                    self.lanes.node.peer_lost(self.peer, f"the data lane to it broke ({exc})",
                                              BROKEN_CONNECTION_GRACE)
                return
            finally:
                with self._count:
                    self._pending -= 1
