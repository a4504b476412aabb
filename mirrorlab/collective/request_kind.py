"""What a collective is for (``reduce``, ``all_reduce``, ``variable creation``, ``ON_READ read``, ``checkpoint
save``): part of its identity, so that two different requests that happen to share op, dtype and shape can never
pair up across workers. The entry point that issues the request names it for the collectives it runs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["requesting", "current_kind"]

_tls = threading.local()


@contextlib.contextmanager
def requesting(kind: str) -> Iterator[None]:
    """In this thread, the collectives started inside are for ``kind`` (the innermost request wins)."""
    outer = getattr(_tls, "kind", "")
    _tls.kind = kind
    try:
        yield
    finally:
        _tls.kind = outer


def current_kind() -> str:
    """The request the collectives of this thread are for now ("" outside any named request)."""
    return getattr(_tls, "kind", "")
