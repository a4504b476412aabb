"""Probes one peer's address in order DNS -> TCP connect -> gRPC health check -> fingerprint, and says where it stops.

Every stage has a deadline, so a silently dropping firewall shows up as ``filtered`` after ``timeout_s`` instead
of a hang. "Peer not up yet" (refused, not in DNS yet, or bound but not serving yet) is retried inside the ``wait_s``
gang window; a peer that is filtered or unreachable fails fast.
"""

from __future__ import annotations

import errno
import json
import socket
import threading
import time
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mirrorlab.diagnostics.address_checks import HostPort, is_loopback, split_address
from mirrorlab.diagnostics.fingerprint import is_fingerprint
from mirrorlab.diagnostics.link_probe import time_transfers
from mirrorlab.diagnostics.preflight_server import FINGERPRINT_METHOD, MAX_MESSAGE_BYTES, PREFLIGHT_SERVICE

__all__ = ["Reach", "PeerProbe", "Resolver", "probe_peer", "grpc_target", "resolves_to_loopback", "resolve_host",
           "tcp_reach"]

#: ``socket.getaddrinfo``'s signature, replaceable in tests so no real DNS server is ever asked.
Resolver = Callable[..., list]

_RETRY_INTERVAL_S = 0.2
_UNREACHABLE_ERRNOS = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}


class Reach(str, Enum):
    """How far a probe got: ``ok`` or the first stage that failed, named for its cause."""

    OK = "ok"
    MALFORMED = "malformed"  # the address cannot be probed at all
    UNRESOLVABLE = "unresolvable"  # DNS has no address for the host
    REFUSED = "refused"  # the host answered: nothing listens on the port
    FILTERED = "filtered"  # no answer at all before the deadline: packets silently dropped
    UNREACHABLE = "unreachable"  # no route to the host
    WRONG_SERVICE = "wrong service"  # TCP connects, but no mirrorlab preflight answers there


@dataclass(frozen=True)
class PeerProbe:
    """The result of probing ``peer`` (a task label) at ``address``."""

    peer: str
    address: str
    status: Reach
    detail: str = ""
    resolved: tuple[str, ...] = ()
    connect_s: float | None = None
    fingerprint: dict[str, Any] | None = None
    attempts: int = 1
    samples: tuple[tuple[int, float], ...] = ()  # timed transfers, (bytes, seconds)
    clock_skew_s: float | None = None  # the peer's wall clock minus this host's, give or take skew_error_s
    skew_error_s: float | None = None


#: Failures a peer that is still starting shows (not listening, not in DNS, port bound but not serving yet):
#: retried inside the gang window. Filtered and unreachable peers fail fast.
_NOT_UP_YET = (Reach.REFUSED, Reach.UNRESOLVABLE, Reach.WRONG_SERVICE)


def grpc_target(host_port: HostPort) -> str:
    """``host:port`` for a gRPC channel (IPv6 hosts in brackets)."""
    return f"[{host_port.host}]:{host_port.port}" if ":" in host_port.host else f"{host_port.host}:{host_port.port}"


def probe_peer(peer: str, address: str, *, timeout_s: float = 2.0, wait_s: float = 0.0,
               resolve: Resolver = socket.getaddrinfo, bulk_bytes: int = 0) -> PeerProbe:
    """Probes ``address``; retries a refused or unresolvable peer until ``wait_s`` has passed (the gang window).
    A peer that answers is then timed: small messages, and ``bulk_bytes`` in bulk."""
    host_port, _ = split_address(address)
    if host_port is None:
        return PeerProbe(peer, address, Reach.MALFORMED, "the address is not host:port (see the ML-CFG findings)")
    give_up = time.monotonic() + wait_s
    attempts = 0
    while True:
        attempts += 1
        result = _probe_once(peer, address, host_port, timeout_s, resolve, bulk_bytes)
        remaining = give_up - time.monotonic()
        if result.status not in _NOT_UP_YET or remaining <= 0:
            return replace(result, attempts=attempts)
        time.sleep(min(_RETRY_INTERVAL_S, remaining))


def _probe_once(peer: str, address: str, host_port: HostPort, timeout_s: float, resolve: Resolver,
                bulk_bytes: int) -> PeerProbe:
    resolved, problem = resolve_host(host_port, timeout_s, resolve)
    if problem is not None:
        return PeerProbe(peer, address, Reach.UNRESOLVABLE, problem)
    status, detail, connect_s = tcp_reach(resolved[0], host_port.port, timeout_s)
    probe = PeerProbe(peer, address, status, detail, tuple(resolved), connect_s)
    if status is not Reach.OK:
        return probe
    return _handshake(probe, grpc_target(host_port), timeout_s, bulk_bytes)


