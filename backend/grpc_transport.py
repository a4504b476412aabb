"""The collective ``Transport`` over gRPC: one server per worker process, one client stream per ordered peer
pair (so messages between a pair stay in FIFO order), no generated code.

``PeerNode`` is the process's endpoint: it serves ``/mirrorlab.Peer/Send`` (a client stream of wire frames)
and any unary methods registered before ``start`` (rendezvous' Hello, liveness' Ping), checks the cluster
token on every call before anything else, and keeps one mailbox per (group, sender). ``GrpcTransport`` is
one collective group's view of it, as ``SimTransport`` is of the simulated network. With ``DataLanes``
(``data_lane.py``) the messages to a peer and the goodbye travel on a TCP lane instead of the stream.
"""

from __future__ import annotations

import hmac
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import grpc

from mirrorlab import errors
from mirrorlab.collective.message import AbortNotice, Header, Message
from mirrorlab.collective.transport import Transport
from mirrorlab.runtime.liveness import peer_lost_error

from . import grpc_options, wire
from .keepalive import Keepalive
from .settings import DEFAULT_KEEPALIVE
from .tls import TlsFiles

if TYPE_CHECKING:
    from .data_lane import DataLanes

__all__ = ["PeerNode", "GrpcTransport", "SERVICE", "TOKEN_KEY", "RANK_KEY"]

SERVICE = "mirrorlab.Peer"
TOKEN_KEY = "mirrorlab-token"
RANK_KEY = "mirrorlab-rank"
ALL_GROUPS = -1
_WAIT_SLICE = 0.2  # longest uninterruptible wait: Ctrl-C and deadlines are noticed this often
_CLOSE_WAIT = 5.0
_FAILED_CLOSE_WAIT = 1.0
BROKEN_CONNECTION_GRACE = 1.0
"""Seconds a broken connection to a peer waits for an abort notice naming the cause before it fails the node."""

log = logging.getLogger("mirrorlab.backend")

Unary = Callable[[bytes, int], bytes]  # (request, caller rank) -> reply


