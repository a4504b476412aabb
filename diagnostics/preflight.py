"""``mirrorlab preflight`` for one task: check its TF_CONFIG, serve its own probe, probe every peer, compare
environments, and turn all of it into findings.

The pairs probed are this task to every other chief/worker task (a full mesh once every task has run
preflight): a collective may use any pair. The whole run is bounded: ``wait_s`` for peers to come up, a
``timeout_s`` per stage (DNS, connect, health check, fingerprint, timed transfers: five per peer, up to 16 peers at
once), and ``linger_s`` to keep answering slower peers.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from mirrorlab.backend.settings import DATA_LANE_PORT_VAR
from mirrorlab.diagnostics.address_checks import is_loopback, split_address
from mirrorlab.diagnostics.environment_checks import compare_fingerprints
from mirrorlab.diagnostics.findings import EXIT_INVALID_CONFIG, Finding, Severity, exit_code, register_code
from mirrorlab.diagnostics.fingerprint import collect_fingerprint
from mirrorlab.diagnostics.lane_port_check import (LANE_SETTING_INVALID, LaneListener, lane_port_finding,
                                                   lane_setup_findings)
from mirrorlab.diagnostics.link_report import fit_links, link_findings
from mirrorlab.diagnostics.liveness_lint import check_timeouts, compare_liveness
from mirrorlab.diagnostics.preflight_probe import (PeerProbe, Reach, Resolver, probe_peer, resolve_host,
                                                   resolves_to_loopback)
from mirrorlab.diagnostics.preflight_server import ProbeServer
from mirrorlab.diagnostics.reachability import cut_pair_findings, reachability_graph
from mirrorlab.diagnostics.tf_config_lint import check_tf_config
from mirrorlab.diagnostics.tf_config_parse import parse_tf_config
from mirrorlab.diagnostics.tf_config_view import read_view, task_label

__all__ = ["REFUSED", "FILTERED", "UNRESOLVABLE", "UNREACHABLE", "WRONG_SERVICE", "NAME_IS_LOOPBACK", "CANNOT_SERVE",
           "REACHABILITY", "CLOCK_SKEW", "PreflightReport", "preflight", "run_preflight", "probe_findings"]

REFUSED = register_code("ML-NET-001", "a peer refuses connections: nothing listens on its port")
FILTERED = register_code("ML-NET-002", "a peer never answers: packets are silently dropped (a firewall)")
UNRESOLVABLE = register_code("ML-NET-003", "a peer's host name does not resolve")
UNREACHABLE = register_code("ML-NET-004", "there is no route to a peer")
WRONG_SERVICE = register_code("ML-NET-005", "something other than mirrorlab preflight answers on a peer's port")
NAME_IS_LOOPBACK = register_code("ML-NET-006", "a peer's host name resolves to loopback on this host")
CANNOT_SERVE = register_code("ML-NET-007", "this task cannot listen on its own TF_CONFIG address")
REACHABILITY = register_code("ML-NET-008", "which peers this task reached")
CLOCK_SKEW = register_code("ML-NET-014", "a peer's clock differs from this host's")

#: Clock differences above this (beyond the measurement's own error) are reported: they misorder the workers'
#: logs, traces and flight-recorder dumps, and break certificate validity checks.
MAX_CLOCK_SKEW_S = 1.0

_PROBED_JOBS = ("chief", "worker")

# status -> (code, fix template); {peer}, {address}, {port} are filled in
_FIXES = {
    Reach.REFUSED: (REFUSED, "Start {peer} (its preflight or its training program) and check it listens on {address}; "
                             "if it starts later than this task, raise --wait."),
    Reach.FILTERED: (FILTERED, "Open TCP port {port} on {peer}'s host to this host (firewall, security group or "
                               "Kubernetes NetworkPolicy); a dropped packet makes training hang, not fail."),
    Reach.UNRESOLVABLE: (UNRESOLVABLE, "Check {peer}'s host name in TF_CONFIG and DNS (in Kubernetes: its headless "
                                       "service; if it is created later, raise --wait)."),
    Reach.UNREACHABLE: (UNREACHABLE, "Check the network route from this host to {peer} (interfaces, VPN, subnet)."),
    Reach.WRONG_SERVICE: (WRONG_SERVICE, "Another program holds {address}: free the port or give {peer} another, "
                                         "and run `mirrorlab preflight` there."),
}


def probe_findings(own: str, probes: list[PeerProbe], multi_host: bool) -> list[Finding]:
    """Findings for the probes from task ``own``: one per failed pair, loopback names, and a summary."""
    findings = []
    for probe in probes:
        if probe.status in _FIXES:
            code, fix = _FIXES[probe.status]
            port = probe.address.rsplit(":", 1)[-1]
            tries = f" (after {probe.attempts} attempts)" if probe.attempts > 1 else ""
            findings.append(Finding(code, Severity.ERROR, (own, probe.peer),
                                    f"{own} -> {probe.peer} at {probe.address}: {probe.status.value}{tries}",
                                    probe.detail, fix.format(peer=probe.peer, address=probe.address, port=port)))
        if probe.clock_skew_s is not None and abs(probe.clock_skew_s) - (probe.skew_error_s or 0) > MAX_CLOCK_SKEW_S:
            findings.append(Finding(CLOCK_SKEW, Severity.WARNING, (own, probe.peer),
                                    f"{probe.peer}'s clock is {probe.clock_skew_s:+.3f} s off {own}'s",
                                    f"its wall clock when answering the fingerprint exchange, against the middle of "
                                    f"the call (give or take {probe.skew_error_s or 0:.3f} s)",
                                    "Run NTP (chrony or systemd-timesyncd) on every host; merged logs and traces "
                                    "order events by these clocks."))
        if multi_host and resolves_to_loopback(probe):
            findings.append(Finding(NAME_IS_LOOPBACK, Severity.ERROR, (own, probe.peer),
                                    f"{probe.peer}'s host in {probe.address} resolves to {', '.join(probe.resolved)} "
                                    "here, so this task would talk to itself", "resolved on this host",
                                    "Map the name to the host's real IP in /etc/hosts or DNS, or write the IP in "
                                    "TF_CONFIG."))
    summary = "; ".join(f"{p.peer} {p.status.value}" + (f" ({p.connect_s * 1000:.1f} ms connect)" if p.connect_s
                                                         else "") for p in probes)
    findings.append(Finding(REACHABILITY, Severity.INFO, (own,), f"probed {len(probes)} peer(s) from {own} "
                            "(full mesh once every task runs preflight)", summary or "no peers", ""))
    return findings


@dataclass
class PreflightReport:
    """What one preflight found: its ``findings``, and for merging with other tasks' reports, this task's label,
    the ring's tasks in order (chief, then workers by index) and its ``probes``."""

    findings: list[Finding]
    own: str = ""
    tasks: list[str] = field(default_factory=list)
    probes: list[PeerProbe] = field(default_factory=list)

    def graph(self) -> nx.DiGraph:
        """This task's row of the reachability graph (every task as a node, an edge per probe)."""
        return reachability_graph(self.tasks, [(self.own, p.peer, p.status.value) for p in self.probes])

    def json_extra(self) -> dict[str, Any]:
        """The keys ``--json`` adds to the findings: every probed pair's status and timed transfers."""
        return {"task": self.own, "tasks": self.tasks,
                "probes": [{"from": self.own, "to": p.peer, "status": p.status.value,
                            "samples": [list(sample) for sample in p.samples]} for p in self.probes]}


