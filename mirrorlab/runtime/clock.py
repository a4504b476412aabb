"""Time for library code that waits, polls or stamps: the wall clock in a plain process, the virtual clock on a
simulated worker (so a worker polling for a peer's file lets the peer run instead of holding the simulation)."""

from __future__ import annotations

from .binding import current_environment

__all__ = ["now", "sleep"]


def now() -> float:
    """Seconds since the epoch on this thread's environment's clock (``time.time()`` outside a simulation)."""
    return current_environment().now()


def sleep(seconds: float) -> None:
    """Wait ``seconds`` on this thread's environment's clock (``time.sleep`` outside a simulation)."""
    current_environment().sleep(seconds)