class PeerNode:
    """This process's gRPC endpoint: rank ``rank`` of ``len(addresses)`` workers named ``names``."""

    def __init__(self, rank: int, names: Sequence[str], addresses: Sequence[str], token: str,
                 bind_host: str | None = None, limits: wire.WireLimits = wire.WireLimits(),
                 tls: TlsFiles | None = None, keepalive: Keepalive = DEFAULT_KEEPALIVE) -> None:
        self.rank = rank
        self.size = len(addresses)
        self.names = list(names)
        self.addresses = list(addresses)
        self.limits = limits
        self._tls = tls
        self._token = token
        self._metadata = ((TOKEN_KEY, token), (RANK_KEY, str(rank)))
        self._bind = _bind_address(addresses[rank], bind_host)
        self._unary: dict[str, Unary] = {}
        self._cond = threading.Condition()
        self._boxes: dict[tuple[int, int], deque] = {}
        self._aborts: dict[int, errors.OpError] = {}
        self.departed: set[int] = set()
        self.refused: list[str] = []  # the rank each caller turned away for a wrong token claimed to be
        self._channels: dict[int, grpc.Channel] = {}
        self._outgoing: dict[int, _Outgoing] = {}
        self._closing = False
        self.peer_state: dict[int, str] = {}  # the last collective each peer reported (heartbeat replies)
        self._last_header: dict[int, Header] = {}  # the last message each peer sent here
        self.local_state: Callable[[], str] = lambda: ""  # where this worker is, for error messages
        # told of every abort of a group (ALL_GROUPS included), so collectives on another transport stop too
        self.on_abort: Callable[[int, errors.OpError], None] = lambda group, error: None
        self._channel_options = grpc_options.channel_options()
        self._server = grpc.server(ThreadPoolExecutor(max_workers=2 * self.size + 8, thread_name_prefix="mirrorlab-rpc"),
                                   handlers=[_Handler(self)], interceptors=[_TokenCheck(self)],
                                   options=[*grpc_options.server_options(), *keepalive.server_options()])
        self._client_options = [*self._channel_options, *keepalive.client_options()]
        self.lanes: DataLanes | None = None  # set by DataLanes: messages then skip grpcio

    def label(self, rank: int) -> str:
        """``worker 1 (/job:worker/replica:0/task:1 at 127.0.0.1:4000)``."""
        return f"worker {rank} ({self.names[rank]} at {self.addresses[rank]})"

    # -- serving -------------------------------------------------------------------------------------

    def serve(self, name: str, handler: Unary) -> None:
        """Answer unary ``/mirrorlab.Peer/<name>`` with ``handler``; only before ``start``."""
        self._unary[name] = handler

    def start(self) -> None:
        """Bind this task's address and start serving; a taken port names the task and the fix."""
        try:
            port = (self._server.add_secure_port(self._bind, self._tls.server_credentials()) if self._tls
                    else self._server.add_insecure_port(self._bind))
        except RuntimeError:
            port = 0
        if port == 0:
            raise errors.UnavailableError(
                f"{self.label(self.rank)} could not listen on {self._bind}: the port is taken or the host is not "
                "this machine's. Fix: give this task a free port of this machine in TF_CONFIG, or stop the process "
                "that holds it (is another worker running with the same task index?).")
        self._server.start()

    @property
    def bind_host(self) -> str:
        """The host (name or address, without brackets) the server binds."""
        return self._bind.rpartition(":")[0].strip("[]")

    @property
    def uses_tls(self) -> bool:
        return self._tls is not None

    def token_ok(self, metadata: dict) -> bool:
        return hmac.compare_digest(str(metadata.get(TOKEN_KEY, "")).encode(), self._token.encode())

    def caller_rank(self, metadata: dict) -> int:
        raw = str(metadata.get(RANK_KEY, ""))
        if not raw.isdigit() or not 0 <= int(raw) < self.size or int(raw) == self.rank:
            raise wire.WireError(f"caller rank {raw!r} is not another worker of this {self.size}-worker cluster")
        return int(raw)

    def accept(self, src: int, frame: wire.Frame) -> None:
        """File a decoded frame from worker ``src``: a message in its mailbox, an abort, or its goodbye."""
        with self._cond:
            if frame.kind == "message":
                if frame.message.header.sender != src:
                    raise wire.WireError(f"message claims sender {frame.message.header.sender} on worker {src}'s stream")
                self._boxes.setdefault((frame.group, src), deque()).append(frame.message)
                self._last_header[src] = frame.message.header
            elif frame.kind == "abort":
                self._aborts.setdefault(frame.group, frame.notice.to_error())
            else:
                self.departed.add(src)
            self._cond.notify_all()
        if frame.kind == "abort":
            self.on_abort(frame.group, self._aborts[frame.group])

    # -- calling -------------------------------------------------------------------------------------

    def channel(self, peer: int) -> grpc.Channel:
        with self._cond:
            if peer not in self._channels:
                address, options = self.addresses[peer], self._client_options
                self._channels[peer] = (grpc.secure_channel(address, self._tls.channel_credentials(), options)
                                        if self._tls else grpc.insecure_channel(address, options))
            return self._channels[peer]

    def call(self, peer: int, name: str, request: bytes, timeout: float) -> bytes:
        """Unary call of ``name`` on ``peer``; raises ``grpc.RpcError`` as gRPC does."""
        method = self.channel(peer).unary_unary(f"/{SERVICE}/{name}")
        return method(request, timeout=timeout, metadata=self._metadata)

    def send_message(self, peer: int, group: int, message: Message) -> None:
        """Queue ``message`` of ``group`` for ``peer``: on the data lane when there is one to ``peer``, else on the
        gRPC stream; never blocks, and the payload is snapshotted."""
        if self.lanes is None or not self.lanes.send(peer, group, message):
            self.send_frame(peer, wire.message_parts(group, message))  # cutting pieces snapshots the payload

    def send_frame(self, peer: int, frame: bytes | list[wire.Buffer]) -> None:
        """Queue ``frame`` (bytes or ``wire.message_parts``) on the stream to ``peer`` (opened on first use);
        never blocks. Its pieces are cut (copied) before this returns."""
        with self._cond:
            stream = self._outgoing.get(peer)
            if stream is None:
                stream = self._outgoing[peer] = _Outgoing(self, peer)
        stream.put(frame)

    # -- receiving and failing -----------------------------------------------------------------------

    def recv(self, group: int, src: int, deadline: float | None) -> Message:
        """The next message of ``group`` from ``src`` (see ``Transport.recv``)."""
        with self._cond:
            while True:
                box = self._boxes.get((group, src))
                if box:  # a message that arrived before an abort still counts, as on the simulator
                    return box.popleft()
                error = self.abort_error(group)
                if error is not None:
                    raise errors.clone(error)
                if src in self.departed:
                    raise errors.UnavailableError(
                        f"{self.label(src)} finished its program while {self.label(self.rank)} still waits for "
                        f"its message.\nFix: every worker must run the same collectives in the same order.")
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    raise errors.DeadlineExceededError(f"no message from worker {src} by its deadline")
                self._cond.wait(_WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - now))

    def abort_error(self, group: int) -> errors.OpError | None:
        return self._aborts.get(group) or self._aborts.get(ALL_GROUPS)

    def abort(self, group: int, error: errors.OpError, skip: int | None = None) -> None:
        """Fail ``group`` (every group for ``ALL_GROUPS``) here and tell every peer but ``skip``; the first
        error wins."""
        with self._cond:
            if group in self._aborts:
                return
            self._aborts[group] = error
            self._cond.notify_all()
        self.on_abort(group, error)
        frame = wire.encode_abort(group, AbortNotice.of(self.rank, error))
        for peer in range(self.size):
            if peer not in (self.rank, skip) and peer not in self.departed:
                self.send_frame(peer, frame)

    def peer_lost(self, peer: int, why: str, grace: float = 0.0) -> None:
        """Fail every group here with ``UnavailableError`` naming ``peer``, why, and where it last was; after
        ``grace`` seconds (on a thread of its own) when its connection broke: a peer that failed on another
        worker's error closes its connections as it exits, which can arrive before that worker's abort notice
        (another connection), and the notice, arriving within the grace, names the cause instead (first error wins)."""
        if self._closing or peer in self.departed:
            return
        if grace > 0:  # (asked again when the grace is over: the peer may have said goodbye, or we closed, since)
            timer = threading.Timer(grace, self.peer_lost, (peer, why))
            timer.daemon = True
            timer.start()
            return
        last = self.peer_state.get(peer, "unknown (no heartbeat answered yet)")
        header = self._last_header.get(peer)
        sent = (f"; its last message here belonged to {header.fingerprint.describe()} #{header.seq} at {header.site}"
                if header is not None else "")
        local = self.local_state()
        here = f"\n{self.label(self.rank)} was {local}." if local else ""
        error = peer_lost_error(self.names[peer], (
            f"{self.label(peer)} is unavailable: {why}.\n"
            f"Its last heartbeat said it was {last}{sent}.{here}\n"
            "Fix: look at that worker's log for an earlier error, or whether it was killed (OOM, preemption) or "
            "cannot be reached; raise MIRRORLAB_HEARTBEAT_TIMEOUT if it is merely slow."), passed_on_from=peer)
        self.abort(ALL_GROUPS, error, skip=peer)  # the other peers learn the cause now, not by their own timeout

    def close(self) -> None:
        """Flush the streams (bounded) and stop serving. After a normal run, say goodbye to every peer first;
        a failed worker has sent its abort instead, and waits less for peers that may be gone."""
        with self._cond:
            self._closing = True
            failed = ALL_GROUPS in self._aborts
            laned = {p for p in range(self.size) if not failed and self.lanes is not None and self.lanes.say_bye(p)}
            if not failed:
                for peer in range(self.size):
                    if peer not in (self.rank, *laned) and peer not in self._outgoing and peer not in self.departed:
                        self._outgoing[peer] = _Outgoing(self, peer)
            streams = {peer: stream for peer, stream in self._outgoing.items()}
        if self.lanes is not None:  # every message and goodbye on a lane is written before it closes
            self.lanes.drain(_FAILED_CLOSE_WAIT if failed else _CLOSE_WAIT)
        for peer, stream in streams.items():
            if not failed and peer not in laned:
                stream.put(wire.encode_bye())
            stream.finish()
        end = time.monotonic() + (_FAILED_CLOSE_WAIT if failed else _CLOSE_WAIT)
        for stream in streams.values():
            stream.wait(max(0.0, end - time.monotonic()))
        self._server.stop(grace=0.5).wait(2.0)
        if self.lanes is not None:
            self.lanes.close()
        for channel in self._channels.values():
            channel.close()


