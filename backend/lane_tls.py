"""Mutual TLS for the data lanes from the same files as gRPC's (``tls.py``): each end presents this worker's
certificate and checks the other's against the cluster's CA (and, connecting, that it names the peer's host)."""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from .tls import TlsFiles

__all__ = ["lane_contexts"]


def lane_contexts(tls: TlsFiles) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The (listening, connecting) SSL contexts of ``tls``'s certificate, key and CA."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    with tempfile.TemporaryDirectory(prefix="mirrorlab-tls-") as folder:  # ssl loads a chain from files only
        chain = Path(folder) / "chain.pem"
        chain.touch(mode=0o600)
        chain.write_bytes(tls.cert + b"\n" + tls.key)
        for context in (server, client):
            context.load_verify_locations(cadata=tls.ca.decode("ascii"))
            context.load_cert_chain(os.fspath(chain))
    return server, client
