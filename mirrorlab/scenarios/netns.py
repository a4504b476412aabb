"""Hosts in Linux network namespaces, for real-process scenario runs and network tests: one namespace per host, each
joined by a veth pair to a bridge that lives in a namespace of its own, addresses in 192.0.2.0/24 (TEST-NET-1) only,
nothing changed in the caller's namespace.

Names carry the creating process's pid, so parallel runs never collide; ``close`` deletes every namespace (the veths
and the bridge go with them) and the per-namespace /etc/netns files, and is safe to call after a partial setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

__all__ = ["NetnsLab", "Host", "run", "unavailable_reason", "SUBNET_PREFIX"]

SUBNET_PREFIX = "192.0.2."
_RUN_TIMEOUT_S = 10.0
_labs = count()


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (to skip with), or None when they can."""
    if sys.platform != "linux":
        return "network namespaces are Linux-only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"mlprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=_RUN_TIMEOUT_S)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=_RUN_TIMEOUT_S)
    return None


def run(*argv: str, namespace: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Runs a short command (in ``namespace`` when given), bounded in time; raises with its stderr when it fails."""
    command = (["ip", "netns", "exec", namespace] if namespace else []) + list(argv)
    done = subprocess.run(command, capture_output=True, text=True, timeout=_RUN_TIMEOUT_S)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


@dataclass
class Host:
    """One test host: its namespace, its address and the name of its interface."""

    namespace: str
    ip: str
    interface: str = "eth0"


@dataclass
class NetnsLab:
    """``n`` hosts on one bridge; ``hosts[i].ip`` is 192.0.2.(i+1)."""

    n: int
    tag: str = field(default_factory=lambda: f"ml{os.getpid()}x{next(_labs)}")
    hosts: list[Host] = field(default_factory=list)
    _namespaces: list[str] = field(default_factory=list)

    @property
    def switch(self) -> str:
        return f"{self.tag}sw"

    def __enter__(self) -> "NetnsLab":
        try:
            self._add_namespace(self.switch)
            run("ip", "link", "add", "br0", "type", "bridge", namespace=self.switch)
            run("ip", "link", "set", "br0", "up", namespace=self.switch)
            for i in range(self.n):
                self._add_host(i)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _add_namespace(self, name: str) -> None:
        run("ip", "netns", "add", name)
        self._namespaces.append(name)
        run("ip", "link", "set", "lo", "up", namespace=name)

    def _add_host(self, i: int) -> None:
        host = Host(f"{self.tag}h{i}", f"{SUBNET_PREFIX}{i + 1}")
        self._add_namespace(host.namespace)
        port = f"p{i}"
        run("ip", "link", "add", host.interface, "netns", host.namespace, "type", "veth", "peer", "name", port,
            "netns", self.switch)
        run("ip", "link", "set", port, "master", "br0", "up", namespace=self.switch)
        run("ip", "addr", "add", f"{host.ip}/24", "dev", host.interface, namespace=host.namespace)
        run("ip", "link", "set", host.interface, "up", namespace=host.namespace)
        self.hosts.append(host)

    def write_hosts_file(self, host: Host, text: str) -> None:
        """The /etc/hosts that commands in ``host``'s namespace see (``ip netns exec`` bind-mounts /etc/netns/NS/)."""
        folder = Path("/etc/netns") / host.namespace
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text(text)

    def close(self) -> None:
        """Deletes every namespace made so far (with its veths and bridge) and its /etc/netns folder."""
        for name in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=_RUN_TIMEOUT_S)
            shutil.rmtree(Path("/etc/netns") / name, ignore_errors=True)
        self._namespaces.clear()
