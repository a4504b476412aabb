"""Hang findings on a live worker: what one real worker knows when a collective times out or a peer is lost.

Trace analysis (``trace_hang``) reads every worker's finished trace; a worker whose collective just failed has only
its own progress and what each peer says now, over the heartbeat channel: the collective it last completed and the
one it is in, or that it cannot be reached. From that it gives the same codes with the same words: a worker that
never entered the collective the others wait in (ML-TRC-010) and whether it is alive (it answers: stuck or busy
elsewhere) or finished; one that is dead (its port refuses: the process is gone) or silent (stopped, hung or cut off)
(ML-TRC-011); or every worker inside the same collective, none missing (ML-TRC-012).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mirrorlab.diagnostics.findings import Finding, Severity
from mirrorlab.diagnostics.trace_hang import FIX_DIED, FIX_STOPPED, FIX_STUCK, NEVER_ENTERED, STUCK_INSIDE, WORKER_DIED
from mirrorlab.diagnostics.trace_verdict import majority, workers_text

__all__ = ["Position", "Liveness", "WorkerView", "FIX_SILENT", "check_live_hang"]

_MAX_TEXT = 300  # a peer's description of its collective or call site is cut to this


@dataclass(frozen=True)
class Position:
    """A collective instance of one group: its number, what it is (``all_reduce(SUM) float32[4]``) and call site."""

    seq: int
    what: str
    site: str

    def to_json(self) -> list:
        return [self.seq, self.what, self.site]

    @staticmethod
    def from_json(raw: Any) -> "Position | None":
        """The position a peer reported, or None when ``raw`` is not ``[seq >= 1, what, site]``."""
        if not (isinstance(raw, list) and len(raw) == 3 and isinstance(raw[0], int) and not isinstance(raw[0], bool)
                and raw[0] >= 1 and isinstance(raw[1], str) and isinstance(raw[2], str)):
            return None
        return Position(raw[0], raw[1][:_MAX_TEXT], raw[2][:_MAX_TEXT])

    def describe(self) -> str:
        return f"{self.what} #{self.seq} at {self.site}"


class Liveness(str, Enum):
    """What a worker learned when it pinged a peer just now."""

    ALIVE = "alive"  # it answered
    FINISHED = "finished"  # it said goodbye: its program ended normally
    GONE = "gone"  # its port refuses connections: its process exited or was killed
    SILENT = "silent"  # no answer by the deadline: stopped (SIGSTOP, a debugger), hung, or cut off by the network


@dataclass(frozen=True)
class WorkerView:
    """One worker as this worker sees it: ``label`` (``worker:1``), liveness, the last collective it completed and
    the one it is in (its own report, or the last one it gave), ``detail`` (how that was learned) and ``idle_s``: how
    many seconds before its report it completed that last collective (from its flight recorder; None: unknown)."""

    rank: int
    label: str
    liveness: Liveness
    completed: Position | None = None
    entered: Position | None = None
    detail: str = ""
    idle_s: float | None = None

    @property
    def reached(self) -> int:
        """The highest collective number it got to (entered or completed); 0 for none."""
        if self.entered is not None:
            return self.entered.seq
        return self.completed.seq if self.completed is not None else 0

    def place(self) -> str:
        """``in X #5 at site``, ``after X #4 at site`` or ``in no collective yet``."""
        if self.entered is not None:
            return f"in {self.entered.describe()}"
        return f"after {self.completed.describe()}" if self.completed is not None else "in no collective yet"

    def line(self) -> str:
        """One evidence line: who, whether alive and how we know, and where it is."""
        known = self.idle_s is not None and self.entered is None
        ago = f" (completed {self.idle_s:.1f} s before it said so)" if known else ""
        how = f" ({self.detail})" if self.detail else ""
        return f"worker {self.rank} ({self.label}): {self.liveness.value}{how}; {self.place()}{ago}"


