"""Waiting for asynchronous device work (an NCCL collective on a CUDA stream, an NCCL communicator being set up)
without ever blocking past the collective's deadline or an abort of its group: poll, spinning briefly (small
collectives finish in microseconds) and then in short sleeps, and abort the device work before raising."""

from __future__ import annotations

import time
from collections.abc import Callable

from mirrorlab import errors

__all__ = ["wait_for_device", "SPINS", "MAX_PAUSE_S"]

SPINS = 2000  # polls that only yield the GIL before the first sleep
MAX_PAUSE_S = 0.001  # longest sleep between polls once spinning is over


def wait_for_device(done: Callable[[], bool], async_error: Callable[[], str | None],
                    abort_error: Callable[[], errors.OpError | None], deadline: float | None,
                    abort: Callable[[], None], failed: Callable[[str], errors.OpError],
                    timed_out: Callable[[], errors.OpError], clock: Callable[[], float] = time.monotonic) -> None:
    """Return once ``done()``; else, at the first of: ``async_error()`` naming a problem (raise ``failed(text)``),
    the group aborted (raise its error), the ``clock`` passing ``deadline`` (raise ``timed_out()``), call
    ``abort()`` to stop the device work, then raise."""
    polls = 0
    while not done():
        problem = async_error()
        error = None if problem else abort_error()
        expired = problem is None and error is None and deadline is not None and clock() >= deadline
        if problem or error is not None or expired:
            abort()
            if problem:
                raise failed(problem)
            raise errors.clone(error) if error is not None else timed_out()
        polls += 1
        time.sleep(0 if polls < SPINS else MAX_PAUSE_S)
