"""Which transport carries a cluster's collectives: shared memory when every worker runs on this host, else
gRPC. Decided from the cluster spec alone, so every worker decides the same way; ``MIRRORLAB_TRANSPORT``
(``auto``, ``shm`` or ``grpc``) overrides it."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping, Sequence

__all__ = ["TRANSPORT_VAR", "choose_transport", "is_this_host"]

TRANSPORT_VAR = "MIRRORLAB_TRANSPORT"
_CHOICES = ("auto", "shm", "grpc")


def is_this_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, without port) is loopback or one of this host's names."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback or host in _own_addresses()
    except ValueError:
        return host == "localhost" or host in (socket.gethostname(), socket.getfqdn())


def choose_transport(addresses: Sequence[str], environ: Mapping[str, str] = os.environ) -> str:
    """``"shm"`` or ``"grpc"`` for a cluster whose workers listen on ``addresses`` (``host:port``)."""
    mode = environ.get(TRANSPORT_VAR, "") or "auto"
    if mode not in _CHOICES:
        raise ValueError(f"{TRANSPORT_VAR}={mode!r} is not one of {', '.join(_CHOICES)}. Fix: e.g. "
                         f"{TRANSPORT_VAR}=auto (shared memory when every worker is on this host).")
    if mode != "auto":
        return mode
    return "shm" if all(is_this_host(address.rsplit(":", 1)[0]) for address in addresses) else "grpc"


def _own_addresses() -> set[str]:
    """The addresses this host's name resolves to (no network traffic beyond the local resolver)."""
    try:
        return {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()