_DEAD_WORDS = {Liveness.GONE: "died: its port refuses connections, so its process has exited (killed, out of memory, "
                              "crashed)",
               Liveness.SILENT: "stopped answering: its heartbeats are lost but nothing says its process exited; it "
                                "is stopped (SIGSTOP, a debugger), hung without releasing Python's GIL, or cut off by "
                                "the network"}


FIX_SILENT = ("Look at worker {w} itself: stopped (SIGSTOP, a debugger: resume it), busy in code that holds Python's "
              "GIL (`py-spy dump --pid` shows where), or cut off from its peers (`mirrorlab preflight` on every worker "
              "shows a firewall); raise MIRRORLAB_HEARTBEAT_TIMEOUT if it only answers late.")


def _fix_for_dead(by_rank: dict[int, WorkerView], dead: list[int]) -> str:
    """FIX_DIED when a dead worker's process is gone, FIX_SILENT when every one only stopped answering."""
    gone = any(by_rank[w].liveness is Liveness.GONE for w in dead)
    return (FIX_DIED if gone else FIX_SILENT).format(w=", ".join(map(str, dead)))


def check_live_hang(views: Sequence[WorkerView]) -> list[Finding]:
    """The hang finding for one collective group, from every worker's view (this worker's own included)."""
    by_rank = {v.rank: v for v in views}
    finished = sorted(v.rank for v in views if v.liveness is Liveness.FINISHED)
    waiting = sorted(v.rank for v in views if v.entered is not None and v.liveness is not Liveness.FINISHED)
    if finished and waiting:
        return [_finished(by_rank, finished, waiting)]
    frontier = max((v.reached for v in views), default=0)
    if frontier == 0:
        return []
    lagging = [v for v in views if v.reached < frontier and v.entered is None]
    if lagging:
        return [_never_entered(by_rank, lagging)]
    if all(v.entered is None for v in views):
        return []  # every worker completed the last collective: nothing hangs (any more)
    return [_inside(by_rank)]


def _never_entered(by_rank: dict[int, WorkerView], lagging: list[WorkerView]) -> Finding:
    behind = min(v.reached for v in lagging)
    laggards = sorted(v.rank for v in lagging if v.reached == behind)
    ahead = sorted(w for w, v in by_rank.items() if v.reached > behind)
    inside = [by_rank[w].entered.seq for w in ahead if by_rank[w].entered is not None]
    nxt = behind + 1 if behind or not inside else min(inside)  # position unknown: the collective the others are in
    sites: dict[str, list[int]] = {}
    for w in ahead:
        entered = by_rank[w].entered
        if entered is not None and entered.seq == nxt:
            sites.setdefault(entered.site, []).append(w)
    where = (next(iter(sites)) if len(sites) == 1 else
             " and ".join(f"{site} ({workers_text(ws)})" for site, ws in sites.items()) or "a later call site")
    first = by_rank[laggards[0]]
    if behind:
        head = (f"{workers_text(laggards)} last completed {first.completed.what} #{behind} at {first.completed.site} "
                f"and never entered")
    else:
        head = (f"no heartbeat from {workers_text(laggards)} reported a collective of this group yet, and "
                f"{'it' if len(laggards) == 1 else 'they'} never entered")
    message = f"{head} #{nxt}, which {workers_text(ahead)} entered at {where}."
    evidence = "\n".join(by_rank[w].line() for w in sorted(by_rank))
    dead = [w for w in laggards if by_rank[w].liveness in _DEAD_WORDS]
    if dead:
        words = "; ".join(f"worker {w} {_DEAD_WORDS[by_rank[w].liveness]}" for w in dead)
        return Finding(WORKER_DIED, Severity.ERROR, tuple(by_rank[w].label for w in dead), f"{message} {words}.",
                       evidence, _fix_for_dead(by_rank, dead))
    they = "it is" if len(laggards) == 1 else "they are"
    idle = [by_rank[w].idle_s for w in laggards if by_rank[w].idle_s is not None]
    since = f" and has called no collective for {min(idle):.1f} s" if idle else ""
    said = [f"{workers_text(laggards)} still answer{'s' if len(laggards) == 1 else ''} heartbeats{since}: {they} "
            "alive but stopped calling collectives, or busy elsewhere (a long save, evaluation or input) - stuck, "
            "not dead."]
    verdict = majority([laggards, ahead])
    if verdict.suspects and set(verdict.suspects) == set(ahead):
        said.append(f"Only a minority entered #{nxt}: a collective that only {workers_text(ahead)} "
                    f"call{'s' if len(ahead) == 1 else ''} (e.g. under `if is_chief:`).")
    suspects = verdict.suspects or tuple(laggards) + tuple(ahead)
    return Finding(NEVER_ENTERED, Severity.ERROR, tuple(by_rank[w].label for w in suspects),
                   f"{message} {' '.join(said)} {verdict.sentence()}", evidence, FIX_STOPPED)


