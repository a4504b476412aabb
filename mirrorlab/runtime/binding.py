"""Which environment the current thread belongs to (a simulated worker's threads are bound to it)."""

from __future__ import annotations

import threading

from .base import Environment

__all__ = ["current_environment", "bind_environment"]

_tls = threading.local()
_process_default: Environment | None = None


def current_environment() -> Environment:
    """The environment bound to this thread, else the process-wide local/backend one."""
    env = getattr(_tls, "env", None)
    if env is not None:
        return env
    global _process_default
    if _process_default is None:
        from .local import LocalEnvironment

        _process_default = LocalEnvironment()
    return _process_default


def bind_environment(env: Environment | None) -> None:
    """Bind (or with None, unbind) this thread to ``env``."""
    _tls.env = env
