"""Reading collective traces for analysis: one file or several (one per worker), tolerating damage.

A trace is the JSON-lines text of ``mirrorlab.trace.Trace.to_jsonl`` (the simulator's, or a real worker's dump).
Unreadable files, corrupt or truncated lines, files from different runs and workers without a trace become
findings; what can be read is kept, so a partial buffer still gets analysed. Nothing here raises on bad input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mirrorlab.collective.message import Fingerprint
from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.trace_verdict import workers_text
from mirrorlab.trace import TRACE_VERSION, CollectiveEvent, TraceNote

__all__ = [
    "UNREADABLE_TRACE", "DAMAGED_LINES", "MISSING_WORKERS", "MIXED_RUNS",
    "Call", "LoadedTrace", "describe", "task_label", "load_trace_files", "load_trace_texts",
]

UNREADABLE_TRACE = register_code("ML-TRC-100", "a trace file cannot be read or is not a mirrorlab trace",
                                 invalid_config=True)
DAMAGED_LINES = register_code("ML-TRC-101", "a trace file has corrupt or truncated lines (a partial buffer)")
MISSING_WORKERS = register_code("ML-TRC-102", "the traces given cover only some workers")
MIXED_RUNS = register_code("ML-TRC-103", "the trace files come from different runs")

MAX_LINE_CHARS = 1 << 20  # a longer line is damage, not an event
MAX_WORKERS = 1 << 16  # a larger worker count or index is damage, not a cluster
_SHOWN_LINES = 5
_SHORT_ERROR = 110
_INT, _NUM, _STR = (int,), (int, float), (str,)
_EVENT_FIELDS = {"worker": _INT, "replica": _INT, "seq": _INT, "op": _STR, "detail": _STR, "dtype": _STR,
                 "shape": (list,), "start": _NUM, "end": _NUM, "site": _STR, "status": _STR, "error": _STR}
_EVENT_OPTIONAL = {"step": _INT, "nonfinite": _INT, "digest": _STR, "algorithm": _STR}
_NOTE_FIELDS = {"note": _STR, "worker": _INT, "time": _NUM, "site": _STR, "details": (dict,)}
_RUN_KEYS = ("seed", "workers", "devices_per_worker", "tasks", "clock")


def describe(event: CollectiveEvent) -> str:
    """E.g. ``all_reduce(SUM) float32[4]``, the words the collectives' own errors use."""
    return Fingerprint(event.op, event.dtype, tuple(event.shape), event.detail).describe()


@dataclass(frozen=True)
class Call:
    """One worker's part in collective instance ``seq``: its replicas' events folded into one."""

    worker: int
    seq: int
    events: tuple[CollectiveEvent, ...]

    @property
    def first(self) -> CollectiveEvent:
        return self.events[0]

    @property
    def ok(self) -> bool:
        return all(e.status == "ok" for e in self.events)

    @property
    def error(self) -> str:
        return next((e.error for e in self.events if e.status != "ok"), "")

    @property
    def short_error(self) -> str:
        """The error's class and the start of its first line, for evidence lines."""
        error = self.error
        return error if len(error) <= _SHORT_ERROR else error[:_SHORT_ERROR - 3] + "..."

    @property
    def error_class(self) -> str:
        return self.error.split(":", 1)[0]

    @property
    def site(self) -> str:
        return self.first.site

    def describe(self) -> str:
        return describe(self.first)

    def signature(self) -> tuple:
        """What every worker must agree on (an all_gather's first dimension may differ)."""
        e = self.first
        shape = e.shape[1:] if e.op == "all_gather" else e.shape
        return e.op, e.detail, e.dtype, json.dumps(shape)


