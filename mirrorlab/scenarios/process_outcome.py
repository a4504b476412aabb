"""The outcome of a scenario run on real worker processes, in the shape the checks read from a simulated run: each
worker's returned value or error, the errors in the order the workers ended, and a report for people."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["WorkerProcessError", "ProcessEnded", "WorkerEnd", "ProcessRun", "class_names"]


class WorkerProcessError(Exception):
    """An error a worker process reported: its class hierarchy's names and its text (notes included)."""

    def __init__(self, classes: list[str], message: str) -> None:
        super().__init__(message)
        self.classes = tuple(classes)


class ProcessEnded(Exception):
    """A worker process that ended without reporting an outcome: killed by a signal, or stopped by the runner."""


def class_names(error: BaseException) -> tuple[str, ...]:
    """The names of ``error``'s class hierarchy (a worker process's own, for the error it reported)."""
    if isinstance(error, WorkerProcessError):
        return error.classes
    return tuple(cls.__name__ for cls in type(error).__mro__)


@dataclass
class WorkerEnd:
    """How one worker process ended: its exit status (negative: the signal), when, and its output's last lines."""

    returncode: int | None
    ended_at: float
    result: Path
    log_tail: str
    stopped_by_runner: str = ""

    def outcome(self, worker: int) -> Any:
        """The worker's returned value, or the error it ended with."""
        if self.result.exists():
            record = json.loads(self.result.read_text(encoding="utf-8"))
            if "error" in record:
                return WorkerProcessError(record["error"]["classes"], record["error"]["message"])
            return record["returned"]
        code = self.returncode or 0
        how = self.stopped_by_runner or (f"was killed by {signal.Signals(-code).name}" if code < 0
                                         else f"exited with status {code}")
        return ProcessEnded(f"worker {worker}'s process {how} without reporting an outcome; its last output:\n"
                            f"{self.log_tail or '(none)'}")


class ProcessRun(list):
    """Each worker's returned value or error, indexed by worker, from one run of real processes."""

    def __init__(self, ends: list[WorkerEnd], wall_time: float, notes: list[str]) -> None:
        super().__init__(end.outcome(w) for w, end in enumerate(ends))
        self.ends = ends
        self.wall_time = wall_time
        self.notes = notes

    @property
    def errors(self) -> dict[int, BaseException]:
        """Each failed worker's error, the first to end first."""
        failed = [w for w, value in enumerate(self) if isinstance(value, BaseException)]
        return {w: self[w] for w in sorted(failed, key=lambda w: self.ends[w].ended_at)}

    @property
    def ok(self) -> bool:
        return not self.errors

    def values(self) -> list[Any]:
        """The returned values; raises the first error when a worker failed."""
        for error in self.errors.values():
            raise error
        return list(self)

    def report(self) -> str:
        """One line per worker (its outcome and exit status), the network rules applied and the wall time."""
        lines = [f"real run: {len(self)} worker processes, {self.wall_time:.1f} s"]
        for w, value in enumerate(self):
            status = self.ends[w].returncode
            if isinstance(value, BaseException):
                first = str(value).splitlines()[0] if str(value) else ""
                lines.append(f"  worker {w}: {class_names(value)[0]}: {first} (exit status {status})")
            else:
                lines.append(f"  worker {w}: returned {value!r}")
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)
