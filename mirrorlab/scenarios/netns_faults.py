"""A scenario's network faults as rules in the namespaces of a ``NetnsLab``: nftables for cut, drop, clog and isolate,
``tc netem`` for delay. Times (a clog's or an isolation's ``start`` and ``seconds``) count wall-clock seconds from
``start()``, which the runner calls as it lets the workers go.

A ``Cut`` is a firewall on the gRPC port (``port``) between the pair, both ways, as a security group that lets other
traffic through; ``Drop`` loses that share of the packets from ``src`` at ``dst`` (TCP resends them: slower, or
silence when all are lost); ``Clog`` and ``Isolate`` lose every packet of the link or worker while they last.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable

from mirrorlab.sim import Clog, Cut, Delay, Drop, Fault, Isolate

from . import netns
from .netns import NetnsLab

__all__ = ["unavailable_reason", "nft_rule", "NetworkFaults"]

_SUBNET = f"{netns.SUBNET_PREFIX}0/24"


def unavailable_reason(faults: tuple[Fault, ...]) -> str | None:
    """Why the namespaces, nftables or netem these network faults need cannot be had here (None when they can)."""
    reason = netns.unavailable_reason()
    if reason is None and shutil.which("nft") is None and any(not isinstance(f, Delay) for f in faults):
        reason = "the nft command (nftables) is not installed"
    if reason is None and any(isinstance(f, Delay) for f in faults):
        reason = _netem_reason()
    return reason


def _netem_reason() -> str | None:
    """Why ``tc netem`` cannot delay packets here (a kernel without sch_netem), or None."""
    if shutil.which("tc") is None:
        return "the tc command (iproute2) is not installed"
    with NetnsLab(1) as lab:
        done = netns.run("tc", "qdisc", "add", "dev", lab.hosts[0].interface, "root", "netem", "delay", "1ms",
                         namespace=lab.hosts[0].namespace, check=False)
    return None if done.returncode == 0 else f"tc netem cannot delay packets here ({done.stderr.strip()})"


def nft_rule(namespace: str, table: str, hook: str, rule: str) -> None:
    """Adds ``rule`` (e.g. ``ip saddr 192.0.2.1 tcp dport 2222 drop``) to the ``hook`` chain (input or output) of
    nftables table ``table`` in ``namespace``, making the table and chain on first use."""
    netns.run("nft", "add", "table", "inet", table, namespace=namespace)
    netns.run("nft", "add", "chain", "inet", table, hook, f"{{ type filter hook {hook} priority 0 ; }}",
              namespace=namespace)
    netns.run("nft", "add", "rule", "inet", table, hook, *rule.split(), namespace=namespace)


class NetworkFaults:
    """Applies ``faults`` to ``lab``'s hosts (host i is worker i; the workers listen on ``port``)."""

    def __init__(self, lab: NetnsLab, faults: tuple[Fault, ...], port: int) -> None:
        self.lab, self.faults, self.port = lab, faults, port
        self.notes: list[str] = []
        self._timers: list[threading.Timer] = []

    def _ip(self, worker: int) -> str:
        return self.lab.hosts[worker].ip

    def _ns(self, worker: int) -> str:
        return self.lab.hosts[worker].namespace

    def start(self) -> None:
        """Applies every fault now, or schedules it (``start`` seconds from now, lifted after ``seconds``)."""
        for k, fault in enumerate(self.faults):
            table = f"mlfault{k}"
            apply, lift = self._rules(fault, table)
            begin = getattr(fault, "start", 0.0)
            length = getattr(fault, "seconds", None) if isinstance(fault, (Clog, Isolate)) else None
            if begin:
                self._later(begin, apply)
            else:
                apply()
            if length is not None:
                self._later(begin + length, lift)
            window = f" from {begin:g} s" + (f" for {length:g} s" if length is not None else "") if begin or length \
                else ""
            self.notes.append(f"network: {fault!r} applied{window}")

    def stop(self) -> None:
        """Cancels what has not happened yet (the namespaces go with the lab)."""
        for timer in self._timers:
            timer.cancel()

    def _later(self, seconds: float, action: Callable[[], None]) -> None:
        timer = threading.Timer(seconds, action)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _rules(self, fault: Fault, table: str) -> tuple[Callable[[], None], Callable[[], None]]:
        """(apply, lift) for one fault."""
        rules: list[tuple[int, str, str]] = []  # (worker whose namespace, hook, rule)
        if isinstance(fault, Cut):
            rules = [(fault.a, "input", f"ip saddr {self._ip(fault.b)} tcp dport {self.port} drop"),
                     (fault.b, "input", f"ip saddr {self._ip(fault.a)} tcp dport {self.port} drop")]
        elif isinstance(fault, Drop):
            share = "" if fault.probability >= 1.0 else f"numgen random mod 1000 < {round(fault.probability * 1000)} "
            rules = [(fault.dst, "input", f"ip saddr {self._ip(fault.src)} {share}drop")]
        elif isinstance(fault, Clog):
            rules = [(fault.a, "input", f"ip saddr {self._ip(fault.b)} drop"),
                     (fault.a, "output", f"ip daddr {self._ip(fault.b)} drop")]
        elif isinstance(fault, Isolate):
            rules = [(fault.worker, "input", f"ip saddr {_SUBNET} drop"),
                     (fault.worker, "output", f"ip daddr {_SUBNET} drop")]
        elif isinstance(fault, Delay):
            return (lambda: self._delay(fault)), (lambda: None)
        else:
            raise ValueError(f"{fault!r} is not a network fault")
        workers = sorted({w for w, _, _ in rules})

        def apply() -> None:
            for worker, hook, rule in rules:
                nft_rule(self._ns(worker), table, hook, rule)

        def lift() -> None:
            for worker in workers:
                netns.run("nft", "delete", "table", "inet", table, namespace=self._ns(worker), check=False)

        return apply, lift

    def _delay(self, fault: Delay) -> None:
        """netem delay on ``src``'s interface, for packets to ``dst`` only (a prio band picked by a u32 filter)."""
        ns, device = self._ns(fault.src), self.lab.hosts[fault.src].interface
        netns.run("tc", "qdisc", "add", "dev", device, "root", "handle", "1:", "prio", namespace=ns, check=False)
        netns.run("tc", "qdisc", "add", "dev", device, "parent", "1:3", "netem", "delay",
                  f"{round(fault.seconds * 1000)}ms", namespace=ns)
        netns.run("tc", "filter", "add", "dev", device, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
                  "ip", "dst", f"{self._ip(fault.dst)}/32", "flowid", "1:3", namespace=ns)
