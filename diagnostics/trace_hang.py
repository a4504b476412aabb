"""Hangs: where each worker's progress through the collectives stopped, and why the trace thinks so.

A worker whose last collective completed while others entered the next one stopped calling collectives: dead when
its peers' errors say its heartbeats stopped, otherwise alive as far as the trace shows (it left the loop, or is busy
outside collectives). Workers that entered a collective and never completed it are stuck inside it, alive, unless
one entered only after the others had given up: a straggler, late rather than cut off (the timestamps tell). The
side that entered versus the side that never did is judged by majority (``trace_verdict``).
"""

from __future__ import annotations

from mirrorlab.diagnostics.findings import Finding, Severity, register_code
from mirrorlab.diagnostics.trace_load import Call, LoadedTrace
from mirrorlab.diagnostics.trace_verdict import majority, workers_text

__all__ = ["NEVER_ENTERED", "WORKER_DIED", "STUCK_INSIDE", "STRAGGLER", "FIX_STOPPED", "FIX_DIED", "FIX_STUCK",
           "FIX_STRAGGLER", "check_hang"]

NEVER_ENTERED = register_code("ML-TRC-010", "some workers never entered a collective that others entered")
WORKER_DIED = register_code("ML-TRC-011", "a worker died: its peers lost its heartbeats")
STUCK_INSIDE = register_code("ML-TRC-012", "workers entered a collective and never completed it, none is missing")
STRAGGLER = register_code("ML-TRC-013", "a worker reached a collective only after its peers had given up waiting")

_DEATH_MARK = "stopped sending heartbeats"
FIX_STOPPED = ("Make every worker run the same number of steps and collectives (the same dataset size or "
                "steps_per_epoch, no early `break` or `return` on one worker, no collective under `if is_chief:`); "
                "if the worker is busy (a long save or evaluation), raise the collective timeout.")
FIX_DIED = ("Read worker {w}'s own log for the error that killed it (OOM, preemption, a crash), then restart the "
             "job from the last checkpoint (BackupAndRestore or PreemptionCheckpointHandler resume it).")
FIX_STUCK = ("The workers are alive and waiting but their data does not arrive: check the network between them "
              "(`mirrorlab preflight` on every worker shows a firewall or unreachable pair) and that no worker is "
              "stopped in a debugger.")
FIX_STRAGGLER = ("Find what makes {w} slow (input loading, an evaluation or save only it runs, a slower or busier host) "
                  "or raise CommunicationOptions(timeout_seconds=...) above its delay.")


def check_hang(trace: LoadedTrace) -> list[Finding]:
    """One finding per way the workers stopped: never entered (or died), or stuck inside a collective."""
    calls = trace.calls()
    last = {w: max(c, default=0) for w, c in calls.items()}
    if not last or max(last.values()) == 0:
        return []
    frontier = max(last.values())
    lagging = sorted(w for w in calls if last[w] < frontier and (last[w] == 0 or calls[w][last[w]].ok))
    if lagging:
        return [_never_entered(trace, calls, last, lagging)]
    stuck = sorted(w for w in calls if last[w] and not calls[w][last[w]].ok)
    if not stuck:
        return []
    return [_late(trace, calls, last, stuck) or _stuck_inside(trace, calls, last, stuck)]


def _late(trace: LoadedTrace, calls: dict[int, dict[int, Call]], last: dict[int, int],
          stuck: list[int]) -> Finding | None:
    """The straggler finding when, at the first collective workers are stuck in, some entered after others failed."""
    first = min(last[w] for w in stuck)
    there = {w: calls[w][first] for w in calls if first in calls[w]}
    gave_up = min(c.first.end for c in there.values() if not c.ok)
    late = sorted(w for w, c in there.items() if c.first.start > gave_up)
    if not late:
        return None
    waited = sorted(w for w in there if w not in late)
    call = there[late[0]]
    message = (f"{workers_text(late)} entered {call.describe()} #{first} at {call.site} only at "
               f"t={call.first.start:.3f} s, after {workers_text(waited)} had given up waiting at t={gave_up:.3f} s "
               f"({there[waited[0]].error_class}): {workers_text(late)} "
               f"{'is' if len(late) == 1 else 'are'} alive but slow (a straggler), not cut off.")
    evidence = "\n".join(_progress(trace, calls, last, w) for w in sorted(calls))
    return Finding(STRAGGLER, Severity.ERROR, tuple(trace.worker_label(w) for w in late), message, evidence,
                   FIX_STRAGGLER.format(w=workers_text(late)))


