"""Desync: workers at the same collective position (sequence number) in different collectives.

Different call sites or ops at one position mean the workers ran different code (a collective under
``if is_chief:``); the same op at the same call site with another dtype or shape is a near miss: the code agrees but
the data does not. Only the first diverging position is reported, since every later one follows from it.
"""

from __future__ import annotations

from math import prod

from mirrorlab.collective.communicator import FIX_DESYNC
from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.trace_load import Call, LoadedTrace
from mirrorlab.diagnostics.trace_verdict import majority, workers_text

__all__ = ["DIFFERENT_COLLECTIVES", "DTYPE_MISMATCH", "SHAPE_MISMATCH", "check_desync"]

DIFFERENT_COLLECTIVES = register_code("ML-TRC-001", "workers ran different collectives at the same position")
DTYPE_MISMATCH = register_code("ML-TRC-002", "workers passed different dtypes to the same collective")
SHAPE_MISMATCH = register_code("ML-TRC-003", "workers passed different shapes to the same collective (a near miss)")


def check_desync(trace: LoadedTrace) -> list[Finding]:
    """The first position where the workers' collectives differ, said with each side's call site."""
    by_seq: dict[int, list[Call]] = {}
    for calls in trace.calls().values():
        for seq, call in calls.items():
            by_seq.setdefault(seq, []).append(call)
    diverging = [seq for seq in sorted(by_seq) if len({c.signature() for c in by_seq[seq]}) > 1]
    if not diverging:
        return []
    return [_finding(trace, by_seq[diverging[0]], len(diverging) - 1)]


def _finding(trace: LoadedTrace, calls: list[Call], later: int) -> Finding:
    seq = calls[0].seq
    sides: dict[tuple, list[Call]] = {}
    for call in calls:
        sides.setdefault((call.signature(), call.site), []).append(call)
    verdict = majority([[c.worker for c in side] for side in sides.values()])
    ordered = sorted(sides.values(), key=lambda side: (-len(side), side[0].worker))
    said = [f"{workers_text(c.worker for c in side)} called {side[0].describe()} at {side[0].site}" for side in ordered]
    message = f"At collective #{seq}, {said[0]}, but " + "; ".join(said[1:]) + "."
    firsts = [side[0].first for side in ordered]
    if len({(e.op, e.detail) for e in firsts}) > 1 or len({e.site for e in firsts}) > 1:
        code, why = DIFFERENT_COLLECTIVES, ("Different call sites at the same position mean the workers ran different "
                                            "code: a collective that only some workers call, or calls in another order.")
    elif len({e.dtype for e in firsts}) > 1:
        code, why = DTYPE_MISMATCH, "Same op at the same call site with different dtypes: the data differs in dtype."
    else:
        code, why = SHAPE_MISMATCH, _shape_words(firsts)
    suspects = verdict.suspects or tuple(c.worker for c in calls)
    evidence = [f"worker {c.worker} ({trace.worker_label(c.worker)}): {c.describe()} #{seq} at {c.site}"
                + ("" if c.ok else f" -> {c.short_error}") for c in sorted(calls, key=lambda c: c.worker)]
    if later:
        evidence.append(f"{later} later position{'s' if later > 1 else ''} also differ (consequences of this one)")
    return Finding(code, Severity.ERROR, tuple(trace.worker_label(w) for w in suspects),
                   f"{message} {why} {verdict.sentence()}", "\n".join(evidence), FIX_DESYNC.removeprefix("Fix: "))


def _shape_words(events: list) -> str:
    counts = sorted({_elements(e.shape) for e in events}, key=lambda n: (n is None, n))
    if len(counts) == 1 and counts[0] is not None:
        return (f"Same op at the same call site with the same {counts[0]} elements in different shapes: a reshape "
                "or layout that differs between workers (a near miss).")
    listed = ", ".join("?" if n is None else str(n) for n in counts)
    return (f"Same op at the same call site with different shapes ({listed} elements): the data differs between "
            "workers, e.g. a last partial batch or a per-worker input size (a near miss).")


def _elements(shape: list) -> int | None:
    if all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return prod(shape)
    return None
