"""How a collective's arrays travel when they may live on a GPU: the hook a real backend fills in.

The group asks its communicator's lane to ``route`` each collective's host algorithm; this default lane returns it
unchanged (the simulator and plain processes), so their results and traces are today's. The real backend's lane
(``mirrorlab.backend.gpu_lane``) runs device arrays through NCCL or stages them through pinned host memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..communication import CommunicationImplementation

__all__ = ["DeviceLane", "HOST_LANE", "Run"]

Run = Callable[[Any, Any], Any]
"""``run(instance, array) -> result``: one collective's algorithm over the group's transport."""


class DeviceLane:
    """Routes a collective (``op``: ``all_reduce``, ``all_gather``, ``broadcast`` or ``barrier``) to where its
    arrays live; ``array`` is this worker's input (None for a barrier), ``name`` the algorithm as chosen."""

    def route(self, op: str, implementation: CommunicationImplementation, array: Any, name: str | None,
              run: Run) -> tuple[str | None, Run]:
        """The algorithm's name as the trace records it, and the function that runs it: here, both unchanged."""
        return name, run


HOST_LANE = DeviceLane()
"""The lane of every communicator that nobody gave another: host algorithms as they are."""
