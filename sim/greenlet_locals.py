"""Thread-local state per greenlet: each simulated worker (or replica) carried by a greenlet sees its own.

``threading.local`` keeps one value per OS thread, so greenlets of one thread share it; mirrorlab keeps per-thread
state there (the bound environment, the strategy stack, a tape's recording stack, Keras' name scopes) and a switch
between workers in the middle of a scope must not let one worker see another's. A greenlet trace hook moves the
contents of every module-level ``threading.local`` out of the thread's dict when a greenlet is switched away from
and back in when it is switched to; a greenlet that has never run starts with empty ones, as a new thread does.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import greenlet

__all__ = ["LocalsPerGreenlet"]

_EMPTY: dict = {}


class LocalsPerGreenlet:
    """While entered (on the carrier thread), every greenlet switch swaps the module-level thread-locals' contents.

    Locals are found in the modules' globals, again whenever ``sys.modules`` grows (a module imported mid-run);
    a ``threading.local`` held elsewhere (an object's attribute) stays shared by the thread's greenlets. A switch
    copies only the locals that hold something (mirrorlab's hottest per-thread state, the bound environment and the
    strategy stack, are context variables, which every greenlet has of its own: nothing to copy)."""

    def __init__(self) -> None:
        self._locals: list[threading.local] = []
        self._dicts: list[dict] = []  # each local's dict on the carrier thread (the same object for its lifetime)
        self._seen_modules = 0
        self._saved: dict[Any, list[tuple[dict, dict]]] = {}
        self._previous: Any = None

    def __enter__(self) -> "LocalsPerGreenlet":
        self._discover()
        self._previous = greenlet.settrace(self._on_switch)
        return self

    def __exit__(self, *exc_info: object) -> None:
        greenlet.settrace(self._previous)
        self._saved.clear()

    def _discover(self) -> None:
        """Collect the module-level ``threading.local`` objects of every module imported so far."""
        modules = list(sys.modules.values())
        self._seen_modules = len(modules)
        known = {id(local) for local in self._locals}
        for module in modules:
            for value in list(getattr(module, "__dict__", _EMPTY).values()):
                if isinstance(value, threading.local) and id(value) not in known:
                    known.add(id(value))
                    self._locals.append(value)
                    self._dicts.append(vars(value))

    def _on_switch(self, event: str, args: tuple) -> None:
        if event != "switch" and event != "throw":
            return
        if len(sys.modules) != self._seen_modules:
            self._discover()
        origin, target = args
        held = [d for d in self._dicts if d]
        if not origin.dead:
            self._saved[origin] = [(d, d.copy()) for d in held]
        for d in held:
            d.clear()
        for d, contents in self._saved.pop(target, ()):  # a greenlet that never ran starts with empty ones
            d.update(contents)