class _Outgoing:
    """One client stream to ``peer``: frames go out in ``put`` order; a broken stream fails the node."""

    def __init__(self, node: PeerNode, peer: int) -> None:
        self.node = node
        self.peer = peer
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        method = node.channel(peer).stream_unary(f"/{SERVICE}/Send")
        # The stream lives as long as the worker: no deadline; heartbeats (liveness.py) detect a dead peer.
        self._future = method.future(self._frames(), metadata=node._metadata)  # no deadline: heartbeats watch it
        self._future.add_done_callback(self._ended)

    def _frames(self) -> Iterator[bytes]:
        while (frame := self._queue.get()) is not None:
            yield frame

    def put(self, frame: bytes | list[wire.Buffer]) -> None:
        for piece in wire.split(frame):
            self._queue.put(piece)

    def finish(self) -> None:
        self._queue.put(None)

    def wait(self, timeout: float) -> None:
        try:
            self._future.result(timeout=timeout)
        except (grpc.RpcError, grpc.FutureTimeoutError, grpc.FutureCancelledError):
            pass

    def _ended(self, future: grpc.Future) -> None:
        if future.cancelled() or future.exception() is None:
            return
        exc = future.exception()
        detail = f"{exc.code().name}: {exc.details()}" if isinstance(exc, grpc.Call) else str(exc)
        self.node.peer_lost(self.peer, f"the stream to it broke ({detail})", BROKEN_CONNECTION_GRACE)


