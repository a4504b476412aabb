"""Each real worker's flight recorder: its last collectives in the simulator's trace format
(``mirrorlab/trace.py``), written to a file when the worker fails and whenever it gets SIGUSR1, so
``mirrorlab diagnose`` can read what every worker was doing."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
from collections import deque

from mirrorlab.trace import Trace

__all__ = ["FlightRecorder", "RECORDER_DIR_VAR"]

RECORDER_DIR_VAR = "MIRRORLAB_FLIGHT_RECORDER_DIR"


class FlightRecorder(Trace):
    """A trace that keeps only the last ``capacity`` collective events."""

    def __init__(self, meta: dict, capacity: int = 1000) -> None:
        super().__init__(meta=meta)
        self.events = deque(maxlen=capacity)  # type: ignore[assignment]

    def completed_at(self, seq: int, site: str) -> float | None:
        """When this worker last completed collective ``seq`` called at ``site`` (the trace's clock: the transport's),
        or None once the recorder no longer holds it. Groups number their collectives apart, so with several
        strategies an event of another group at the same number and site may answer: the most recent one does."""
        with self._lock:
            return next((e.end for e in reversed(self.events) if e.seq == seq and e.site == site and e.status == "ok"),
                        None)

    def path(self) -> str:
        """``$MIRRORLAB_FLIGHT_RECORDER_DIR`` (default: the temp dir) / ``mirrorlab-flight-<task>-<pid>.jsonl``."""
        folder = os.environ.get(RECORDER_DIR_VAR) or tempfile.gettempdir()
        task = str(self.meta.get("task", "worker")).strip("/").replace("/", "_").replace(":", "-")
        return os.path.join(folder, f"mirrorlab-flight-{task}-{os.getpid()}.jsonl")

    def dump(self, why: str) -> str:
        """Write the recorder to ``path()`` (atomically: readers never see half a file) and say so on stderr;
        returns the path."""
        with self._lock:
            snapshot = Trace(meta=dict(self.meta, dumped_because=why), events=list(self.events),
                             notes=list(self.notes))
        path = self.path()
        try:
            snapshot.save(path + ".partial")
            os.replace(path + ".partial", path)
        except OSError as exc:
            print(f"mirrorlab: could not write the flight recorder to {path}: {exc}. Fix: set {RECORDER_DIR_VAR} "
                  "to a writable folder.", file=sys.stderr)
            return path
        print(f"mirrorlab: flight recorder ({len(snapshot)} events, {why}) written to {path}", file=sys.stderr)
        return path

    def dump_on_sigusr1(self) -> None:
        """Dump on every SIGUSR1 (only from the main thread, and only if nobody else handles SIGUSR1)."""
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL:
            signal.signal(signal.SIGUSR1, lambda sig, frame: self.dump("SIGUSR1"))
