"""``with scoped(var, value):``: a context variable set for a block and put back after it, the per-thread (and,
under the simulator's greenlets, per-greenlet) state that call sites and request kinds keep."""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = ["scoped"]


class scoped:  # noqa: N801 (used like a function: ``with scoped(var, value):``)
    """Inside the block ``var`` holds ``value``; after it, what it held before. A class, not a generator: hot paths
    enter one per collective."""

    __slots__ = ("_outer", "_value", "_var")

    def __init__(self, var: contextvars.ContextVar, value: Any) -> None:
        self._var = var
        self._value = value

    def __enter__(self) -> None:
        self._outer = self._var.get()
        self._var.set(self._value)

    def __exit__(self, *exc_info: object) -> None:
        self._var.set(self._outer)
