"""``tf.name_scope``: the prefix TF puts before the names of variables created inside it (eager mode rules).

Scopes nest per thread: ``name_scope("a")`` inside ``"s"`` is ``s/a/``; a name ending in ``/`` is used as it is
(an absolute scope, what ``with name_scope(...) as scope`` returns), and ``""`` returns to the root.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["name_scope", "current_scope"]

_state = threading.local()


def current_scope() -> str:
    """The scope variables created now are prefixed with (``""`` at the root, else ending in ``/``)."""
    return getattr(_state, "scope", "")


class name_scope:  # noqa: N801 (TF's name)
    """A context manager that opens the scope ``name`` (see the module docstring); ``.name`` is ``name``."""

    def __init__(self, name: Any) -> None:
        if not isinstance(name, str):
            raise ValueError("name for name_scope must be a string.")
        self._name = name
        self._outer: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self) -> str:
        outer = current_scope()
        if not self._name or self._name.endswith("/"):
            scope = self._name
        else:
            scope = f"{outer}{self._name}/"
        self._outer.append(outer)
        _state.scope = scope
        return scope

    def __exit__(self, *exc: Any) -> None:
        _state.scope = self._outer.pop()