def resolve_host(host_port: HostPort, timeout_s: float, resolve: Resolver) -> tuple[list[str], str | None]:
    """The host's addresses, or why there are none; bounded by ``timeout_s`` (a resolver can block for long)."""
    outcome: dict[str, Any] = {}

    def lookup() -> None:
        try:
            infos = resolve(host_port.host, host_port.port, type=socket.SOCK_STREAM)
            outcome["addresses"] = list(dict.fromkeys(str(info[4][0]) for info in infos))
        except (OSError, UnicodeError) as err:
            outcome["error"] = f"{type(err).__name__}: {err}"

    thread = threading.Thread(target=lookup, name=f"resolve {host_port.host}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return [], f"DNS gave no answer for {host_port.host!r} within {timeout_s:g} s"
    if "error" in outcome:
        return [], f"cannot resolve {host_port.host!r}: {outcome['error']}"
    if not outcome["addresses"]:
        return [], f"{host_port.host!r} resolves to no address"
    return outcome["addresses"], None


def tcp_reach(ip: str, port: int, timeout_s: float) -> tuple[Reach, str, float | None]:
    """One TCP connect to ``ip:port``, classified, with the seconds it took when it connected."""
    started = time.monotonic()
    try:
        with socket.create_connection((ip, port), timeout=timeout_s):
            return Reach.OK, "", time.monotonic() - started
    except ConnectionRefusedError:
        return Reach.REFUSED, f"connection to {ip}:{port} refused: nothing listens there", None
    except (socket.timeout, TimeoutError):
        return Reach.FILTERED, f"no answer from {ip}:{port} within {timeout_s:g} s: packets are dropped", None
    except OSError as err:
        if err.errno in _UNREACHABLE_ERRNOS:
            return Reach.UNREACHABLE, f"no route to {ip}:{port}: {err.strerror}", None
        return Reach.UNREACHABLE, f"connecting to {ip}:{port} failed: {err}", None


def _handshake(probe: PeerProbe, target: str, timeout_s: float, bulk_bytes: int) -> PeerProbe:
    """The gRPC health check for the preflight service, the fingerprint exchange, then the timed transfers."""
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.enable_retries", 0)]
    with grpc.insecure_channel(target, options=options) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=PREFLIGHT_SERVICE), timeout=timeout_s)
        except grpc.RpcError as err:
            return replace(probe, status=Reach.WRONG_SERVICE, detail=_wrong_service(err))
        if answer.status != health_pb2.HealthCheckResponse.SERVING:
            return replace(probe, status=Reach.WRONG_SERVICE, detail="the preflight service reports "
                           f"{health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)}")
        try:
            sent = time.time()
            payload = channel.unary_unary(FINGERPRINT_METHOD)(b"", timeout=timeout_s)
            received = time.time()
            fingerprint = json.loads(payload)
        except (grpc.RpcError, ValueError) as err:
            return replace(probe, detail=f"health check ok, but no fingerprint: {err}")
        if not is_fingerprint(fingerprint):
            return replace(probe, detail="health check ok, but the fingerprint is malformed")
        try:
            samples = tuple(time_transfers(channel, timeout_s, bulk_bytes))
        except grpc.RpcError as err:
            return replace(probe, fingerprint=fingerprint, detail=f"fingerprint ok, but the timed transfers failed: "
                           f"{err.code().name if hasattr(err, 'code') else err}")
    return replace(probe, fingerprint=fingerprint, samples=samples, **_skew(fingerprint, sent, received))


def _skew(fingerprint: dict[str, Any], sent: float, received: float) -> dict[str, float]:
    """The peer's clock minus ours, from its ``served_at`` against the midpoint of our call (error: half the call)."""
    served_at = fingerprint.get("served_at")
    if not isinstance(served_at, (int, float)) or isinstance(served_at, bool):
        return {}
    return {"clock_skew_s": float(served_at) - (sent + received) / 2, "skew_error_s": (received - sent) / 2}


def _wrong_service(err: grpc.RpcError) -> str:
    code = err.code() if hasattr(err, "code") else None
    if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND):
        return f"a gRPC server answers but not mirrorlab preflight ({code.name})"
    name = code.name if code is not None else "no status"
    return f"TCP connects but no gRPC health answer ({name}): another program holds this port?"


def resolves_to_loopback(probe: PeerProbe) -> bool:
    """Whether a peer named by a non-loopback host resolved to loopback addresses only (so it is this machine)."""
    host_port, _ = split_address(probe.address)
    return (host_port is not None and not is_loopback(host_port.host) and bool(probe.resolved)
            and all(is_loopback(ip) for ip in probe.resolved))
