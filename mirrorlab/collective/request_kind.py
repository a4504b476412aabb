"""What a collective is for (``reduce``, ``all_reduce``, ``variable creation``, ``ON_READ read``, ``checkpoint
save``): part of its identity, so that two different requests that happen to share op, dtype and shape can never
pair up across workers. The entry point that issues the request names it for the collectives it runs."""

from __future__ import annotations

import contextvars

__all__ = ["requesting", "current_kind"]


_KIND: contextvars.ContextVar[str] = contextvars.ContextVar("mirrorlab_request_kind", default="")
"""Per thread (or greenlet): the request the collectives started now are for."""


class requesting:  # noqa: N801 (used like a function: ``with requesting(kind):``)
    """In this thread, the collectives started inside are for ``kind`` (the innermost request wins). A class, not
    a generator: every collective enters one."""

    __slots__ = ("_kind", "_outer")

    def __init__(self, kind: str) -> None:
        self._kind = kind

    def __enter__(self) -> None:
        self._outer = _KIND.get()
        _KIND.set(self._kind)

    def __exit__(self, *exc_info: object) -> None:
        _KIND.set(self._outer)


def current_kind() -> str:
    """The request the collectives of this thread are for now ("" outside any named request)."""
    return _KIND.get()
