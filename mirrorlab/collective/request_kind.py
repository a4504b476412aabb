"""What a collective is for (``reduce``, ``all_reduce``, ``variable creation``, ``ON_READ read``, ``checkpoint
save``): part of its identity, so that two different requests that happen to share op, dtype and shape can never
pair up across workers. The entry point that issues the request names it for the collectives it runs."""

from __future__ import annotations

import contextvars

from ..scoped_value import scoped

__all__ = ["requesting", "current_kind"]


_KIND: contextvars.ContextVar[str] = contextvars.ContextVar("mirrorlab_request_kind", default="")
"""Per thread (or greenlet): the request the collectives started now are for."""


def requesting(kind: str) -> scoped:
    """In this thread, the collectives started inside are for ``kind`` (the innermost request wins)."""
    return scoped(_KIND, kind)


def current_kind() -> str:
    """The request the collectives of this thread are for now ("" outside any named request)."""
    return _KIND.get()
