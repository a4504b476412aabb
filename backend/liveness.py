"""Heartbeats: each worker pings every peer; a peer that has not answered for ``timeout`` seconds (killed,
hung or unreachable) makes this worker's collectives fail with ``UnavailableError`` naming it.

A ping's reply carries the collective the peer is in, so the error can say where the lost peer last was.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import grpc

from .grpc_transport import PeerNode

__all__ = ["Heartbeats"]


class Heartbeats:
    """Serves Ping on ``node`` (register before ``node.start()``); ``start`` begins pinging every peer.

    ``local_state()`` describes where this worker is (e.g. "in all_reduce(SUM) float32[4] #3 at train.py:9")."""

    def __init__(self, node: PeerNode, timeout: float, local_state: Callable[[], str]) -> None:
        self.node = node
        self.timeout = timeout
        self.interval = max(0.05, timeout / 5)
        self.local_state = local_state
        self._stop = threading.Event()
        node.serve("Ping", self._answer)

    def _answer(self, request: bytes, caller: int) -> bytes:
        return json.dumps({"state": self.local_state()}).encode("utf-8")

    def start(self) -> None:
        for peer in range(self.node.size):
            if peer != self.node.rank:
                threading.Thread(target=self._watch, args=(peer,), name=f"mirrorlab-heartbeat-{peer}",
                                 daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self, peer: int) -> None:
        node, last_ok = self.node, time.monotonic()
        while not self._stop.is_set() and peer not in node.departed:
            started = time.monotonic()
            try:
                reply = json.loads(node.call(peer, "Ping", b"", timeout=self.interval).decode("utf-8"))
                node.peer_state[peer] = str(reply.get("state", "unknown"))
                last_ok = time.monotonic()
            except (grpc.RpcError, ValueError):
                if time.monotonic() - last_ok > self.timeout and peer not in node.departed:
                    node.peer_lost(peer, f"it has not answered heartbeats for {self.timeout:g} s")
                    return
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
