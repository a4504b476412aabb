"""The probe each worker serves during ``mirrorlab preflight``: gRPC health checking plus its fingerprint.

It listens on the task's own TF_CONFIG address, so a peer that reaches it has proven the very host, port and
protocol training will use. The fingerprint travels as JSON bytes (never pickle), capped in size.
"""

from __future__ import annotations

import json
import time
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

__all__ = ["PREFLIGHT_SERVICE", "FINGERPRINT_METHOD", "SINK_METHOD", "MAX_MESSAGE_BYTES", "ProbeServer"]

#: The health-checked service name a peer asks for; anything else answering on the port is the wrong service.
PREFLIGHT_SERVICE = "mirrorlab.Preflight"
#: Full method name of the fingerprint exchange (request: empty bytes; response: fingerprint JSON bytes, with
#: ``served_at``, the server's wall clock when it answered, for the clock-skew estimate).
FINGERPRINT_METHOD = f"/{PREFLIGHT_SERVICE}/Fingerprint"
#: Full method name of the timed transfers (request: any bytes up to the limit; response: empty bytes).
SINK_METHOD = f"/{PREFLIGHT_SERVICE}/Sink"
#: The largest message the probe sends or accepts.
MAX_MESSAGE_BYTES = 1 << 20

_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES), ("grpc.so_reuseport", 0)]


class ProbeServer:
    """A gRPC server on ``address`` answering health checks for ``PREFLIGHT_SERVICE``, returning ``fingerprint`` and
    swallowing the timed transfers."""

    def __init__(self, address: str, fingerprint: dict[str, Any]) -> None:
        payload = json.dumps({**fingerprint, "served_at": time.time()}).encode()
        if len(payload) > MAX_MESSAGE_BYTES:
            raise ValueError(f"the fingerprint is {len(payload)} bytes, over the {MAX_MESSAGE_BYTES}-byte probe limit")
        self.address = address
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_OPTIONS)
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        handlers = {"Fingerprint": grpc.unary_unary_rpc_method_handler(
                        lambda request, context: json.dumps({**fingerprint, "served_at": time.time()}).encode()),
                    "Sink": grpc.unary_unary_rpc_method_handler(lambda request, context: b"")}
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(PREFLIGHT_SERVICE, handlers),))
        self.port = self._server.add_insecure_port(address)  # raises RuntimeError when it cannot bind

    def start(self) -> "ProbeServer":
        """Starts serving and reports ``PREFLIGHT_SERVICE`` as SERVING."""
        self._server.start()
        self._health.set(PREFLIGHT_SERVICE, health_pb2.HealthCheckResponse.SERVING)
        return self

    def stop(self, grace_s: float = 0.5) -> None:
        """Stops serving; returns once the server is down (at most ``grace_s`` later)."""
        self._health.enter_graceful_shutdown()
        self._server.stop(grace_s).wait(grace_s + 1.0)

    def __enter__(self) -> "ProbeServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
