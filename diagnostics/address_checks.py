"""Static checks of the cluster's addresses: each ``host:port`` on its own, then the set (duplicates, loopback).

TensorFlow accepts any string as an address and fails much later (a hang, or every worker alone on its own
machine); these checks read each address the way a gRPC channel will and say what will go wrong.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping

from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.tf_config_view import TFConfigView

__all__ = [
    "MALFORMED_ADDRESS", "URL_SCHEME", "PORT_OUT_OF_RANGE", "PRIVILEGED_PORT", "WHITESPACE", "UNSPECIFIED_HOST",
    "DUPLICATE_ADDRESS", "CHIEF_ALSO_WORKER", "LOOPBACK_IN_MULTI_HOST", "MIXED_NAMES_AND_IPS",
    "HostPort", "split_address", "is_loopback", "check_each_address", "check_address_set",
]

MALFORMED_ADDRESS = register_code("ML-CFG-020", 'an address is not "host:port"', invalid_config=True)
URL_SCHEME = register_code("ML-CFG-021", "an address carries a URL scheme such as grpc://", invalid_config=True)
PORT_OUT_OF_RANGE = register_code("ML-CFG-022", "a port is outside 1-65535", invalid_config=True)
PRIVILEGED_PORT = register_code("ML-CFG-023", "a port below 1024 needs root to listen on")
WHITESPACE = register_code("ML-CFG-024", "an address contains whitespace", invalid_config=True)
UNSPECIFIED_HOST = register_code("ML-CFG-025", "an address is 0.0.0.0 or ::, which peers cannot connect to",
                                 invalid_config=True)
DUPLICATE_ADDRESS = register_code("ML-CFG-026", "two tasks share one address", invalid_config=True)
CHIEF_ALSO_WORKER = register_code("ML-CFG-027", "the chief is also listed as a worker", invalid_config=True)
LOOPBACK_IN_MULTI_HOST = register_code("ML-CFG-028", "localhost or 127.x in a cluster that spans several hosts",
                                       invalid_config=True)
MIXED_NAMES_AND_IPS = register_code("ML-CFG-029", "the cluster mixes host names and IP addresses")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_HOSTNAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9._-]*[A-Za-z0-9_])?$")
_BRACKETED = re.compile(r"^\[([^\]]*)\](?::(.*))?$")
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_PORT_EXAMPLE = "2222"  # Kubeflow's TFJob default port


@dataclass(frozen=True)
class HostPort:
    """An address split into host (IPv6 without brackets) and port."""

    host: str
    port: int


@dataclass(frozen=True)
class _Problem:
    code: str
    severity: Severity
    message: str
    fix: str


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost`` and friends, 127.0.0.0/8 or ::1."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    ip = _ip(host)
    return ip is not None and ip.is_loopback


@functools.lru_cache(maxsize=1 << 14)
def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address, or None (cached: every simulated worker's start-up checks every peer's host)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def split_address(address: str) -> tuple[HostPort | None, list[_Problem]]:
    """Reads ``address`` as a gRPC target ``host:port``; returns it (None when unusable) and what is wrong with it."""
    problems: list[_Problem] = []
    rest = address
    scheme = _SCHEME.match(rest)
    if scheme:
        rest = rest[scheme.end():]
        problems.append(_Problem(URL_SCHEME, Severity.ERROR, f"address {address!r} starts with {scheme.group(0)!r}",
                                 f"Write {rest!r}: TF_CONFIG addresses are bare host:port (set the protocol with "
                                 f"\"rpc_layer\": \"grpc\" if needed)."))
    if any(c.isspace() for c in rest):
        problems.append(_Problem(WHITESPACE, Severity.ERROR, f"address {address!r} contains whitespace",
                                 f"Remove the spaces: write {''.join(rest.split())!r}."))
        if any(c.isspace() for c in rest.strip()):
            return None, problems
        rest = rest.strip()
    host_port, problem = _host_and_port(address, rest)
    if problem:
        return None, problems + [problem]
    assert host_port is not None
    problems += _port_problems(address, host_port)
    ip = _ip(host_port.host)
    if ip is not None and ip.is_unspecified:
        problems.append(_Problem(UNSPECIFIED_HOST, Severity.ERROR, f"address {address!r} is the unspecified address",
                                 "Write the task's reachable host name or IP: 0.0.0.0 is for binding, not connecting."))
    return host_port, problems


def _host_and_port(address: str, rest: str) -> tuple[HostPort | None, _Problem | None]:
    """Splits ``rest`` into host and port, or says why it is not ``host:port``."""
    def malformed(why: str, fix: str) -> tuple[None, _Problem]:
        return None, _Problem(MALFORMED_ADDRESS, Severity.ERROR, f"address {address!r} {why}", fix)

    bracketed = _BRACKETED.match(rest)
    if bracketed:
        host, port_text = bracketed.group(1), bracketed.group(2)
        if not isinstance(_ip(host), ipaddress.IPv6Address):
            return malformed("has brackets around something that is not an IPv6 address",
                             "Use brackets only around IPv6 addresses, e.g. [2001:db8::1]:2222.")
    elif rest.count(":") > 1:
        fix = (f"Bracket the IPv6 address: [{rest.rsplit(':', 1)[0]}]:{rest.rsplit(':', 1)[1]}."
               if _ip(rest.rsplit(":", 1)[0]) else "Write one host and one port, e.g. host0:2222.")
        return malformed("has more than one ':'", fix)
    elif ":" in rest:
        host, port_text = rest.rsplit(":", 1)
        if not host:
            return malformed("has no host before the ':'", f"Write the task's host name or IP, e.g. host0{rest}.")
        if not _HOSTNAME.match(host) and _ip(host) is None:
            return malformed(f"has host {host!r}, which is not a host name or IP address",
                             "Host names use letters, digits, '-' and '.', e.g. worker-0.example.com.")
    else:
        return malformed("has no port", f"Add the port the task listens on, e.g. {rest or 'host0'}:{_PORT_EXAMPLE}.")
    if port_text is None or not port_text.isdigit() or not port_text.isascii():
        return malformed(f"has port {port_text!r}, which is not a number",
                         f"Write the port as digits, e.g. {host}:{_PORT_EXAMPLE}.")
    return HostPort(host, int(port_text)), None


def _port_problems(address: str, host_port: HostPort) -> list[_Problem]:
    port = host_port.port
    if port == 0 or port > 65535:
        return [_Problem(PORT_OUT_OF_RANGE, Severity.ERROR, f"address {address!r} has port {port}, outside 1-65535",
                         f"Pick a free port in 1024-65535, e.g. {_PORT_EXAMPLE}.")]
    if port < 1024:
        return [_Problem(PRIVILEGED_PORT, Severity.WARNING, f"address {address!r} has privileged port {port}",
                         f"Listening on it needs root or CAP_NET_BIND_SERVICE; prefer a port >= 1024, e.g. "
                         f"{_PORT_EXAMPLE}.")]
    return []


def check_each_address(config: Mapping[str, Any], view: TFConfigView) -> list[Finding]:
    """Every cluster address on its own: scheme, whitespace, host:port shape, port range, unspecified host."""
    return [Finding(p.code, p.severity, (label,), p.message, f"{view.source}: {label} = {address!r}", p.fix)
            for label, address in view.addresses() for p in split_address(address)[1]]


def check_address_set(config: Mapping[str, Any], view: TFConfigView) -> list[Finding]:
    """The addresses together: duplicates (all loopback names are one host), the chief also a worker, loopback
    mixed with other hosts, and host names mixed with IP literals."""
    parsed = [(label, address, split_address(address)[0]) for label, address in view.addresses()]
    usable = [(label, address, hp) for label, address, hp in parsed if hp is not None]
    return _duplicates(view, usable) + _loopback_mixed(view, usable) + _names_and_ips(view, usable)


def _remote(host: str) -> bool:
    """Whether ``host`` is another machine: neither loopback nor the unspecified 0.0.0.0 / ::."""
    ip = _ip(host)
    return not is_loopback(host) and not (ip is not None and ip.is_unspecified)


def _machine(host: str) -> str:
    """The machine a host denotes as far as static reading can tell: every loopback name is this machine."""
    return "loopback" if is_loopback(host) else host.lower()


def _duplicates(view: TFConfigView, usable: list[tuple[str, str, HostPort]]) -> list[Finding]:
    owners: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    for label, address, hp in usable:
        owners[(_machine(hp.host), hp.port)].append((label, address))
    findings = []
    for (machine, port), tasks in owners.items():
        if len(tasks) < 2:
            continue
        labels = tuple(label for label, _ in tasks)
        evidence = f"{view.source}: " + ", ".join(f"{label} = {address!r}" for label, address in tasks)
        jobs = {label.split(":")[0] for label in labels}
        if jobs == {"chief", "worker"}:
            findings.append(Finding(CHIEF_ALSO_WORKER, Severity.ERROR, labels,
                                    f"the chief's address is also listed under 'worker' ({', '.join(labels)})",
                                    evidence, "The chief is itself a worker: remove its address from the 'worker' "
                                    "list and renumber the workers."))
        else:
            alias = " (all loopback names are this machine)" if machine == "loopback" else ""
            findings.append(Finding(DUPLICATE_ADDRESS, Severity.ERROR, labels,
                                    f"{', '.join(labels)} share port {port} on one host{alias}", evidence,
                                    "Give every task its own host:port; tasks on one machine need different ports."))
    return findings


def _loopback_mixed(view: TFConfigView, usable: list[tuple[str, str, HostPort]]) -> list[Finding]:
    local = [(label, address) for label, address, hp in usable if is_loopback(hp.host)]
    remote = sorted({hp.host for _, _, hp in usable if _remote(hp.host)})
    if not local or not remote:
        return []
    return [Finding(LOOPBACK_IN_MULTI_HOST, Severity.ERROR, tuple(label for label, _ in local),
                    f"{', '.join(label for label, _ in local)} {'uses' if len(local) == 1 else 'use'} a loopback "
                    f"address while other tasks are on "
                    f"{', '.join(remote)}",
                    f"{view.source}: " + ", ".join(f"{label} = {address!r}" for label, address in local),
                    "Every worker reads the same cluster, so 'localhost' means a different machine to each of them: "
                    "write that task's real host name or IP.")]


def _names_and_ips(view: TFConfigView, usable: list[tuple[str, str, HostPort]]) -> list[Finding]:
    names = sorted({hp.host for _, _, hp in usable if _remote(hp.host) and _ip(hp.host) is None})
    ips = sorted({hp.host for _, _, hp in usable if _remote(hp.host) and _ip(hp.host) is not None})
    if not names or not ips:
        return []
    return [Finding(MIXED_NAMES_AND_IPS, Severity.WARNING, (),
                    "the cluster names some hosts by name and others by IP, so one machine may appear twice unseen",
                    f"{view.source}: names {names}; IPs {ips}",
                    "Use host names everywhere (or IPs everywhere) so duplicate addresses and port clashes show.")]
