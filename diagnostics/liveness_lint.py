"""Lints the timeouts that decide how a failure surfaces: connect < heartbeat < collective < job.

A connect deadline at or above the heartbeat timeout declares a peer that is merely slow to connect lost; a
collective timeout at or below it turns a dead peer into an anonymous "Collective has timed out" instead of the
heartbeat's error naming the lost peer; a job timeout (e.g. Kubernetes activeDeadlineSeconds) at or below the
rendezvous window or the collective timeout kills the job before either can say what went wrong. The backend's
values come from its environment variables, the collective timeout from CommunicationOptions.timeout_seconds.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from mirrorlab.backend.settings import (HEARTBEAT_DEFAULT_S, HEARTBEAT_VAR, RENDEZVOUS_DEFAULT_S, RENDEZVOUS_VAR,
                                       seconds_setting)
from mirrorlab.diagnostics.findings import Finding, Severity, register_code

__all__ = ["TIMEOUTS_OUT_OF_ORDER", "BAD_TIMEOUT", "LIVENESS_SKEW", "RENDEZVOUS_VAR", "HEARTBEAT_VAR",
           "LIVENESS_VARS", "check_timeouts", "compare_liveness"]

TIMEOUTS_OUT_OF_ORDER = register_code("ML-LIVE-001", "timeouts out of order: connect < heartbeat < collective < job")
BAD_TIMEOUT = register_code("ML-LIVE-002", "a timeout setting is not a positive number of seconds")
LIVENESS_SKEW = register_code("ML-LIVE-004", "workers disagree on the heartbeat or rendezvous timeout")

#: The real backend's variables (backend/settings.py) and their defaults, seconds.
#: The variables each fingerprint carries, so that peers can check both sides of every pair agree.
LIVENESS_VARS = (RENDEZVOUS_VAR, HEARTBEAT_VAR)
_DEFAULTS = {RENDEZVOUS_VAR: RENDEZVOUS_DEFAULT_S, HEARTBEAT_VAR: HEARTBEAT_DEFAULT_S}


def check_timeouts(own: str, connect_s: float, collective_s: float | None = None, job_s: float | None = None,
                   environ: Mapping[str, str] = os.environ) -> list[Finding]:
    """Findings for this task's timeouts: ``connect_s`` (the per-connection deadline), the backend's rendezvous and
    heartbeat timeouts from ``environ``, ``collective_s`` (CommunicationOptions.timeout_seconds; None: none) and
    ``job_s`` (the job's own deadline; None: none)."""
    findings: list[Finding] = []
    rendezvous_s = _seconds(own, environ, RENDEZVOUS_VAR, RENDEZVOUS_DEFAULT_S, findings)
    heartbeat_s = _seconds(own, environ, HEARTBEAT_VAR, HEARTBEAT_DEFAULT_S, findings)
    if findings:
        return findings
    rules = [(connect_s >= heartbeat_s, f"the connect deadline ({connect_s:g} s) is not below {HEARTBEAT_VAR} "
              f"({heartbeat_s:g} s)", "a peer that is merely slow to connect is reported lost",
              f"Raise {HEARTBEAT_VAR} above the connect deadline (or lower --timeout).")]
    if collective_s is not None:
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
