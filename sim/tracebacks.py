"""Tracebacks of simulated workers' errors cut down to the user's own frames, and where an error was raised.

A worker's error passes through the simulator, the strategy and the collective algorithms before it reaches
the user; those frames say nothing about the user's program, so they are dropped unless the environment
variable ``MIRRORLAB_TRACEBACK=1`` asks for full tracebacks.
"""

from __future__ import annotations

import os
from types import TracebackType

from mirrorlab.callsite import describe_frame, is_internal

__all__ = ["FULL_TRACEBACK_ENV", "trim_traceback", "raise_site"]

FULL_TRACEBACK_ENV = "MIRRORLAB_TRACEBACK"


def _full_tracebacks() -> bool:
    return os.environ.get(FULL_TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no")


def trim_traceback(exc: BaseException) -> None:
    """Drop mirrorlab's own frames from ``exc``'s traceback and from those of its causes (in place), unless
    ``MIRRORLAB_TRACEBACK=1``; a traceback with no user frame at all is left whole."""
    if _full_tracebacks():
        return
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        entries = []
        tb = exc.__traceback__
        while tb is not None:
            if not is_internal(tb.tb_frame.f_code.co_filename):
                entries.append(tb)
            tb = tb.tb_next
        if entries:
            trimmed = None
            for entry in reversed(entries):
                trimmed = TracebackType(trimmed, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
            exc.__traceback__ = trimmed
        exc = exc.__cause__ or exc.__context__


def raise_site(exc: BaseException) -> str | None:
    """``file.py:line in func`` of the innermost user frame ``exc`` passed through, or None."""
    site = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not is_internal(code.co_filename):
            site = describe_frame(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return site