def _finished(by_rank: dict[int, WorkerView], finished: list[int], waiting: list[int]) -> Finding:
    """Workers that said goodbye while others wait in a collective (where they stopped is unknown: the goodbye
    may come sooner after their last collective than any heartbeat)."""
    first = min(by_rank[w].entered.seq for w in waiting)
    stuck = [w for w in waiting if by_rank[w].entered.seq == first]
    position = by_rank[stuck[0]].entered
    it = "its" if len(finished) == 1 else "their"
    verdict = majority([finished, [w for w in by_rank if w not in finished]])
    return Finding(NEVER_ENTERED, Severity.ERROR, tuple(by_rank[w].label for w in verdict.suspects or finished),
                   f"{workers_text(finished)} finished {it} program (said goodbye) while {workers_text(stuck)} "
                   f"wait{'s' if len(stuck) == 1 else ''} in {position.describe()}: {workers_text(finished)} ran "
                   f"fewer collectives than the others. {verdict.sentence()}",
                   "\n".join(by_rank[w].line() for w in sorted(by_rank)), FIX_STOPPED)


def _inside(by_rank: dict[int, WorkerView]) -> Finding:
    """Every worker got to the collective the earliest stuck one is in: a dead one inside it, or none missing."""
    first = min(v.entered.seq for v in by_rank.values() if v.entered is not None)
    stuck = sorted(w for w, v in by_rank.items() if v.entered is not None and v.entered.seq == first)
    passed = sorted(w for w, v in by_rank.items() if w not in stuck and v.reached >= first)
    position = by_rank[stuck[0]].entered
    evidence = "\n".join(by_rank[w].line() for w in sorted(by_rank))
    dead = [w for w in sorted(by_rank) if by_rank[w].liveness in _DEAD_WORDS]
    if dead:
        said = [f"worker {w} was last reported {by_rank[w].place()}; worker {w} {_DEAD_WORDS[by_rank[w].liveness]}."
                for w in dead]
        waiting = [w for w in stuck if w not in dead]
        if waiting:
            said.append(f"{workers_text(waiting)} wait{'s' if len(waiting) == 1 else ''} in {position.describe()} "
                        f"for {'its' if len(dead) == 1 else 'their'} data.")
        return Finding(WORKER_DIED, Severity.ERROR, tuple(by_rank[w].label for w in dead), " ".join(said), evidence,
                       _fix_for_dead(by_rank, dead))
    message = f"{workers_text(stuck)} entered {position.describe()} and never completed it"
    if passed:
        message += f", which {workers_text(passed)} completed"
    message += (f"; every worker reached #{first} and answers heartbeats, so none is missing and none is dead: they "
                f"are alive and waiting for data that does not arrive (look at the links between "
                f"{workers_text(stuck)}).")
    return Finding(STUCK_INSIDE, Severity.ERROR, tuple(by_rank[w].label for w in stuck), message, evidence, FIX_STUCK)
