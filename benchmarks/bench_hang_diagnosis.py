"""What the real backend's hang diagnosis costs (docs/diagnostics.md, "On a collective timeout").

1. In the steady state, every collective message passes ``DiagnosedTransport``: the added time per send+recv pair,
   measured against the same in-memory transport unwrapped, interleaved (repetition r of both before r + 1), with
   the min and median over repetitions and their ratio.
2. On a failure, one ping round to every peer: ``Heartbeats.probe`` over real gRPC on loopback to peers that answer
   (a silent peer costs exactly the probe's timeout by construction).

Run: ``python benchmarks/bench_hang_diagnosis.py [--calls 200000] [--repeats 7] [--peers 2]``. Never a timed test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import deque

from mirrorlab import errors
from mirrorlab.backend.diagnosed_transport import DiagnosedTransport
from mirrorlab.backend.grpc_transport import PeerNode
from mirrorlab.backend.liveness import Heartbeats
from mirrorlab.backend.ports import free_ports
from mirrorlab.collective.message import Fingerprint, Header, Message
from mirrorlab.collective.transport import Transport

_MESSAGE = Message(Header(1, Fingerprint("all_reduce", "float32", (4,), "SUM"), 0, 0, "bench.py:1"), b"")


class _Loopback(Transport):
    """Rank 0 of one: what it sends to itself it receives, with nothing else to time."""

    rank, size = 0, 1

    def __init__(self) -> None:
        self._box: deque = deque()

    def now(self) -> float:
        return time.monotonic()

    def send(self, dst: int, message: Message) -> None:
        self._box.append(message)

    def recv(self, src: int, deadline: float | None) -> Message:
        return self._box.popleft()

    def abort(self, error: errors.OpError) -> None:
        """Nothing to abort: this transport never fails."""

    @property
    def abort_error(self) -> errors.OpError | None:
        return None


def _seconds_per_pair(transport: Transport, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        transport.send(0, _MESSAGE)
        transport.recv(0, None)
    return (time.perf_counter() - start) / calls


def wrapper_overhead(calls: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per send+recv pair, bare and wrapped, for each repetition (interleaved)."""
    bare = _Loopback()
    wrapped = DiagnosedTransport(_Loopback(), lambda: [], lambda: "unused")
    times: dict[str, list[float]] = {"bare": [], "wrapped": []}
    for _ in range(repeats):
        times["bare"].append(_seconds_per_pair(bare, calls))
        times["wrapped"].append(_seconds_per_pair(wrapped, calls))
    return times


def probe_seconds(peers: int, repeats: int) -> list[float]:
    """Wall seconds of one ``probe`` from worker 0 to ``peers`` answering peers on loopback, per repetition."""
    names = [f"/job:worker/replica:0/task:{k}" for k in range(peers + 1)]
    addresses = [f"127.0.0.1:{p}" for p in free_ports(peers + 1)]
    nodes = [PeerNode(k, names, addresses, token="bench-probe") for k in range(peers + 1)]
    beats = [Heartbeats(node, 5.0, lambda: "not yet in a collective") for node in nodes]
    for node in nodes:
        node.start()
    try:
        beats[0].probe(1.0)  # connects the channels
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            beats[0].probe(1.0)
            times.append(time.perf_counter() - start)
        return times
    finally:
        for node in nodes:
            node.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--peers", type=int, default=2)
    args = parser.parse_args()
    overhead = wrapper_overhead(args.calls, args.repeats)
    for name, times in overhead.items():
        print(f"{name:8s} send+recv pair: min {min(times) * 1e9:7.0f} ns, "
              f"median {statistics.median(times) * 1e9:7.0f} ns")
    added = [w - b for b, w in zip(overhead["bare"], overhead["wrapped"])]
    print(f"added by DiagnosedTransport: median {statistics.median(added) * 1e9:.0f} ns per pair; wrapped/bare ratio "
          f"min {min(overhead['wrapped']) / min(overhead['bare']):.2f}, median "
          f"{statistics.median(overhead['wrapped']) / statistics.median(overhead['bare']):.2f}")
    probes = probe_seconds(args.peers, args.repeats)
    print(f"probe of {args.peers} answering peers on loopback: min {min(probes) * 1e3:.1f} ms, median "
          f"{statistics.median(probes) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