def run_preflight(tf_config: str, **options: Any) -> list[Finding]:
    """Everything preflight finds for the task of ``tf_config`` (see ``preflight``)."""
    return preflight(tf_config, **options).findings


def preflight(tf_config: str, *, timeout_s: float = 2.0, wait_s: float = 0.0, linger_s: float = 0.0,
              resolve: Resolver = socket.getaddrinfo, bulk_bytes: int = 0, model_bytes: int | None = None,
              collective_timeout_s: float | None = None, job_timeout_s: float | None = None,
              environ: Mapping[str, str] = os.environ) -> PreflightReport:
    """Checks ``tf_config`` and the liveness timeouts, then (when it is valid) serves this task's probe, probes and
    times every peer (``bulk_bytes`` in bulk), checks the data-lane port between hosts (``environ``'s settings,
    ``lane_port_check.py``), and compares environments."""
    findings = check_tf_config(tf_config, "TF_CONFIG")
    config, _ = parse_tf_config(tf_config)
    if exit_code(findings) == EXIT_INVALID_CONFIG or config is None:
        return PreflightReport(findings)
    view = read_view(config, "TF_CONFIG")
    if not view.task_type or view.task_index is None or not view.jobs:
        return PreflightReport(findings)  # single-worker mode: no peers
    own = task_label(view.task_type, view.task_index)
    own_address = view.jobs[view.task_type][view.task_index]
    fingerprint = collect_fingerprint()
    tasks = [task_label(job, i) for job in _PROBED_JOBS for i in sorted(view.jobs.get(job, {}))]
    peers = [(task_label(job, i), address) for job in _PROBED_JOBS for i, address in
             sorted(view.jobs.get(job, {}).items()) if task_label(job, i) != own]
    hosts = {address.rsplit(":", 1)[0] for _, address in view.addresses()}
    findings += check_timeouts(own, timeout_s, collective_timeout_s, job_timeout_s)
    lane_port = None
    if len(hosts) > 1:
        findings += _own_name_findings(own, own_address, timeout_s, resolve)
        lane_port, lane_findings = lane_setup_findings(own, environ)
        findings += lane_findings
    server = _serve(own, own_address, fingerprint, findings)
    listener = _listen_for_lanes(own, own_address, lane_port, findings) if server is not None else None
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(peers)))) as pool:
            probes = list(pool.map(lambda peer: probe_peer(*peer, timeout_s=timeout_s, wait_s=wait_s,
                                                           resolve=resolve, bulk_bytes=bulk_bytes), peers))
            if listener is not None:  # the lane port of every peer whose gRPC port answered
                findings += [f for f in pool.map(
                    lambda p: lane_port_finding(own, p.peer, p.resolved[0], lane_port, timeout_s, wait_s),
                    [p for p in probes if p.status is Reach.OK]) if f is not None]
        time.sleep(linger_s)  # keep answering peers that probe us later
    finally:
        if listener is not None:
            listener.stop()
        if server is not None:
            server.stop()
    report = PreflightReport(findings + probe_findings(own, probes, multi_host=len(hosts) > 1), own, tasks, probes)
    report.findings += cut_pair_findings(report.graph(), tasks)
    report.findings += link_findings(fit_links({(own, p.peer): p.samples for p in probes}), tasks, model_bytes)
    compared = [(own, fingerprint)] + [(p.peer, p.fingerprint) for p in probes if p.fingerprint is not None]
    report.findings += compare_fingerprints(compared) + compare_liveness(compared)
    return report