@dataclass
class LoadedTrace:
    """The readable part of one or more trace files, and the findings about the files themselves."""

    meta: dict = field(default_factory=dict)
    events: list[CollectiveEvent] = field(default_factory=list)
    notes: list[TraceNote] = field(default_factory=list)
    workers: list[int] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def worker_label(self, worker: int) -> str:
        """The task name (``chief:0``, ``worker:1``) of trace worker ``worker``, for ``Finding.workers``."""
        tasks = self.meta.get("tasks")
        if isinstance(tasks, list) and worker < len(tasks) and isinstance(tasks[worker], str):
            return task_label(tasks[worker], worker)
        return f"worker:{worker}"

    def calls(self) -> dict[int, dict[int, Call]]:
        """``calls()[worker][seq]``: each analysed worker's collectives (every worker present, maybe empty)."""
        grouped: dict[tuple[int, int], list[CollectiveEvent]] = {}
        for e in self.events:
            grouped.setdefault((e.worker, e.seq), []).append(e)
        out: dict[int, dict[int, Call]] = {w: {} for w in self.workers}
        for (w, seq), events in sorted(grouped.items()):
            if w in out:
                out[w][seq] = Call(w, seq, tuple(sorted(events, key=lambda e: e.replica)))
        return out


def task_label(task: str, worker: int) -> str:
    """``worker:1`` for ``/job:worker/replica:0/task:1``; ``worker:<worker>`` when ``task`` is no such name."""
    parts = dict(p.split(":", 1) for p in task.strip("/").split("/") if ":" in p)
    if "job" in parts and "task" in parts:
        return f"{parts['job']}:{parts['task']}"
    return f"worker:{worker}"


def load_trace_files(paths: Iterable[str | Path]) -> LoadedTrace:
    """Read every trace file in ``paths``; unreadable ones become ``ML-TRC-100`` findings."""
    texts: list[tuple[str, str]] = []
    unreadable: list[Finding] = []
    for path in map(Path, paths):
        try:
            texts.append((str(path), path.read_bytes().decode("utf-8", errors="replace")))
        except OSError as exc:
            unreadable.append(_unreadable(str(path), exc.strerror or str(exc)))
    loaded = load_trace_texts(texts)
    loaded.findings[:0] = unreadable
    return loaded


def load_trace_texts(sources: Sequence[tuple[str, str]]) -> LoadedTrace:
    """Parse ``(name, text)`` pairs as trace files and merge them (identical duplicate events count once)."""
    loaded = LoadedTrace()
    metas: list[tuple[str, dict]] = []
    seen: set[str] = set()
    for name, text in sources:
        meta = _parse_one(name, text, loaded, seen)
        if meta is not None:
            metas.append((name, meta))
    if metas:
        loaded.meta = metas[0][1]
        _check_same_run(metas, loaded)
    _settle_workers(metas, loaded)
    return loaded


def _parse_one(name: str, text: str, loaded: LoadedTrace, seen: set[str]) -> dict | None:
    lines = text.split("\n")
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        loaded.findings.append(_unreadable(name, "the file is empty"))
        return None
    head = _json_object(numbered[0][1])
    if head is None or head.get("mirrorlab_trace") != TRACE_VERSION or not isinstance(head.get("meta", {}), dict):
        loaded.findings.append(_unreadable(
            name, f"its first line is not a mirrorlab trace (version {TRACE_VERSION}) header: "
                  f"{numbered[0][1][:120]!r}"))
        return None
    meta = dict(head.get("meta", {}))
    damaged: list[tuple[int, str]] = []
    for n, line in numbered[1:]:
        why = _add_record(line, loaded, seen, meta)
        if why:
            truncated = n == len(lines) and not text.endswith("\n")
            damaged.append((n, "cut off (the buffer ends mid-line)" if truncated else why))
    if damaged:
        shown = "\n".join(f"line {n}: {why}" for n, why in damaged[:_SHOWN_LINES])
        more = f"\n... and {len(damaged) - _SHOWN_LINES} more" if len(damaged) > _SHOWN_LINES else ""
        loaded.findings.append(Finding(
            DAMAGED_LINES, Severity.WARNING, (),
            f"{name}: {len(damaged)} of {len(numbered) - 1} records could not be read and were skipped",
            shown + more,
            "Analyse the complete trace if there is one (a worker killed while writing leaves a partial buffer); "
            "findings below rest on the records that could be read."))
    return meta


def _json_object(line: str) -> dict | None:
    if len(line) > MAX_LINE_CHARS:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        return None
    return value if isinstance(value, dict) else None


