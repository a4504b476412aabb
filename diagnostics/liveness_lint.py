"""Lints the timeouts that decide how a failure surfaces: connect < heartbeat <= keepalive < collective < job, with
keepalive pinging more often than the heartbeat timeout, and whether a gRPC client's keepalive suits its server.

A connect deadline at or above the heartbeat timeout declares a peer that is merely slow to connect lost; a keepalive
interval at or above the heartbeat timeout does not even ping an idle connection before the heartbeat gives up; a
keepalive timeout below it (gRPC also sets TCP_USER_TIMEOUT to it) breaks the streams during a network stall the
heartbeat would have waited out; a collective timeout at or below the heartbeat or keepalive timeout turns a dead peer
into an anonymous "Collective has timed out" before they can name it; a job timeout (e.g. Kubernetes
activeDeadlineSeconds) at or below the rendezvous window or the collective timeout kills the job before either can say
what went wrong. A client that pings more often than its server accepts (or between calls, where the server does not
permit it) gets GOAWAY "too_many_pings", which breaks every open stream. The backend's values come from its
environment variables, the collective timeout from CommunicationOptions.timeout_seconds.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from mirrorlab.backend.keepalive import Keepalive
from mirrorlab.backend.settings import (HEARTBEAT_DEFAULT_S, HEARTBEAT_VAR, KEEPALIVE_TIME_VAR, KEEPALIVE_TIMEOUT_VAR,
                                       RENDEZVOUS_DEFAULT_S, RENDEZVOUS_VAR, seconds_setting)
from mirrorlab.diagnostics.findings import Finding, Severity, register_code

__all__ = ["TIMEOUTS_OUT_OF_ORDER", "BAD_TIMEOUT", "LIVENESS_SKEW", "KEEPALIVE_GOAWAY", "KEEPALIVE_INEFFECTIVE",
           "RENDEZVOUS_VAR", "HEARTBEAT_VAR", "LIVENESS_VARS", "check_timeouts", "check_keepalive",
           "compare_liveness"]

TIMEOUTS_OUT_OF_ORDER = register_code("ML-LIVE-001",
                                      "timeouts out of order: connect < heartbeat <= keepalive < collective < job")
BAD_TIMEOUT = register_code("ML-LIVE-002", "a timeout setting is not a positive number of seconds")
LIVENESS_SKEW = register_code("ML-LIVE-004", "workers disagree on the heartbeat or rendezvous timeout")
KEEPALIVE_GOAWAY = register_code("ML-LIVE-005", "the server answers the client's keepalive pings with GOAWAY "
                                                "too_many_pings")
KEEPALIVE_INEFFECTIVE = register_code("ML-LIVE-006", "a client's keepalive is off or stops pinging an idle connection")

# gRPC core's defaults for the arguments the keepalive check reads (doc/keepalive.md)
_GRPC_DEFAULTS = {"grpc.keepalive_time_ms": 2 ** 31 - 1, "grpc.keepalive_permit_without_calls": 0,
                  "grpc.http2.max_pings_without_data": 2, "grpc.http2.min_ping_interval_without_data_ms": 300_000,
                  "grpc.http2.max_ping_strikes": 2}

#: The real backend's variables (backend/settings.py) and their defaults, seconds.
#: The variables each fingerprint carries, so that peers can check both sides of every pair agree.
LIVENESS_VARS = (RENDEZVOUS_VAR, HEARTBEAT_VAR)
_DEFAULTS = {RENDEZVOUS_VAR: RENDEZVOUS_DEFAULT_S, HEARTBEAT_VAR: HEARTBEAT_DEFAULT_S}


def check_timeouts(own: str, connect_s: float, collective_s: float | None = None, job_s: float | None = None,
                   environ: Mapping[str, str] = os.environ) -> list[Finding]:
    """Findings for this task's timeouts: ``connect_s`` (the per-connection deadline), the backend's rendezvous,
    heartbeat and keepalive settings from ``environ``, ``collective_s`` (CommunicationOptions.timeout_seconds; None:
    none) and ``job_s`` (the job's own deadline; None: none); then ``check_keepalive`` of the gRPC options the backend
    builds from those keepalive values."""
    findings: list[Finding] = []
    rendezvous_s = _seconds(own, environ, RENDEZVOUS_VAR, RENDEZVOUS_DEFAULT_S, findings)
    heartbeat_s = _seconds(own, environ, HEARTBEAT_VAR, HEARTBEAT_DEFAULT_S, findings)
    default = Keepalive.for_heartbeat(heartbeat_s)
    keepalive = Keepalive(_seconds(own, environ, KEEPALIVE_TIME_VAR, default.time_s, findings),
                          _seconds(own, environ, KEEPALIVE_TIMEOUT_VAR, default.timeout_s, findings))
    if findings:
        return findings
    rules = [(connect_s >= heartbeat_s, f"the connect deadline ({connect_s:g} s) is not below {HEARTBEAT_VAR} "
              f"({heartbeat_s:g} s)", "a peer that is merely slow to connect is reported lost",
              f"Raise {HEARTBEAT_VAR} above the connect deadline (or lower --timeout)."),
             (keepalive.time_s >= heartbeat_s, f"the gRPC keepalive interval ({KEEPALIVE_TIME_VAR} = "
              f"{keepalive.time_s:g} s) is not below {HEARTBEAT_VAR} ({heartbeat_s:g} s)",
              "an idle connection to a dead or cut-off peer is not even pinged before the heartbeat gives up",
              f"Unset {KEEPALIVE_TIME_VAR} (it defaults to 0.4 of {HEARTBEAT_VAR}) or set it below {heartbeat_s:g} s."),
             (keepalive.timeout_s < heartbeat_s, f"the gRPC keepalive timeout ({KEEPALIVE_TIMEOUT_VAR} = "
              f"{keepalive.timeout_s:g} s) is below {HEARTBEAT_VAR} ({heartbeat_s:g} s)",
              "gRPC closes a connection whose ping is unanswered that long and sets TCP_USER_TIMEOUT to it, so a "
              "network stall shorter than the heartbeat timeout breaks the streams and the peer is reported lost",
              f"Unset {KEEPALIVE_TIMEOUT_VAR} (it defaults to 1.5 x {HEARTBEAT_VAR}) or set it to at least "
              f"{heartbeat_s:g} s.")]
    if collective_s is not None:
        rules.append((heartbeat_s < collective_s <= keepalive.timeout_s, f"CommunicationOptions.timeout_seconds "
                      f"({collective_s:g} s) is not above {KEEPALIVE_TIMEOUT_VAR} ({keepalive.timeout_s:g} s)",
                      "a collective gives up before gRPC could tell that its connection died",
                      f"Set timeout_seconds above {keepalive.timeout_s:g} s, or lower {KEEPALIVE_TIMEOUT_VAR}."))
        rules.append((collective_s <= heartbeat_s, f"CommunicationOptions.timeout_seconds ({collective_s:g} s) is not "
                      f"above {HEARTBEAT_VAR} ({heartbeat_s:g} s)", "a dead peer ends the step as an anonymous "
                      "'Collective has timed out' before the heartbeat can name it",
                      f"Set timeout_seconds above {HEARTBEAT_VAR}, e.g. {max(4 * heartbeat_s, 30):g} s."))
    if job_s is not None:
        slowest = max(rendezvous_s, collective_s or 0.0)
        rules.append((job_s <= slowest, f"the job timeout ({job_s:g} s) is not above the rendezvous window "
                      f"({RENDEZVOUS_VAR} = {rendezvous_s:g} s) and the collective timeout "
                      f"({'none' if collective_s is None else f'{collective_s:g} s'})",
                      "the job is killed before start-up or a collective can report what went wrong",
                      f"Give the job more than {slowest:g} s, or lower {RENDEZVOUS_VAR} / timeout_seconds."))
    for broken, message, why, fix in rules:
        if broken:
            findings.append(Finding(TIMEOUTS_OUT_OF_ORDER, Severity.WARNING, (own,), message, why, fix))
    return findings + check_keepalive(own, keepalive.client_options(), keepalive.server_options())


def check_keepalive(own: str, client: Sequence[tuple[str, Any]], server: Sequence[tuple[str, Any]]) -> list[Finding]:
    """ML-LIVE-005 when the server (its gRPC arguments ``server``) would GOAWAY the pings of a client with the channel
    arguments ``client``; ML-LIVE-006 when the client's keepalive is off or stops pinging. Absent arguments take gRPC
    core's defaults, so ``check_keepalive(own, client, [])`` checks a client against a server left at them."""
    c, s = {**_GRPC_DEFAULTS, **dict(client)}, {**_GRPC_DEFAULTS, **dict(server)}
    time_ms = c["grpc.keepalive_time_ms"]
    if time_ms >= _GRPC_DEFAULTS["grpc.keepalive_time_ms"]:
        return [Finding(KEEPALIVE_INEFFECTIVE, Severity.WARNING, (own,), "the client sets no grpc.keepalive_time_ms: "
                        "keepalive is off", "grpc.keepalive_time_ms unset (gRPC's default for clients: never ping)",
                        "Set grpc.keepalive_time_ms below the heartbeat timeout (mirrorlab.backend.keepalive's "
                        "Keepalive.client_options()), so a dead connection is closed instead of waited on.")]
    findings = []
    evidence = ", ".join(f"{k}={v}" for k, v in sorted({**dict(client), **dict(server)}.items())) or "gRPC defaults"
    if c["grpc.http2.max_pings_without_data"] != 0:
        findings.append(Finding(KEEPALIVE_INEFFECTIVE, Severity.WARNING, (own,),
                                f"the client stops pinging after {c['grpc.http2.max_pings_without_data']} pings "
                                "without data (grpc.http2.max_pings_without_data)", evidence,
                                "Set grpc.http2.max_pings_without_data to 0, so an idle stream stays watched."))
    strikes = s["grpc.http2.max_ping_strikes"] != 0
    floor = s["grpc.http2.min_ping_interval_without_data_ms"]
    if strikes and time_ms < floor:
        findings.append(Finding(KEEPALIVE_GOAWAY, Severity.ERROR, (own,), f"the client pings every {time_ms} ms but "
                                f"the server accepts pings only {floor} ms apart: after "
                                f"{s['grpc.http2.max_ping_strikes']} strikes it sends GOAWAY too_many_pings",
                                evidence, f"Set the server's grpc.http2.min_ping_interval_without_data_ms to at most "
                                f"{time_ms} (or the client's grpc.keepalive_time_ms to at least {floor})."))
    if strikes and c["grpc.keepalive_permit_without_calls"] and not s["grpc.keepalive_permit_without_calls"]:
        findings.append(Finding(KEEPALIVE_GOAWAY, Severity.ERROR, (own,), "the client pings between calls "
                                "(grpc.keepalive_permit_without_calls=1) but the server does not permit it: it "
                                "counts those pings as strikes and sends GOAWAY too_many_pings", evidence,
                                "Set grpc.keepalive_permit_without_calls=1 on the server too."))
    return findings


def _seconds(own: str, environ: Mapping[str, str], name: str, default: float, findings: list[Finding]) -> float:
    """The backend's reading of ``name`` (``seconds_setting``); NaN with an ML-LIVE finding where it would refuse."""
    try:
        return seconds_setting(environ, name, default)
    except ValueError:
        findings.append(Finding(BAD_TIMEOUT, Severity.ERROR, (own,), f"{name}={environ[name]!r} is not a positive "
                                "number of seconds", f"{name} in {own}'s environment", f"Set e.g. {name}={default:g}."))
        return float("nan")


def compare_liveness(fingerprints: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Finding]:
    """ML-LIVE-004 for each liveness variable whose value (its default when unset) differs between the tasks'
    fingerprints: one side then gives up on the other while the other still waits. Fingerprints without the
    ``liveness`` key (older peers) are left out."""
    findings = []
    for name in LIVENESS_VARS:
        values = {}
        for label, fingerprint in fingerprints:
            liveness = fingerprint.get("liveness")
            if isinstance(liveness, Mapping):
                raw = liveness.get(name)
                values[label] = f"{_DEFAULTS[name]:g} (default)" if raw in (None, "") else str(raw)
        if len(set(values.values())) > 1:
            findings.append(Finding(LIVENESS_SKEW, Severity.WARNING, tuple(values), f"{name} differs between workers",
                                    ", ".join(f"{label}: {value}" for label, value in values.items()),
                                    f"Set the same {name} on every worker (mirrorlab launch gives all of them one "
                                    "environment); otherwise one side gives up while the other still waits."))
    return findings