def _own_name_findings(own: str, address: str, timeout_s: float, resolve: Resolver) -> list[Finding]:
    """ML-NET-006 when this task's own host name resolves to loopback here: it would listen where no peer can reach."""
    host_port, _ = split_address(address)
    if host_port is None or is_loopback(host_port.host):
        return []  # literal loopback is ML-CFG-028's
    resolved, problem = resolve_host(host_port, timeout_s, resolve)
    if problem is not None or not all(is_loopback(ip) for ip in resolved):
        return []
    return [Finding(NAME_IS_LOOPBACK, Severity.ERROR, (own,),
                    f"{own}'s own host in {address} resolves to {', '.join(resolved)} here, so it listens on loopback "
                    "only and no other host can reach it",
                    f"{host_port.host!r} resolved on this host: {', '.join(resolved)}",
                    "Map the name to the host's real IP in /etc/hosts or DNS (Debian maps its own name to 127.0.1.1), "
                    "or write the IP in TF_CONFIG.")]


def _listen_for_lanes(own: str, address: str, port: int | None, findings: list[Finding]) -> LaneListener | None:
    """Listens on this task's host and the fixed lane ``port`` (None: nothing to check), or records why it cannot
    (as the real backend, which would not start: ML-NET-017)."""
    host_port, _ = split_address(address)
    if port is None or host_port is None:
        return None
    try:
        return LaneListener(host_port.host, port).start()
    except OSError as err:
        findings.append(Finding(LANE_SETTING_INVALID, Severity.ERROR, (own,),
                                f"{own} cannot listen for data lanes on {host_port.host}:{port}",
                                f"{type(err).__name__}: {err.strerror or err}",
                                f"Set {DATA_LANE_PORT_VAR} to a port that is free on every worker's host (another "
                                "process holds this one?), or unset it for any free port."))
        return None


def _serve(own: str, address: str, fingerprint: dict, findings: list[Finding]) -> ProbeServer | None:
    """Starts this task's probe on its own address, or records why it cannot."""
    try:
        return ProbeServer(address, fingerprint).start()
    except (RuntimeError, ValueError) as err:
        findings.append(Finding(CANNOT_SERVE, Severity.ERROR, (own,), f"{own} cannot listen on {address}",
                                f"{type(err).__name__}: {err}", "Free the port (another process uses it?) and check the "
                                "host in TF_CONFIG is this machine's name or IP."))
        return None