def _add_record(line: str, loaded: LoadedTrace, seen: set[str], meta: dict) -> str:
    """Add one event or note; returns why the line was skipped, or "" when it was taken."""
    record = _json_object(line)
    if record is None:
        return "not a JSON object"
    is_note = "note" in record
    why = _type_errors(record, _NOTE_FIELDS if is_note else _EVENT_FIELDS, {} if is_note else _EVENT_OPTIONAL)
    if why:
        return why
    workers = meta.get("workers")
    limit = workers if _is(workers, _INT) and 1 <= workers <= MAX_WORKERS else MAX_WORKERS
    if not 0 <= record["worker"] < limit:
        return f"worker {record['worker']} is not a worker of this {limit}-worker trace"
    if not is_note and (record["seq"] < 1 or record["replica"] < 0):
        return "seq must count from 1 and replica from 0"
    key = json.dumps(record, sort_keys=True)
    if key in seen:
        return ""
    seen.add(key)
    if is_note:
        loaded.notes.append(TraceNote(**{k: record[k] for k in _NOTE_FIELDS}))
    else:
        known = {**_EVENT_FIELDS, **_EVENT_OPTIONAL}
        loaded.events.append(CollectiveEvent(**{k: v for k, v in record.items() if k in known}))
    return ""


def _type_errors(record: dict, required: dict, optional: dict) -> str:
    for key, types in required.items():
        if key not in record:
            return f"field {key!r} is missing"
        if not _is(record[key], types):
            return f"field {key!r} is a {type(record[key]).__name__}, not {'/'.join(t.__name__ for t in types)}"
    for key, types in optional.items():
        if record.get(key) is not None and not _is(record[key], types):
            return f"field {key!r} is a {type(record[key]).__name__}, not {'/'.join(t.__name__ for t in types)}"
    return ""


def _is(value: object, types: tuple) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def _check_same_run(metas: list[tuple[str, dict]], loaded: LoadedTrace) -> None:
    first_name, first = metas[0]
    for name, meta in metas[1:]:
        differs = [k for k in _RUN_KEYS if meta.get(k) != first.get(k)]
        if differs:
            loaded.findings.append(Finding(
                MIXED_RUNS, Severity.WARNING, (),
                f"{name} and {first_name} describe different runs ({', '.join(differs)} differ); "
                f"the analysis uses {first_name}'s",
                "\n".join(f"{k}: {first.get(k)!r} in {first_name}, {meta.get(k)!r} in {name}" for k in differs),
                "Pass the trace files of one run only (one per worker, or the simulator's single file)."))


def _settle_workers(metas: list[tuple[str, dict]], loaded: LoadedTrace) -> None:
    """Which workers the analysis covers: all of the run's, unless per-worker files (``meta.worker``) leave some out."""
    seen = {e.worker for e in loaded.events} | {n.worker for n in loaded.notes}
    expected = loaded.meta.get("workers")
    if not _is(expected, _INT) or not 1 <= expected <= MAX_WORKERS:
        expected = max(seen, default=-1) + 1
    per_worker = [m.get("worker") for _, m in metas]
    if per_worker and all(_is(w, _INT) for w in per_worker):
        covered = set(per_worker) | seen
    else:
        covered = set(range(expected)) if metas else seen
    loaded.workers = sorted(w for w in covered if 0 <= w < expected)
    missing = [w for w in range(expected) if w not in covered]
    if missing and loaded.workers:
        loaded.findings.append(Finding(
            MISSING_WORKERS, Severity.WARNING, tuple(loaded.worker_label(w) for w in missing),
            f"no trace from {workers_text(missing)} of {expected}: the analysis covers "
            f"{workers_text(loaded.workers)} only",
            f"trace files given: {len(metas)}; workers with a trace: {', '.join(map(str, loaded.workers))}",
            "Collect every worker's trace file; hangs and desyncs involving the missing workers cannot be "
            "placed without them."))


def _unreadable(name: str, why: str) -> Finding:
    return Finding(UNREADABLE_TRACE, Severity.ERROR, (), f"cannot use {name}: {why}", name,
                   "Pass trace files written by Trace.save / RunResult.trace.to_jsonl() (a JSON header line "
                   '{"mirrorlab_trace": 1, ...}, then one JSON record per line).')
