"""gRPC keepalive for every channel and server of the backend, from one place, so both ends agree.

Clients ping a connection every ``time_s``, even between calls, and close it when a ping is not answered within
``timeout_s``; gRPC also sets TCP_USER_TIMEOUT to ``timeout_s``, so data unacknowledged that long breaks a busy
connection too. ``timeout_s`` defaults to 1.5 heartbeat timeouts: neither gRPC nor TCP gives up on a peer before the
heartbeat does (it names the peer and where it was), so a network stall shorter than the heartbeat timeout passes (a
0.6 s keepalive timeout under a 3 s heartbeat broke both workers' streams during a 1 s stall: the real "clog"
scenario). Servers accept pings down to ``SERVER_MIN_PING_INTERVAL_S`` apart (gRPC's default is 5 minutes: faster
pings earn "strikes" and a GOAWAY "too_many_pings" that breaks every open stream), whatever the peer's own settings,
so workers with different keepalive values still never cut each other off.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Keepalive", "SERVER_MIN_PING_INTERVAL_S", "KEEPALIVE_TIME_SHARE", "KEEPALIVE_TIMEOUT_SHARE"]

SERVER_MIN_PING_INTERVAL_S = 0.5
"""The shortest interval between a client's pings that every mirrorlab server accepts."""
KEEPALIVE_TIME_SHARE = 0.4
"""The default ping interval, as a share of the heartbeat timeout."""
KEEPALIVE_TIMEOUT_SHARE = 1.5
"""The default wait for a ping's answer (and TCP_USER_TIMEOUT), as a share of the heartbeat timeout."""


@dataclass(frozen=True)
class Keepalive:
    """Ping an idle connection every ``time_s`` seconds; close it when an answer takes over ``timeout_s``."""

    time_s: float
    timeout_s: float

    @staticmethod
    def for_heartbeat(heartbeat_s: float) -> "Keepalive":
        """The defaults for a heartbeat timeout: a ping every 0.4 of it (never faster than the servers accept, so
        below a 1.25 s heartbeat that share is larger), and 1.5 times the heartbeat to answer, so the heartbeat,
        which checks every fifth of its timeout, always gives up first."""
        return Keepalive(max(SERVER_MIN_PING_INTERVAL_S, heartbeat_s * KEEPALIVE_TIME_SHARE),
                         heartbeat_s * KEEPALIVE_TIMEOUT_SHARE)

    def client_options(self) -> list[tuple[str, int]]:
        """Channel arguments for every client channel: ping even between calls, and never stop pinging."""
        return [("grpc.keepalive_time_ms", _ms(self.time_s)), ("grpc.keepalive_timeout_ms", _ms(self.timeout_s)),
                ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)]

    def server_options(self) -> list[tuple[str, int]]:
        """Server arguments: accept the clients' pings (no GOAWAY "too_many_pings"), and ping idle clients too."""
        floor = _ms(SERVER_MIN_PING_INTERVAL_S)
        return [("grpc.http2.min_ping_interval_without_data_ms", floor),
                ("grpc.http2.min_time_between_pings_ms", floor),
                ("grpc.keepalive_permit_without_calls", 1), ("grpc.keepalive_time_ms", _ms(self.time_s)),
                ("grpc.keepalive_timeout_ms", _ms(self.timeout_s))]


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))
