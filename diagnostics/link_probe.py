"""Timed transfers to a peer's preflight probe: a few small messages (latency) and a bulk transfer of a few MiB
(bandwidth), as ``(bytes, seconds)`` samples that ``link_model.fit_link`` turns into alpha and beta."""

from __future__ import annotations

import time

import grpc

from mirrorlab.diagnostics.preflight_server import SINK_METHOD

__all__ = ["PING_BYTES", "CHUNK_BYTES", "time_transfers"]

PING_BYTES = 64
#: The bulk transfer is sent in chunks of this size, well under the probe's 1 MiB message limit.
CHUNK_BYTES = 256 * 1024
_PINGS = 5


def time_transfers(channel: grpc.Channel, timeout_s: float, bulk_bytes: int) -> list[tuple[int, float]]:
    """``(bytes, seconds)`` of each message sent: ``_PINGS`` small ones, then ``bulk_bytes`` in chunks (none when
    ``bulk_bytes`` is 0). The whole stage has the ``timeout_s`` deadline: a slow link returns the samples it got by
    then. The first call warms the channel, untimed; a peer that stops answering raises ``grpc.RpcError``."""
    sink = channel.unary_unary(SINK_METHOD)
    ping, chunk = bytes(PING_BYTES), bytes(CHUNK_BYTES)
    give_up = time.monotonic() + timeout_s
    sink(ping, timeout=timeout_s)
    sizes = [PING_BYTES] * _PINGS + [CHUNK_BYTES] * (bulk_bytes // CHUNK_BYTES)
    samples: list[tuple[int, float]] = []
    for size in sizes:
        remaining = give_up - time.monotonic()
        if remaining <= 0:
            break
        started = time.perf_counter()
        try:
            sink(ping if size == PING_BYTES else chunk, timeout=remaining)
        except grpc.RpcError as err:
            if err.code() is grpc.StatusCode.DEADLINE_EXCEEDED and samples:
                break
            raise
        samples.append((size, time.perf_counter() - started))
    return samples
