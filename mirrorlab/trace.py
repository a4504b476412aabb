"""The collective event trace: one record per replica per collective instance.

The simulator (virtual clock) and the real backend (wall clock) write the same JSON-lines format, so
``mirrorlab diagnose`` reads either. Serialization is canonical (sorted keys, fixed separators): the
same simulated run gives a byte-identical trace.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["CollectiveEvent", "Trace", "TRACE_VERSION"]

TRACE_VERSION = 1


@dataclass(frozen=True)
class CollectiveEvent:
    """One replica's part in one collective instance."""

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

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))


@dataclass
class Trace:
    """An append-only list of events plus run metadata (seed, cluster shape)."""

    meta: dict = field(default_factory=dict)
    events: list[CollectiveEvent] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, event: CollectiveEvent) -> None:
        with self._lock:
            self.events.append(event)

    def __iter__(self) -> Iterator[CollectiveEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def for_worker(self, worker: int) -> list[CollectiveEvent]:
        return [e for e in self.events if e.worker == worker]

    def to_jsonl(self) -> str:
        """Canonical text: a header line with the metadata, then one line per event."""
        head = json.dumps({"mirrorlab_trace": TRACE_VERSION, "meta": self.meta}, sort_keys=True,
                          separators=(",", ":"))
        return "\n".join([head, *(e.to_json() for e in self.events)]) + "\n"

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
        trace = cls(meta=dict(head.get("meta", {})))
        for n, line in enumerate(lines[1:], start=2):
            try:
                trace.events.append(CollectiveEvent(**json.loads(line)))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"trace line {n} is not a collective event: {exc}") from exc
        return trace

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        return cls.from_jsonl(Path(path).read_text(encoding="utf-8"))
