"""The simulator's wall-clock watchdog: notices when the thread holding the baton has stood still in real time.

A simulated worker that blocks outside mirrorlab (``threading.Event().wait()``, ``time.sleep``, a socket) keeps
the scheduler's baton, so no other worker can run and the simulation would wait forever. The watchdog samples
every thread's innermost frame and instruction: while any of them moves, something is computing; when nothing
has moved for the configured seconds, the baton holder is blocked and is reported with its stack.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from types import FrameType

from mirrorlab.callsite import describe_frame, is_internal

__all__ = ["StillnessMeter", "frame_of", "format_stack", "user_site", "hang_report"]

STACK_DEPTH = 8  # innermost frames shown per blocked thread


class StillnessMeter:
    """How long (wall-clock seconds) every thread but the caller has kept the same innermost frame and
    instruction."""

    def __init__(self) -> None:
        self._snapshot: dict[int, tuple[int, int]] = {}
        self._since = time.monotonic()

    def still_for(self) -> float:
        me = threading.get_ident()
        snapshot = {ident: (id(frame), frame.f_lasti) for ident, frame in sys._current_frames().items()
                    if ident != me}
        now = time.monotonic()
        if snapshot != self._snapshot:
            self._snapshot, self._since = snapshot, now
        return now - self._since

    def reset(self) -> None:
        self._snapshot, self._since = {}, time.monotonic()


def frame_of(thread: threading.Thread) -> FrameType | None:
    """The innermost frame ``thread`` is executing now, if it is alive."""
    return sys._current_frames().get(thread.ident) if thread.ident is not None else None


def user_site(frame: FrameType | None) -> str | None:
    """``file.py:line in func`` of the innermost frame of this stack outside mirrorlab, or None."""
    while frame is not None:
        if not is_internal(frame.f_code.co_filename):
            return describe_frame(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def format_stack(frame: FrameType) -> str:
    """A stack from its outermost user frame in (at most ``STACK_DEPTH`` frames, innermost last), as a traceback
    prints it: the simulator's and the thread machinery's frames above the user's program say nothing."""
    entries = traceback.extract_stack(frame)
    first_user = next((i for i, entry in enumerate(entries) if not is_internal(entry.filename)), 0)
    return "".join(traceback.format_list(entries[first_user:][-STACK_DEPTH:])).rstrip("\n")


def hang_report(who: str, seconds: float, stacks: list[tuple[str, FrameType | None]], watchdog: float) -> str:
    """The HangError text: who blocked where, each of its blocked threads' stack (name, innermost frame), and
    the fix."""
    stacks = [(name, frame) for name, frame in stacks if frame is not None]
    site = next((s for _, frame in reversed(stacks) if (s := user_site(frame)) is not None), None)
    lines = [f"{who} has been blocked outside mirrorlab for {seconds:.1f} s of real time"
             f"{' at ' + site if site else ''}, holding the simulation: no other worker could run, and TF would "
             "wait here forever. The simulator gave up on this worker and let the others go on."]
    for name, frame in stacks:
        lines.append(f"Stack of thread {name!r} (innermost last):\n{format_stack(frame)}")
    lines.append("Fix: do not wait in real time for another worker inside a simulated program "
                 "(threading.Event, time.sleep, queue.get, sockets): exchange data through collectives, and poll "
                 "with mirrorlab.runtime.clock.sleep, which waits in virtual time. If this worker merely computes "
                 f"for long, raise SimCluster(watchdog=...) above {watchdog:g} s, or pass watchdog=None (also to step "
                 "through a worker with a debugger).")
    return "\n".join(lines)
