"""Attributes local to one task: one OS thread or one greenlet (a local replica runs as a greenlet).

``threading.local`` is shared by every greenlet of a thread, but each local replica needs its own distribution
context, tape stack and name scopes, as it had when replicas were threads; ``TaskLocal`` keeps one namespace per
greenlet (each thread's main greenlet stands for the thread), and drops it when the greenlet is gone.
"""

from __future__ import annotations

import weakref
from typing import Any

from greenlet import getcurrent

__all__ = ["TaskLocal"]


class TaskLocal:
    """Like ``threading.local()``, but per greenlet: ``local.x = 1`` is seen only by the task that set it."""

    __slots__ = ("_by_task", "__weakref__")

    def __init__(self) -> None:
        object.__setattr__(self, "_by_task", weakref.WeakKeyDictionary())

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        """This task's attributes (as ``threading.local().__dict__``)."""
        task = getcurrent()
        namespace = self._by_task.get(task)
        if namespace is None:
            namespace = self._by_task[task] = {}
        return namespace

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self.__dict__[name]
        except KeyError:
            raise AttributeError(name) from None
