"""Attributes local to one task: one OS thread or one greenlet (a local replica runs as a greenlet).

``threading.local`` is shared by every greenlet of a thread, but each local replica needs its own distribution
context, tape stack and name scopes, as it had when replicas were threads. Every greenlet (and every thread) runs
in its own ``contextvars`` context, which starts empty, so ``TaskLocal`` keeps each task's attributes in one
context variable: a lookup costs about as much as ``threading.local``'s, and a finished task's attributes go with it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

__all__ = ["TaskLocal"]


class TaskLocal:
    """Like ``threading.local()``, but per greenlet: ``local.x = 1`` is seen only by the task that set it."""

    __slots__ = ("_var",)

    def __init__(self) -> None:
        object.__setattr__(self, "_var", ContextVar(f"TaskLocal@{id(self):x}"))

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        """This task's attributes (as ``threading.local().__dict__``)."""
        namespace = self._var.get(None)
        if namespace is None:
            namespace = {}
            self._var.set(namespace)
        return namespace

    def __getattr__(self, name: str) -> Any:
        try:
            return self._var.get()[name]
        except (LookupError, KeyError):
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self._var.get()[name]
        except (LookupError, KeyError):
            raise AttributeError(name) from None