def _never_entered(trace: LoadedTrace, calls: dict[int, dict[int, Call]], last: dict[int, int],
                   lagging: list[int]) -> Finding:
    behind = min(last[w] for w in lagging)
    laggards = [w for w in lagging if last[w] == behind]
    nxt = behind + 1
    entered = sorted(w for w in calls if last[w] > behind)
    where = _sites(calls, [w for w in entered if nxt in calls[w]], nxt) or "a call site missing from the trace"
    if behind:
        done = calls[laggards[0]][behind]
        head = f"{workers_text(laggards)} last completed {done.describe()} #{behind} at {done.site} and never entered"
    else:
        head = f"{workers_text(laggards)} never entered any collective, not even"
    message = f"{head} #{nxt}, which {workers_text(entered)} entered at {where}."
    failed = [c for w in entered for s, c in calls[w].items() if s >= nxt and not c.ok]
    evidence = [_progress(trace, calls, last, w) for w in sorted(calls)]
    deaths = [c for c in failed if _DEATH_MARK in c.error]
    if deaths:
        evidence.append(f"worker {deaths[0].worker}'s error: {deaths[0].error}")
        return Finding(WORKER_DIED, Severity.ERROR, tuple(trace.worker_label(w) for w in laggards),
                       f"{message} Its peers lost its heartbeats: {workers_text(laggards)} died.",
                       "\n".join(evidence), FIX_DIED.format(w=", ".join(map(str, laggards))))
    verdict = majority([laggards, entered])
    they = "it is" if len(laggards) == 1 else "they are"
    alive = (f"Nothing in the trace says {workers_text(laggards)} died (the peers "
             f"{'failed with ' + failed[0].error_class if failed else 'record no error'}, not lost heartbeats): "
             f"{they} alive, or ended the program normally, but stopped calling collectives.")
    if verdict.suspects and set(verdict.suspects) == set(entered):
        alive = (f"Only a minority entered #{nxt}: a collective that only {workers_text(entered)} "
                 f"call{'s' if len(entered) == 1 else ''} (e.g. under `if is_chief:`).")
    suspects = verdict.suspects or tuple(laggards) + tuple(entered)
    return Finding(NEVER_ENTERED, Severity.ERROR, tuple(trace.worker_label(w) for w in suspects),
                   f"{message} {alive} {verdict.sentence()}", "\n".join(evidence), FIX_STOPPED)


def _stuck_inside(trace: LoadedTrace, calls: dict[int, dict[int, Call]], last: dict[int, int],
                  stuck: list[int]) -> Finding:
    first = min(last[w] for w in stuck)
    earliest = [w for w in stuck if last[w] == first]
    call = calls[earliest[0]][first]
    passed = sorted(w for w in calls if w not in earliest and first in calls[w] and calls[w][first].ok)
    message = (f"{workers_text(earliest)} entered {call.describe()} #{first} at {call.site} and never completed it "
               f"({call.error_class or 'no error recorded'})")
    if passed:
        message += f", which {workers_text(passed)} completed"
    message += (f"; every worker reached #{first}, so none is missing: they are alive and waiting for data that does "
                f"not arrive (look at the links between {workers_text(earliest)}).")
    evidence = "\n".join(_progress(trace, calls, last, w) for w in sorted(calls))
    return Finding(STUCK_INSIDE, Severity.ERROR, tuple(trace.worker_label(w) for w in earliest), message, evidence,
                   FIX_STUCK)


def _sites(calls: dict[int, dict[int, Call]], workers: list[int], seq: int) -> str:
    by_site: dict[str, list[int]] = {}
    for w in workers:
        by_site.setdefault(calls[w][seq].site, []).append(w)
    if len(by_site) <= 1:
        return next(iter(by_site), "")
    return " and ".join(f"{site} ({workers_text(ws)})" for site, ws in by_site.items())


def _progress(trace: LoadedTrace, calls: dict[int, dict[int, Call]], last: dict[int, int], w: int) -> str:
    """One worker's last collective: completed, or entered and failed (with the time it ended)."""
    label = f"worker {w} ({trace.worker_label(w)})"
    if not last[w]:
        return f"{label}: no collective recorded"
    call = calls[w][last[w]]
    e = call.first
    state = "completed" if call.ok else f"entered, never completed ({call.short_error})"
    return f"{label}: #{last[w]} {call.describe()} at {call.site}: {state}, t={e.start:.3f}..{e.end:.3f} s"
