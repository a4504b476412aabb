"""Collective traces as timelines: the Chrome trace event format (JSON that Perfetto and chrome://tracing open).

Input is what ``trace_load`` reads (the simulator's trace, or the backend's per-worker flight-recorder dumps).
Each worker is a process (``pid`` = worker + 1) with one thread per replica (``tid`` = replica + 1) holding its
collectives as complete (``X``) spans, and a thread ``tid`` 0 holding the worker's notes and the faults the
simulator injected as instant (``i``) events. Times are microseconds: virtual seconds for the simulator, seconds
since the earliest record for wall-clock dumps. Output is deterministic: the same trace gives the same bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mirrorlab.diagnostics.findings import Finding
from mirrorlab.diagnostics.trace_load import UNREADABLE_TRACE, LoadedTrace, describe, load_trace_files
from mirrorlab.trace import FAULT_NOTE, CollectiveEvent, TraceNote

__all__ = ["Timeline", "export_loaded", "export_trace_files"]

_MICROS = 1e6
_NOTES_TID = 0
_NOT_FINITE = "its time is not a finite number"
_MAX_DEPTH = 32  # deeper JSON in a record's details is summarised, so writing the document can never recurse out


@dataclass
class Timeline:
    """A Chrome trace (``document``), the findings about its input, what could not be placed on it, and whether
    any input file was a readable trace at all."""

    document: dict
    findings: list[Finding] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    readable: bool = True

    @property
    def spans(self) -> int:
        return sum(1 for e in self.document["traceEvents"] if e["ph"] == "X")

    def to_json(self) -> str:
        """Canonical text (sorted keys, no NaN: every number in the document is finite)."""
        return json.dumps(self.document, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"


def export_trace_files(paths: Iterable[str | Path]) -> Timeline:
    """Load trace files tolerantly (damage becomes findings) and convert what could be read."""
    paths = list(paths)
    timeline = export_loaded(load_trace_files(paths))
    timeline.readable = sum(f.code == UNREADABLE_TRACE for f in timeline.findings) < len(paths)
    return timeline


def export_loaded(loaded: LoadedTrace) -> Timeline:
    """Convert a loaded trace; records with non-finite times are left off and listed in ``Timeline.skipped``."""
    clock = loaded.meta.get("clock")
    events = [e for e in loaded.events if _timed(e)]
    notes = [n for n in loaded.notes if _finite(n.time)]
    skipped = [f"{describe(e)} seq {e.seq} (worker {e.worker}, replica {e.replica}): {_NOT_FINITE}"
               for e in loaded.events if not _timed(e)]
    skipped += [f"note {n.note!r} of worker {n.worker}: {_NOT_FINITE}" for n in loaded.notes if not _finite(n.time)]
    times = [t for e in events for t in (e.start, e.end)] + [n.time for n in notes]
    origin = 0.0 if clock == "virtual" or not times else min(times)
    replicas = sorted({(e.worker, e.replica) for e in events})
    workers = sorted(set(loaded.workers) | {w for w, _ in replicas} | {n.worker for n in notes})
    trace_events = [*_track_names(loaded, workers, replicas),
                    *(_span(e, origin) for e in sorted(events, key=_event_order)),
                    *(_instant(n, origin) for n in sorted(notes, key=_note_order))]  # stable: load order breaks ties
    other = {"source": "mirrorlab trace export", "clock": clock if isinstance(clock, str) else "unknown",
             "time_origin_s": origin, "meta": _json_safe(loaded.meta),
             "input_findings": [f"{f.code} {f.message}" for f in loaded.findings], "skipped": skipped}
    document = {"traceEvents": trace_events, "displayTimeUnit": "ms", "otherData": other}
    return Timeline(document, list(loaded.findings), skipped)


def _timed(e: CollectiveEvent) -> bool:
    return _finite(e.start) and _finite(e.end)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value * _MICROS)
    except OverflowError:  # an int too large for a float
        return False


def _event_order(e: CollectiveEvent) -> tuple:
    return e.worker, e.replica, e.start, e.end, e.seq, e.op, e.detail, e.status


def _note_order(n: TraceNote) -> tuple:
    return n.worker, n.time, n.note, n.site


def _track_names(loaded: LoadedTrace, workers: list[int], replicas: list[tuple[int, int]]) -> list[dict]:
    """Metadata events naming each worker's process and its notes/replica threads, in worker order."""
    out: list[dict] = []
    for w in workers:
        label = loaded.worker_label(w)
        out += [_meta("process_name", w, None, name=f"worker {w} ({label})"),
                _meta("process_sort_index", w, None, sort_index=w),
                _meta("thread_name", w, _NOTES_TID, name="notes and faults"),
                _meta("thread_sort_index", w, _NOTES_TID, sort_index=_NOTES_TID)]
    for w, r in replicas:
        out += [_meta("thread_name", w, r + 1, name=f"replica {r}"),
                _meta("thread_sort_index", w, r + 1, sort_index=r + 1)]
    return out


def _meta(kind: str, worker: int, tid: int | None, **args: object) -> dict:
    event = {"ph": "M", "name": kind, "pid": worker + 1, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def _span(e: CollectiveEvent, origin: float) -> dict:
    args = {"op": e.op, "detail": e.detail, "dtype": e.dtype, "shape": _json_safe(e.shape), "seq": e.seq,
            "site": e.site, "status": e.status}
    if e.error:
        args["error"] = e.error
    args.update({k: v for k, v in (("step", e.step), ("nonfinite", e.nonfinite), ("digest", e.digest),
                                   ("algorithm", e.algorithm)) if v is not None})
    ts = (e.start - origin) * _MICROS
    span = {"ph": "X", "name": describe(e), "cat": "collective" if e.status == "ok" else "collective,error",
            "pid": e.worker + 1, "tid": e.replica + 1, "ts": ts, "dur": max((e.end - origin) * _MICROS - ts, 0.0),
            "args": args}
    if e.status != "ok":
        span["cname"] = "terrible"  # chrome://tracing's reserved red
    return span


def _instant(n: TraceNote, origin: float) -> dict:
    return {"ph": "i", "s": "t", "name": n.note, "cat": "fault" if n.note == FAULT_NOTE else "note",
            "pid": n.worker + 1, "tid": _NOTES_TID, "ts": (n.time - origin) * _MICROS,
            "args": {"site": n.site, **_json_safe(n.details)}}


def _json_safe(value: object, depth: int = 0) -> object:
    """``value`` with non-finite numbers as strings (strict JSON has no NaN) and nesting below ``_MAX_DEPTH``
    summarised."""
    if isinstance(value, (dict, list)) and depth >= _MAX_DEPTH:
        return "<nested too deeply to export>"
    if isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v, depth + 1) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _finite(value):
        return str(value)  # NaN, infinity, or an int too large for a float
    return value
