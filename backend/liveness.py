"""Heartbeats: each worker pings every peer; a peer that has not answered for ``timeout`` seconds (killed,
hung or unreachable) makes this worker's collectives fail with ``UnavailableError`` naming it.

A ping's reply carries where the peer is: a sentence for error messages, and per collective group the collective it
last completed and the one it is in (``progress``), so a worker whose collective fails can say who never entered it.
``probe`` pings every peer once more, at the moment of a failure, to tell alive from exited from silent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

from mirrorlab.diagnostics.live_hang import Liveness

from .grpc_transport import PeerNode

__all__ = ["Heartbeats", "PeerAnswer"]

PeerAnswer = tuple[Liveness, dict, str]
"""What ``probe`` learned of a peer: its liveness, its ``progress`` (this answer's, else the last heartbeat's; {} when
none) and how that was learned."""


class Heartbeats:
    """Serves Ping on ``node`` (register before ``node.start()``); ``start`` begins pinging every peer.

    ``local_state()`` describes where this worker is (e.g. "in all_reduce(SUM) float32[4] #3 at train.py:9");
    ``progress()`` says it per collective group as JSON-able data (``BackendEnvironment.progress``)."""

    def __init__(self, node: PeerNode, timeout: float, local_state: Callable[[], str],
                 progress: Callable[[], dict] = dict) -> None:
        self.node = node
        self.timeout = timeout
        self.interval = max(0.05, timeout / 5)
        self.local_state = local_state
        self.progress = progress
        self.reports: dict[int, dict] = {}  # each peer's last reported progress
        self._stop = threading.Event()
        node.serve("Ping", self._answer)

    def _answer(self, request: bytes, caller: int) -> bytes:
        return json.dumps({"state": self.local_state(), "progress": self.progress()}).encode("utf-8")

    def start(self) -> None:
        for peer in range(self.node.size):
            if peer != self.node.rank:
                threading.Thread(target=self._watch, args=(peer,), name=f"mirrorlab-heartbeat-{peer}",
                                 daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _ping(self, peer: int, timeout: float) -> dict:
        """One Ping of ``peer``: its reply, after filing its state and progress; raises as gRPC and json do."""
        reply = json.loads(self.node.call(peer, "Ping", b"", timeout=timeout).decode("utf-8"))
        if not isinstance(reply, dict):
            raise ValueError("a Ping reply is not a JSON object")
        self.node.peer_state[peer] = str(reply.get("state", "unknown"))
        if isinstance(reply.get("progress"), dict):
            self.reports[peer] = reply["progress"]
        return reply

    def _watch(self, peer: int) -> None:
        node, last_ok = self.node, time.monotonic()
        while not self._stop.is_set() and peer not in node.departed:
            started = time.monotonic()
            try:
                self._ping(peer, self.interval)
                last_ok = time.monotonic()
            except (grpc.RpcError, ValueError):
                if time.monotonic() - last_ok > self.timeout and peer not in node.departed:
                    node.peer_lost(peer, f"it has not answered heartbeats for {self.timeout:g} s")
                    return
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def probe(self, timeout: float) -> dict[int, PeerAnswer]:
        """Ping every peer at once, each within ``timeout`` seconds: what each one is now."""
        peers = [p for p in range(self.node.size) if p != self.node.rank]
        with ThreadPoolExecutor(max_workers=max(1, len(peers)), thread_name_prefix="mirrorlab-probe") as pool:
            return dict(zip(peers, pool.map(lambda p: self._probe_one(p, timeout), peers)))

    def _probe_one(self, peer: int, timeout: float) -> PeerAnswer:
        if peer in self.node.departed:
            return Liveness.FINISHED, self.reports.get(peer, {}), "it said goodbye"
        started = time.monotonic()
        try:
            self._ping(peer, timeout)
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else None
            liveness = Liveness.GONE if code is grpc.StatusCode.UNAVAILABLE else Liveness.SILENT
            name = code.name if code is not None else type(err).__name__
            return liveness, self.reports.get(peer, {}), f"ping: {name} after {time.monotonic() - started:.2f} s; " \
                                                         "position from its last heartbeat"
        except ValueError:
            return Liveness.SILENT, self.reports.get(peer, {}), "its Ping reply is not mirrorlab's"
        return Liveness.ALIVE, self.reports.get(peer, {}), f"answered a ping in {time.monotonic() - started:.3f} s"
