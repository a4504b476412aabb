"""The backend's knobs, read from environment variables so that ``mirrorlab launch``, a Kubernetes TFJob and
a hand-started worker all configure it the same way."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .keepalive import SERVER_MIN_PING_INTERVAL_S, Keepalive
from .tls import TlsFiles

__all__ = ["BackendSettings", "TOKEN_VAR", "RENDEZVOUS_VAR", "HEARTBEAT_VAR", "BIND_VAR", "DEVICES_VAR",
           "KEEPALIVE_TIME_VAR", "KEEPALIVE_TIMEOUT_VAR", "FINGERPRINT_VAR", "RENDEZVOUS_DEFAULT_S",
           "HEARTBEAT_DEFAULT_S", "DEFAULT_KEEPALIVE", "seconds_setting", "keepalive_setting", "fingerprint",
           "DATA_LANE_VAR", "DATA_LANE_PORT_VAR", "DATA_LANE_CONNECT_VAR", "DATA_LANE_CONNECT_DEFAULT_S",
           "data_lane_setting", "port_setting"]

TOKEN_VAR = "MIRRORLAB_CLUSTER_TOKEN"
RENDEZVOUS_VAR = "MIRRORLAB_RENDEZVOUS_TIMEOUT"
HEARTBEAT_VAR = "MIRRORLAB_HEARTBEAT_TIMEOUT"
RENDEZVOUS_DEFAULT_S = 60.0
HEARTBEAT_DEFAULT_S = 5.0
KEEPALIVE_TIME_VAR = "MIRRORLAB_KEEPALIVE_TIME"  # default: 0.4 x the heartbeat timeout (backend/keepalive.py)
KEEPALIVE_TIMEOUT_VAR = "MIRRORLAB_KEEPALIVE_TIMEOUT"  # default: 1.5 x the heartbeat timeout
DEFAULT_KEEPALIVE = Keepalive.for_heartbeat(HEARTBEAT_DEFAULT_S)
BIND_VAR = "MIRRORLAB_BIND_ADDRESS"
DEVICES_VAR = "MIRRORLAB_DEVICES_PER_WORKER"
FINGERPRINT_VAR = "MIRRORLAB_FINGERPRINT"
DATA_LANE_VAR = "MIRRORLAB_DATA_LANE"  # the gRPC path's messages on TCP data lanes: auto (without TLS), on, off
_DATA_LANE_MODES = ("auto", "on", "off")
DATA_LANE_PORT_VAR = "MIRRORLAB_DATA_LANE_PORT"  # the lane's listening port (a firewall opens it); 0: any free port
DATA_LANE_CONNECT_VAR = "MIRRORLAB_DATA_LANE_CONNECT_TIMEOUT"  # seconds a lane connect may take, then that pair uses gRPC
DATA_LANE_CONNECT_DEFAULT_S = 10.0


@dataclass(frozen=True)
class BackendSettings:
    """Cluster token, rendezvous window and heartbeat timeout (seconds), an optional bind host that replaces
    the host of this task's cluster address (e.g. ``0.0.0.0`` inside a container), optional TLS files, the
    gRPC keepalive of every channel and server, and whether the gRPC path moves messages over TCP data lanes
    (``data_lane.py``; ``uses_data_lanes``), on which port, and how long a lane connect may take (a firewall that
    drops the lane port costs start-up this long once, then those pairs stay on gRPC)."""

    token: str
    rendezvous_timeout: float = 60.0
    heartbeat_timeout: float = 5.0
    bind_host: str | None = None
    tls: TlsFiles | None = None
    keepalive: Keepalive = DEFAULT_KEEPALIVE
    data_lane: str = "auto"
    data_lane_port: int = 0
    data_lane_connect_timeout: float = DATA_LANE_CONNECT_DEFAULT_S

    @property
    def uses_data_lanes(self) -> bool:
        """Whether the gRPC path moves its messages over TCP data lanes (``data_lane`` and TLS decide)."""
        return self.data_lane == "on" or (self.data_lane == "auto" and self.tls is None)

    @staticmethod
    def from_environ(environ: Mapping[str, str] = os.environ) -> "BackendSettings":
        """Settings from ``environ``; a missing token or a malformed number names the variable and the fix."""
        token = environ.get(TOKEN_VAR, "")
        if not token:
            raise ValueError(f"{TOKEN_VAR} is not set: every worker of a real cluster must hold the same secret "
                             "cluster token. Fix: start the workers with `mirrorlab launch` (it makes one), or set "
                             f"{TOKEN_VAR} to the same random string on every worker.")
        heartbeat = seconds_setting(environ, HEARTBEAT_VAR, HEARTBEAT_DEFAULT_S)
        keepalive = keepalive_setting(environ, heartbeat)
        if keepalive.time_s < SERVER_MIN_PING_INTERVAL_S:
            raise ValueError(f"{KEEPALIVE_TIME_VAR}={keepalive.time_s:g} pings more often than mirrorlab's servers "
                             f"accept ({SERVER_MIN_PING_INTERVAL_S:g} s): they would close the connection with GOAWAY "
                             f"'too_many_pings'. Fix: set {KEEPALIVE_TIME_VAR} to at least "
                             f"{SERVER_MIN_PING_INTERVAL_S:g}, or unset it (the default is 0.4 x {HEARTBEAT_VAR}).")
        return BackendSettings(token, seconds_setting(environ, RENDEZVOUS_VAR, RENDEZVOUS_DEFAULT_S), heartbeat,
                               environ.get(BIND_VAR) or None, TlsFiles.from_environ(environ), keepalive,
                               data_lane_setting(environ), port_setting(environ, DATA_LANE_PORT_VAR),
                               seconds_setting(environ, DATA_LANE_CONNECT_VAR, DATA_LANE_CONNECT_DEFAULT_S))


def seconds_setting(environ: Mapping[str, str], name: str, default: float) -> float:
    """The finite, positive seconds the variable ``name`` sets (``default`` when unset); ValueError naming it."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{name}={raw!r} is not a positive number of seconds. Fix: e.g. {name}={default:g}.")
    return value