class _Handler(grpc.GenericRpcHandler):
    """Routes ``/mirrorlab.Peer/Send`` to the frame stream and other methods to ``PeerNode.serve``'s handlers."""

    def __init__(self, node: PeerNode) -> None:
        self.node = node

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        name = details.method.rpartition("/")[2]
        if details.method == f"/{SERVICE}/Send":
            return grpc.stream_unary_rpc_method_handler(self._stream)
        handler = self.node._unary.get(name) if details.method.startswith(f"/{SERVICE}/") else None
        if handler is None:
            return None
        return grpc.unary_unary_rpc_method_handler(lambda request, context: self._unary(handler, request, context))

    def _stream(self, frames: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        node, src = self.node, -1
        try:
            src = node.caller_rank(dict(context.invocation_metadata()))
            pieces = wire.Reassembler(node.limits)
            for item in frames:
                frame = pieces.feed(item)
                if frame is not None:
                    node.accept(src, _inline(wire.decode(frame, node.limits)))
        except wire.WireError as exc:
            text = f"{node.label(node.rank)} refused a frame from worker {src}: {exc}"
            log.warning("%s", text)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, text)
        return b""

    def _unary(self, handler: Unary, request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            return handler(request, self.node.caller_rank(dict(context.invocation_metadata())))
        except (wire.WireError, ValueError) as exc:
            log.warning("%s refused a call: %s", self.node.label(self.node.rank), exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return b""  # not reached: abort raises


class _TokenCheck(grpc.ServerInterceptor):
    """Refuses every call without this cluster's token before its handler sees a byte."""

    def __init__(self, node: PeerNode) -> None:
        self.node = node

    def intercept_service(self, continuation: Callable, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        if self.node.token_ok(dict(details.invocation_metadata)):
            return continuation(details)
        node = self.node
        text = (f"{node.label(node.rank)} refused the call: the caller's cluster token (MIRRORLAB_CLUSTER_TOKEN) is "
                "not this cluster's.\nFix: give every worker the same MIRRORLAB_CLUSTER_TOKEN (mirrorlab launch "
                "makes a fresh one for all of them).")
        node.refused.append(str(dict(details.invocation_metadata).get(RANK_KEY, "?")))
        log.warning("%s refused %s: wrong cluster token", node.label(node.rank), details.method)

        def deny(request: object, context: grpc.ServicerContext) -> bytes:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, text)
            return b""

        if details.method.endswith("/Send"):
            return grpc.stream_unary_rpc_method_handler(deny)
        return grpc.unary_unary_rpc_method_handler(deny)


def _inline(frame: wire.Frame) -> wire.Frame:
    """``frame``, refused when it says its payload follows elsewhere: only a data lane carries such frames."""
    if frame.layout is not None:
        raise wire.WireError("a data-lane frame (payload elsewhere) arrived on the gRPC stream")
    return frame


def _bind_address(address: str, bind_host: str | None) -> str:
    """This task's cluster address, or the same port on ``bind_host``."""
    if bind_host is None:
        return address
    port = address.rpartition(":")[2]
    return f"[{bind_host}]:{port}" if ":" in bind_host else f"{bind_host}:{port}"


class GrpcTransport(Transport):
    """Rank ``node.rank`` of collective group ``group`` (the k-th strategy each worker created)."""

    def __init__(self, node: PeerNode, group: int) -> None:
        self.node = node
        self.group = group
        self.rank = node.rank
        self.size = node.size

    def now(self) -> float:
        return time.monotonic()

    @property
    def abort_error(self) -> errors.OpError | None:
        return self.node.abort_error(self.group)

    def send(self, dst: int, message: Message) -> None:
        self.node.send_message(dst, self.group, message)

    def recv(self, src: int, deadline: float | None) -> Message:
        return self.node.recv(self.group, src, deadline)

    def abort(self, error: errors.OpError) -> None:
        self.node.abort(self.group, error)
