"""Which worker's error caused the others: reports and ``RunResult.values()`` lead with it.

An error *passed on* from another worker (an aborted collective, a peer that stopped heartbeating) is a
consequence; a deadlock involves every worker alike; anything else (a user exception, a crash, a mismatch
this worker detected, a hang) originates where it is raised. The root cause is the earliest originating error (of
two at the same virtual time, one that others passed on first: two workers can detect one mismatch at once), else
the earliest deadlock, else the earliest passed-on error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirrorlab import errors

__all__ = ["passed_on_from", "failure_order", "headline"]


def passed_on_from(exc: BaseException) -> int | None:
    """The worker whose failure ``exc`` (or an exception it was raised from) passes on, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        origin = getattr(exc, "passed_on_from", None)
        if origin is not None:
            return origin
        exc = exc.__cause__ or exc.__context__
    return None


def failure_order(failures: Sequence[tuple[int, BaseException, float]]) -> list[int]:
    """Worker indices of ``(worker, error, end_time)`` failures, root cause first."""
    sources = {passed_on_from(exc) for _, exc, _ in failures}

    def rank(item: tuple[int, BaseException, float]) -> tuple[int, float, bool, int]:
        worker, exc, end_time = item
        kind = 2 if passed_on_from(exc) is not None else 1 if isinstance(exc, errors.DeadlockError) else 0
        return kind, end_time, worker not in sources, worker

    return [worker for worker, _, _ in sorted(failures, key=rank)]


def headline(exc: Any) -> str:
    """The first line of ``exc``'s text, joined with the lines it introduces (a line ending in ':' is never
    cut from what it announces, e.g. the task TF names after "The following tasks are unhealthy ...:")."""
    lines = [line.strip() for line in str(exc).splitlines()]
    taken: list[str] = []
    for line in lines:
        taken.append(line)
        if not line.endswith(":"):
            break
    return " ".join(part for part in taken if part)
