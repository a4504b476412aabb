"""The gRPC channel and server options of the collective backend, in one place (issue 29's tuning).

Messages are capped at one stream piece (``wire.CHUNK_BYTES`` plus its flag and length), so gRPC refuses
anything longer before it is read. Flow-control and framing options were measured and left at gRPC's
defaults (no gain beyond noise): docs/backend.md, "gRPC path speed". Keepalive options are added by
``keepalive.py`` where the channels and the server are made.
"""

from __future__ import annotations

from . import wire

__all__ = ["channel_options", "server_options"]

_PIECE_BYTES = wire.CHUNK_BYTES + wire.PIECE_OVERHEAD


def channel_options() -> list[tuple[str, int]]:
    """Options for every channel to a peer (and, with ``server_options``' extras, for the server)."""
    return [("grpc.max_send_message_length", _PIECE_BYTES),
            ("grpc.max_receive_message_length", _PIECE_BYTES)]


def server_options() -> list[tuple[str, int]]:
    """``channel_options`` plus what only a server needs: a taken port fails instead of being shared."""
    return [*channel_options(), ("grpc.so_reuseport", 0)]
