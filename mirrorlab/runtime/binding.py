"""Which environment the current thread belongs to (a simulated worker's threads are bound to it), and the
process-wide default: the first registered environment whose test accepts this process, else the local one,
decided once per process."""

from __future__ import annotations

import contextvars
import json
import os
import threading
from collections.abc import Callable

from .base import Environment

__all__ = ["current_environment", "bind_environment", "register_environment", "names_multi_worker_cluster"]

_ENV: contextvars.ContextVar[Environment | None] = contextvars.ContextVar("mirrorlab_environment", default=None)
"""The environment this thread (or greenlet: each has its own context) is bound to; a new thread starts unbound."""
_process_default: Environment | None = None
_lock = threading.Lock()
# (name, does this process need it?, factory), tried in order before the local environment.
_REGISTRY: list[tuple[str, Callable[[], bool], Callable[[], Environment]]] = []


def register_environment(name: str, applies: Callable[[], bool], factory: Callable[[], Environment]) -> None:
    """Offer ``factory``'s environment as the process default when ``applies()``; earlier entries win."""
    _REGISTRY.append((name, applies, factory))


def names_multi_worker_cluster(raw: str | None = None) -> bool:
    """Whether ``TF_CONFIG`` names a cluster of several chief/worker tasks (a real worker process)."""
    raw = os.environ.get("TF_CONFIG", "") if raw is None else raw
    try:
        cluster = json.loads(raw).get("cluster", {}) if raw.strip() else {}
        return sum(len(cluster.get(job, ())) for job in ("chief", "worker")) > 1
    except (ValueError, AttributeError, TypeError):
        return False  # the strategy reports a malformed TF_CONFIG itself, with its own message


def _backend() -> Environment:
    from mirrorlab.backend.environment import BackendEnvironment

    return BackendEnvironment()


register_environment("backend", names_multi_worker_cluster, _backend)


def current_environment() -> Environment:
    """The environment bound to this thread, else the process-wide default (chosen on first use)."""
    env = _ENV.get()
    if env is not None:
        return env
    global _process_default
    if _process_default is not None:
        return _process_default
    with _lock:
        if _process_default is None:
            factory = next((f for _, applies, f in _REGISTRY if applies()), None)
            if factory is None:
                from .local import LocalEnvironment

                factory = LocalEnvironment
            _process_default = factory()
    return _process_default


def bind_environment(env: Environment | None) -> None:
    """Bind (or with None, unbind) this thread to ``env``."""
    _ENV.set(env)
