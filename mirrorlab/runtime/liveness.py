"""What every surviving worker is told when a peer stops answering heartbeats, on the simulator and on real
processes alike: where the peer last was and the fix (when known), and TF's coordination-service text naming the
task."""

from __future__ import annotations

from .. import errors
from ..collective.message import ABORT_PREFIX, RESTART_HINT

__all__ = ["HEALTH_TEXT", "peer_lost_error"]

HEALTH_TEXT = ("The following tasks are unhealthy (stopped sending heartbeats):\n{task}\nThe tasks have crashed. "
               "Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug "
               "further.")


def peer_lost_error(task: str, details: str = "", passed_on_from: int | None = None) -> errors.UnavailableError:
    """The ``UnavailableError`` that aborts a survivor's collectives when ``task`` is lost: ``details`` (who it
    was, why, where it last was, the fix) first when known, then TF's text naming the task."""
    lead = f"{details}\n" if details else ""
    return errors.UnavailableError(f"{ABORT_PREFIX}{lead}{HEALTH_TEXT.format(task=task)}\n{RESTART_HINT}",
                                   passed_on_from=passed_on_from)
