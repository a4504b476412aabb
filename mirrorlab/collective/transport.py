"""The interface collective algorithms are written against: ordered point-to-point messages between ranks.

Implementations: the simulator's in-memory network (``mirrorlab.sim``) and gRPC (``mirrorlab.backend``).
A transport delivers messages between each ordered pair in FIFO order, and lets a rank abort the whole
group so that peers blocked in ``recv`` wake up with the error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ..errors import OpError
from .message import Message

__all__ = ["Transport"]


class Transport(ABC):
    """One rank's endpoint in a group of ``size`` ranks."""

    rank: int
    size: int

    @abstractmethod
    def send(self, dst: int, message: Message) -> None:
        """Queue ``message`` for ``dst``; never blocks on the receiver. The payload is snapshotted."""

    @abstractmethod
    def recv(self, src: int, deadline: float | None) -> Message:
        """Next message from ``src``. Raises ``DeadlineExceededError`` once the clock passes ``deadline``
        and the group's abort error once the group is aborted."""

    @abstractmethod
    def abort(self, error: OpError) -> None:
        """Fail this rank's pending and future receives with ``error`` and tell every peer to do the same."""

    @property
    @abstractmethod
    def abort_error(self) -> OpError | None:
        """The error the group was aborted with, or None."""

    @abstractmethod
    def now(self) -> float:
        """Seconds on this transport's clock (virtual in the simulator)."""

    def execute(self, instance: Any, body: Callable[[Any], Any], closed_form: Any = None) -> Any:
        """Run one collective instance's algorithm, ``body(instance)``, which sends and receives through this
        transport. The simulator overrides it to compute an instance once for all its members (from the
        instance's ``closed_form``, a ``closed_form.ClosedForm``, where the caller stated one)."""
        return body(instance)
