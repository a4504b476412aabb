"""What a real worker knows of every worker's progress in one collective group when a collective there fails: its
own communicator's state, and each peer's answer to a ping sent right then (or its last heartbeat), as the
``WorkerView``s that ``diagnostics.live_hang`` explains."""

from __future__ import annotations

from collections.abc import Sequence

from mirrorlab.collective.communicator import CollectiveState, Communicator
from mirrorlab.diagnostics.live_hang import Liveness, Position, WorkerView
from mirrorlab.diagnostics.trace_load import task_label

from .liveness import Heartbeats

__all__ = ["position", "group_progress", "worker_views"]


def position(state: CollectiveState | None) -> Position | None:
    """The reportable form of a communicator's state."""
    return None if state is None else Position(state.seq, state.fingerprint.describe(), state.site)


def group_progress(comm: Communicator) -> dict:
    """One group's entry of a Ping reply's ``progress``: the collective completed last and the one in progress."""
    return {name: None if p is None else p.to_json()
            for name, p in (("completed", position(comm.last_completed)), ("entered", position(comm.current)))}


def worker_views(group: int, comm: Communicator, names: Sequence[str], heartbeats: Heartbeats,
                 timeout: float) -> list[WorkerView]:
    """Every worker of ``comm``'s group (collective group ``group``), this one from ``comm``, the peers by pinging
    them within ``timeout`` seconds."""
    own = WorkerView(comm.rank, task_label(names[comm.rank], comm.rank), Liveness.ALIVE, position(comm.last_completed),
                     position(comm.current), "this worker")
    views = [own]
    for peer, (liveness, progress, detail) in heartbeats.probe(timeout).items():
        entry = progress.get(str(group)) if isinstance(progress, dict) else None
        entry = entry if isinstance(entry, dict) else {}
        views.append(WorkerView(peer, task_label(names[peer], peer), liveness,
                                Position.from_json(entry.get("completed")), Position.from_json(entry.get("entered")),
                                detail))
    return sorted(views, key=lambda v: v.rank)
