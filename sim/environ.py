"""Per-worker environment variables inside one process: while a simulation runs, ``os.environ`` is
an overlay that shows each simulated worker (and its replica threads) its own ``TF_CONFIG``, so
programs that read ``os.environ["TF_CONFIG"]`` run unchanged."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager

from mirrorlab.runtime import current_environment

__all__ = ["environ_overlay"]


def _overlay() -> dict | None:
    return getattr(current_environment(), "environ", None)


class _OverlayEnviron(MutableMapping):
    """``os.environ`` with the current simulated worker's variables on top (None means unset)."""

    def __init__(self, base: MutableMapping) -> None:
        self._base = base

    def __getitem__(self, key: str) -> str:
        overlay = _overlay()
        if overlay is not None and key in overlay:
            if overlay[key] is None:
                raise KeyError(key)
            return overlay[key]
        return self._base[key]

    def __setitem__(self, key: str, value: str) -> None:
        overlay = _overlay()
        if overlay is not None:
            overlay[key] = str(value)
        else:
            self._base[key] = value

    def __delitem__(self, key: str) -> None:
        overlay = _overlay()
        if overlay is not None:
            if key not in self:
                raise KeyError(key)
            overlay[key] = None
        else:
            del self._base[key]

    def _keys(self) -> list[str]:
        overlay = _overlay() or {}
        keys = [k for k in self._base if k not in overlay]
        return keys + [k for k, v in overlay.items() if v is not None]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def copy(self) -> dict:
        return dict(self.items())

    def __repr__(self) -> str:
        return f"environ({self.copy()!r})"


_lock = threading.Lock()
_depth = 0


@contextmanager
def environ_overlay() -> Iterator[None]:
    """Install the overlay for the duration of a simulation (re-entrant)."""
    global _depth
    with _lock:
        if _depth == 0:
            os.environ = _OverlayEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                os.environ = os.environ._base  # type: ignore[attr-defined]  # noqa: B003
