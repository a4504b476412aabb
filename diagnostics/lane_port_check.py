"""Preflight's check of the real backend's data-lane port between hosts.

Across hosts the gRPC path sends every collective's tensors on TCP data lanes (``backend/data_lane.py``), on a
second port per worker. A firewall that lets the gRPC port through but drops that one does not stop training: each
such pair falls back to gRPC after a connect timeout, and runs slower. So preflight, when every worker fixes the
lane port (``MIRRORLAB_DATA_LANE_PORT``, the set-up a firewall needs), listens on it too and connects to every
peer's; when the port is left to the kernel, it says that a firewall between the hosts will drop it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping

from mirrorlab.backend.settings import (DATA_LANE_CONNECT_VAR, DATA_LANE_PORT_VAR, DATA_LANE_VAR, data_lane_setting,
                                        port_setting)
from mirrorlab.backend.tls import TLS_VARS
from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.preflight_probe import Reach, tcp_reach

__all__ = ["LANE_PORT_BLOCKED", "LANE_PORT_UNSET", "LANE_SETTING_INVALID", "LaneListener", "lane_port",
           "lane_port_finding", "lane_setup_findings"]

LANE_PORT_BLOCKED = register_code("ML-NET-015", "a peer's data-lane port cannot be reached: that pair's tensors "
                                                "fall back to gRPC")
LANE_PORT_UNSET = register_code("ML-NET-016", "data lanes between hosts listen on a port the kernel picks")
LANE_SETTING_INVALID = register_code("ML-NET-017", "a data-lane setting is malformed: the real backend would not start")

_RETRY_INTERVAL_S = 0.2


def lane_port(environ: Mapping[str, str]) -> int | None:
    """The data-lane port the real backend would use here: the fixed port, 0 (the kernel's pick), or None when the
    gRPC path would send no data lanes (``MIRRORLAB_DATA_LANE=off``, or ``auto`` under TLS). A malformed setting
    raises the backend's own ValueError naming the variable."""
    mode = data_lane_setting(environ)
    if mode == "off" or (mode == "auto" and any(environ.get(name) for name in TLS_VARS)):
        return None
    return port_setting(environ, DATA_LANE_PORT_VAR)


class LaneListener:
    """A plain TCP listener on this task's host and the lane port, closing every connection it accepts: what a
    peer's probe must reach, as the backend's lane listener (which binds the same host) will be."""

    def __init__(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family, backlog=64)
        self._thread = threading.Thread(target=self._accept, name="mirrorlab-preflight-lane", daemon=True)

    def start(self) -> "LaneListener":
        self._thread.start()
        return self

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return  # closed by stop()
            conn.close()

    def stop(self) -> None:
        self._socket.close()
        self._thread.join(1.0)


def lane_setup_findings(own: str, environ: Mapping[str, str]) -> tuple[int | None, list[Finding]]:
    """The lane port to check between hosts (None: none to check) and what the settings alone say: ML-NET-017 for a
    malformed one, ML-NET-016 when the kernel would pick the port."""
    try:
        port = lane_port(environ)
    except ValueError as err:
        return None, [Finding(LANE_SETTING_INVALID, Severity.ERROR, (own,), f"{own}'s data-lane settings are "
                              "malformed: the real backend would refuse to start", f"ValueError: {err}",
                              str(err).split("Fix: ", 1)[-1])]
    if port == 0:
        return None, [Finding(LANE_PORT_UNSET, Severity.INFO, (own,), f"{own}'s data lanes would listen on a port "
                              f"the kernel picks ({DATA_LANE_PORT_VAR} is unset)",
                              f"the workers are on several hosts and {DATA_LANE_VAR} is not off",
                              f"If a firewall sits between the hosts, set {DATA_LANE_PORT_VAR} to the same free port on "
                              "every worker and open it next to the gRPC port (then preflight checks it): a dropped "
                              f"lane port costs start-up {DATA_LANE_CONNECT_VAR} (10 s) and leaves that pair on "
                              f"gRPC, slower. Or set {DATA_LANE_VAR}=off.")]
    return port, []


def lane_port_finding(own: str, peer: str, ip: str, port: int, timeout_s: float, wait_s: float) -> Finding | None:
    """ML-NET-015 when ``peer``'s host (``ip``, as its gRPC probe resolved it) does not accept a connection on
    ``port`` within ``timeout_s`` (a refused one is retried until ``wait_s`` has passed: its preflight may start
    later)."""
    give_up = time.monotonic() + wait_s
    while True:
        status, detail, _ = tcp_reach(ip, port, timeout_s)
        if status is not Reach.REFUSED or time.monotonic() >= give_up:
            break
        time.sleep(_RETRY_INTERVAL_S)
    if status is Reach.OK:
        return None
    fix = (f"Run {peer}'s preflight with {DATA_LANE_PORT_VAR}={port} too (every worker uses the same setting)."
           if status is Reach.REFUSED else
           f"Open TCP port {port} on {peer}'s host to this host, next to its gRPC port (firewall, security group or "
           f"Kubernetes NetworkPolicy), or set {DATA_LANE_VAR}=off.")
    return Finding(LANE_PORT_BLOCKED, Severity.WARNING, (own, peer),
                   f"{own} -> {peer}: data-lane port {port} {status.value}; training would still run, that pair's "
                   f"tensors on gRPC (slower), after {DATA_LANE_CONNECT_VAR} at start-up", detail, fix)
