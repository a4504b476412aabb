"""Optional TLS between workers, from certificate files: every worker presents its certificate and checks its
peers' against the cluster's CA (mutual TLS), on top of the cluster token."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = ["TlsFiles", "TLS_VARS"]

TLS_VARS = ("MIRRORLAB_TLS_CERT", "MIRRORLAB_TLS_KEY", "MIRRORLAB_TLS_CA")


@dataclass(frozen=True)
class TlsFiles:
    """This worker's certificate chain and private key, and the CA that signed every worker's certificate
    (PEM bytes, read once)."""

    cert: bytes
    key: bytes
    ca: bytes

    @staticmethod
    def from_environ(environ: Mapping[str, str]) -> "TlsFiles | None":
        """The files named by ``MIRRORLAB_TLS_CERT/KEY/CA``: all three, or None when none is set."""
        paths = {name: environ.get(name, "") for name in TLS_VARS}
        if not any(paths.values()):
            return None
        missing = [name for name, path in paths.items() if not path]
        if missing:
            raise ValueError(f"TLS needs all of {', '.join(TLS_VARS)}; not set: {', '.join(missing)}. Fix: set "
                             "all three (this worker's certificate and key, and the cluster's CA) or none.")
        return TlsFiles(*(_read(name, path) for name, path in paths.items()))

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca,
                                           require_client_auth=True)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.cert)


def _read(name: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{name}={path!r} cannot be read ({exc.strerror}). Fix: point it at a PEM file this "
                         "worker can read.") from None
