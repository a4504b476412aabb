"""The data lane's handshake: both ends prove they hold the cluster token before a payload byte is read.

An HMAC-SHA256 challenge-response over constant-size frames, each read whole within a timeout: the listener
sends a random challenge; the connecting worker answers with its rank, its own challenge and the HMAC of both
challenges and both ranks; the listener checks it (``hmac.compare_digest``) and answers with its own HMAC, which
the connecting worker checks. The token never travels, and a recorded handshake is useless against new challenges.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct

from .lane_io import LaneClosed, recv_exactly

__all__ = ["LaneAuthError", "challenge", "answer_challenge", "HELLO_BYTES", "ANSWER_BYTES"]

_MAGIC = b"MLL1"
_NONCE = 32
_ANSWER = struct.Struct(f">4sI{_NONCE}s32s")  # magic, sender rank, its challenge, its proof
HELLO_BYTES = len(_MAGIC) + _NONCE
ANSWER_BYTES = _ANSWER.size


class LaneAuthError(ConnectionError):
    """The other end of a data lane did not prove it holds this cluster's token (or spoke something else)."""


def _proof(token: str, role: bytes, first: bytes, second: bytes, src: int, dst: int) -> bytes:
    message = role + first + second + struct.pack(">II", src, dst)
    return hmac.new(token.encode("utf-8"), message, hashlib.sha256).digest()


def challenge(sock: socket.socket, token: str, rank: int, size: int, timeout: float) -> int:
    """Listener's side: challenge the connecting worker; its rank once it proved the token, else
    ``LaneAuthError`` (``LaneClosed`` when it hung up or was too slow)."""
    nonce = secrets.token_bytes(_NONCE)
    sock.sendall(_MAGIC + nonce)
    magic, src, theirs, proof = _ANSWER.unpack(recv_exactly(sock, ANSWER_BYTES, timeout))
    if magic != _MAGIC:
        raise LaneAuthError(f"the client does not speak the data-lane protocol (it sent {magic!r})")
    if not 0 <= src < size or src == rank:
        raise LaneAuthError(f"the client claims rank {src}, not another worker of this {size}-worker cluster")
    if not hmac.compare_digest(proof, _proof(token, b"lane-client", nonce, theirs, src, rank)):
        raise LaneAuthError(f"the client claiming worker {src} does not hold this cluster's token")
    sock.sendall(_proof(token, b"lane-server", theirs, nonce, src, rank))
    return src


def answer_challenge(sock: socket.socket, token: str, rank: int, peer: int, timeout: float) -> None:
    """Connecting side (worker ``rank`` to worker ``peer``): answer the challenge and check the listener's proof;
    ``LaneAuthError`` when it does not hold the token."""
    hello = recv_exactly(sock, HELLO_BYTES, timeout)
    if hello[:len(_MAGIC)] != _MAGIC:
        raise LaneAuthError(f"worker {peer}'s lane port does not speak the data-lane protocol")
    nonce, mine = bytes(hello[len(_MAGIC):]), secrets.token_bytes(_NONCE)
    sock.sendall(_ANSWER.pack(_MAGIC, rank, mine, _proof(token, b"lane-client", nonce, mine, rank, peer)))
    try:
        proof = recv_exactly(sock, 32, timeout)
    except LaneClosed as exc:
        raise LaneAuthError(f"worker {peer} refused this worker's data lane ({exc}): are both started with the "
                            "same MIRRORLAB_CLUSTER_TOKEN?") from None
    if not hmac.compare_digest(bytes(proof), _proof(token, b"lane-server", mine, nonce, rank, peer)):
        raise LaneAuthError(f"worker {peer}'s lane port answered without this cluster's token")