def keepalive_setting(environ: Mapping[str, str], heartbeat_s: float) -> Keepalive:
    """The keepalive ``environ`` sets (each value defaults to its share of ``heartbeat_s``); ValueError naming it."""
    default = Keepalive.for_heartbeat(heartbeat_s)
    return Keepalive(seconds_setting(environ, KEEPALIVE_TIME_VAR, default.time_s),
                     seconds_setting(environ, KEEPALIVE_TIMEOUT_VAR, default.timeout_s))


def data_lane_setting(environ: Mapping[str, str]) -> str:
    """``MIRRORLAB_DATA_LANE``: ``auto`` (the default: lanes unless TLS is on, where they measured no faster than
    gRPC), ``on`` (lanes, inside mutual TLS when it is on) or ``off``; ValueError naming the variable."""
    mode = environ.get(DATA_LANE_VAR, "") or "auto"
    if mode not in _DATA_LANE_MODES:
        raise ValueError(f"{DATA_LANE_VAR}={mode!r} is not one of {', '.join(_DATA_LANE_MODES)}. Fix: e.g. "
                         f"{DATA_LANE_VAR}=off to send every message over gRPC.")
    return mode


def port_setting(environ: Mapping[str, str], name: str) -> int:
    """The TCP port the variable ``name`` sets, 0 (any free port) when unset; ValueError naming it."""
    raw = environ.get(name, "") or "0"
    if not raw.isdigit() or int(raw) > 65535:
        raise ValueError(f"{name}={raw!r} is not a TCP port (0-65535). Fix: e.g. {name}=7000, a port your "
                         "firewall lets through, or unset it for any free port.")
    return int(raw)


def devices_per_worker(environ: Mapping[str, str] = os.environ) -> int | None:
    """The CPU devices per worker set by ``mirrorlab launch --devices-per-worker`` (None when unset)."""
    raw = environ.get(DEVICES_VAR)
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{DEVICES_VAR}={raw!r} is not a positive integer. Fix: e.g. {DEVICES_VAR}=2.")
    return int(raw)


def fingerprint(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Entries every worker must agree on besides the rendezvous' own facts (an image tag, a library version),
    from ``MIRRORLAB_FINGERPRINT``: a JSON object of strings, e.g. ``{"tensorflow": "2.21.0"}``; {} when unset."""
    raw = environ.get(FINGERPRINT_VAR, "")
    if not raw.strip():
        return {}
    try:
        entries = json.loads(raw)
    except ValueError:
        entries = None
    if not isinstance(entries, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items()):
        raise ValueError(f"{FINGERPRINT_VAR}={raw!r} is not a JSON object of strings. Fix: e.g. "
                         f"{FINGERPRINT_VAR}='{{\"tensorflow\": \"2.21.0\"}}'.")
    return entries
