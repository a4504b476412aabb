"""What a real worker knows of every worker's progress in one collective group when a collective there fails: its
own communicator's state and flight recorder (how long ago it completed its last collective), and each peer's answer
to a ping sent right then (or its last heartbeat), as the ``WorkerView``s that ``diagnostics.live_hang`` explains."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mirrorlab.collective.communicator import CollectiveState, Communicator
from mirrorlab.diagnostics.live_hang import Liveness, Position, WorkerView
from mirrorlab.diagnostics.trace_load import task_label

from .flight_recorder import FlightRecorder
from .liveness import Heartbeats

__all__ = ["position", "group_progress", "worker_views"]


def position(state: CollectiveState | None) -> Position | None:
    """The reportable form of a communicator's state."""
    return None if state is None else Position(state.seq, state.fingerprint.describe(), state.site)


def group_progress(comm: Communicator, recorder: FlightRecorder | None) -> dict:
    """One group's entry of a Ping reply's ``progress``: the collective completed last, the one in progress, and
    ``idle_s``, the seconds since that completion (from the flight recorder; None when it no longer holds it)."""
    done = comm.last_completed
    ended = None if done is None or recorder is None else recorder.completed_at(done.seq, done.site)
    return {"completed": None if done is None else position(done).to_json(),
            "entered": None if comm.current is None else position(comm.current).to_json(),
            "idle_s": None if ended is None else round(max(0.0, comm.now() - ended), 3)}


def _seconds(raw: Any) -> float | None:
    """A peer's ``idle_s``, or None unless a finite number >= 0."""
    ok = isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw) and raw >= 0
    return float(raw) if ok else None


def worker_views(group: int, comm: Communicator, recorder: FlightRecorder | None, names: Sequence[str],
                 heartbeats: Heartbeats, timeout: float) -> list[WorkerView]:
    """Every worker of ``comm``'s group (collective group ``group``), this one from ``comm`` and ``recorder``, the
    peers by pinging them within ``timeout`` seconds."""
    mine = group_progress(comm, recorder)
    own = WorkerView(comm.rank, task_label(names[comm.rank], comm.rank), Liveness.ALIVE, position(comm.last_completed),
                     position(comm.current), "this worker", mine["idle_s"])
    views = [own]
    for peer, (liveness, progress, detail) in heartbeats.probe(timeout).items():
        entry = progress.get(str(group)) if isinstance(progress, dict) else None
        entry = entry if isinstance(entry, dict) else {}
        views.append(WorkerView(peer, task_label(names[peer], peer), liveness,
                                Position.from_json(entry.get("completed")), Position.from_json(entry.get("entered")),
                                detail, _seconds(entry.get("idle_s"))))
    return sorted(views, key=lambda v: v.rank)
