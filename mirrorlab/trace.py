"""The collective event trace: one record per replica per collective instance, plus notes.

Notes record things worth diagnosing that are not collectives (e.g. ``mirrors_diverged``: an ON_WRITE
variable with aggregation NONE whose copies differ after a replica update, which TF accepts silently).
The simulator (virtual clock) and the real backend (wall clock) write the same JSON-lines format, so
``mirrorlab diagnose`` reads either. Serialization is canonical (sorted keys, fixed separators): the
same simulated run gives a byte-identical trace.

With ``Trace(record_values=True)`` each event also carries the step, the number of non-finite values the replica
contributed and a short digest of the result (``VALUE_FIELDS``), for the NaN and divergence checks of trace
analysis; without it those fields are absent and the text is unchanged.

``Trace(keep_last=N)`` holds only the last N events and the last N notes in memory (a long run's trace stays the same
size; the metadata then counts what was dropped), and ``stream_to(path)`` writes every event and note to a file as it
is added, so the whole trace survives however long the run.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

__all__ = ["CollectiveEvent", "TraceNote", "Trace", "TRACE_VERSION", "VALUE_FIELDS", "OPTIONAL_FIELDS", "FAULT_NOTE"]

TRACE_VERSION = 1
VALUE_FIELDS = ("step", "nonfinite", "digest")
OPTIONAL_FIELDS = (*VALUE_FIELDS, "algorithm")
"""Fields left out of an event's JSON when None (``algorithm``: the all-reduce algorithm that ran across workers)."""
FAULT_NOTE = "fault"
"""The note a simulator writes when an injected fault acts (details: ``effect`` and what it did)."""


class CollectiveEvent(NamedTuple):
    """One replica's part in one collective instance (a named tuple: every replica of every collective makes one, and
    a frozen dataclass costs six times as much to build)."""

    worker: int
    replica: int
    seq: int
    op: str
    detail: str
    dtype: str
    shape: list
    start: float
    end: float
    site: str
    status: str = "ok"
    error: str = ""
    step: int | None = None
    nonfinite: int | None = None
    digest: str | None = None
    algorithm: str | None = None

    def to_json(self) -> str:
        record = {k: v for k, v in self._asdict().items() if v is not None or k not in OPTIONAL_FIELDS}
        return json.dumps(record, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class TraceNote:
    """A non-collective finding: ``kind`` plus free-form JSON-able ``details``."""

    note: str
    worker: int
    time: float
    site: str
    details: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))


@dataclass
class Trace:
    """Events plus run metadata (seed, cluster shape); ``record_values`` asks collectives to add ``VALUE_FIELDS`` to
    their events (the metadata then says ``"values": true``); ``keep_last`` bounds what stays in memory (None: all)."""

    meta: dict = field(default_factory=dict)
    events: deque[CollectiveEvent] = field(default_factory=deque)
    notes: deque[TraceNote] = field(default_factory=deque)
    record_values: bool = False
    keep_last: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _stream: IO[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.keep_last is not None and self.keep_last < 1:
            raise ValueError(f"Trace keep_last must be a positive number of events or None (keep all); got "
                             f"{self.keep_last}")
        if self.record_values:
            self.meta["values"] = True
        self.events = deque(self.events, maxlen=self.keep_last)
        self.notes = deque(self.notes, maxlen=self.keep_last)

    def stream_to(self, path: str | Path) -> None:
        """Write the header now and every event and note from now on to ``path`` (in the order they are added);
        ``close()`` ends the file."""
        self._stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 - held open until close()
        self._stream.write(self._header() + "\n")

    def close(self) -> None:
        """Finish the streamed file, if any (idempotent)."""
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None

    def add(self, event: CollectiveEvent) -> None:
        with self._lock:
            self._append(self.events, event, "dropped_events")

    def add_note(self, note: TraceNote) -> None:
        with self._lock:
            self._append(self.notes, note, "dropped_notes")

    def _append(self, store: deque, record: CollectiveEvent | TraceNote, counter: str) -> None:
        if len(store) == store.maxlen:
            self.meta[counter] = self.meta.get(counter, 0) + 1
        store.append(record)
        if self._stream is not None:
            self._stream.write(record.to_json() + "\n")

    def __iter__(self) -> Iterator[CollectiveEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def to_jsonl(self) -> str:
        """Canonical text: a header line with the metadata, then one line per event, then the notes."""
        lines = [self._header(), *(e.to_json() for e in self.events), *(n.to_json() for n in self.notes)]
        return "\n".join(lines) + "\n"

    def _header(self) -> str:
        return json.dumps({"mirrorlab_trace": TRACE_VERSION, "meta": self.meta}, sort_keys=True, separators=(",", ":"))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_jsonl(), encoding="utf-8")

    @classmethod
    def from_jsonl(cls, text: str | Iterable[str]) -> "Trace":
        """Parse a trace written by ``to_jsonl``; rejects other formats with a clear error."""
        lines = [ln for ln in (text.splitlines() if isinstance(text, str) else text) if ln.strip()]
        if not lines:
            raise ValueError("empty trace: expected a mirrorlab trace header line")
        head = json.loads(lines[0])
        if not isinstance(head, dict) or head.get("mirrorlab_trace") != TRACE_VERSION:
            raise ValueError(f"not a mirrorlab trace (version {TRACE_VERSION}) header: {lines[0][:200]!r}")
        meta = dict(head.get("meta", {}))
        trace = cls(meta=meta, record_values=bool(meta.get("values")))
        for n, line in enumerate(lines[1:], start=2):
            try:
                record = json.loads(line)
                if "note" in record:
                    trace.notes.append(TraceNote(**record))
                else:
                    trace.events.append(CollectiveEvent(**record))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"trace line {n} is neither a collective event nor a note: {exc}") from exc
        return trace

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        return cls.from_jsonl(Path(path).read_text(encoding="utf-8"))
