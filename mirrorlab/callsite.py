"""The user's call site (``file.py:line in func``) of a collective, for desync and hang reports."""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import os
import sys
import threading
from functools import lru_cache

from .scoped_value import scoped

__all__ = ["calls_from", "user_call_site", "is_internal", "describe_frame"]


_OUTER_SITE: contextvars.ContextVar[str | None] = contextvars.ContextVar("mirrorlab_outer_site", default=None)
"""Per thread (or greenlet): where the user called what this thread runs for (see ``calls_from``)."""


@lru_cache(maxsize=1)
def _internal_prefixes() -> tuple[str, ...]:
    """Folders of mirrorlab's packages (wherever setuptools' package-dir put them) and of the stdlib
    modules that sit between a user's frame and ours."""
    dirs = [os.path.dirname(os.path.abspath(__file__))]
    for name in ("mirrorlab.sim", "mirrorlab.backend", "mirrorlab.diagnostics"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            dirs.append(os.path.dirname(os.path.abspath(spec.origin)))
    files = [os.path.abspath(m.__file__) for m in (threading, contextlib)]
    return tuple(d + os.sep for d in dirs) + tuple(files)


_is_internal: dict[str, bool] = {}


def is_internal(filename: str) -> bool:
    """Whether code in ``filename`` is mirrorlab's own (or stdlib glue between it and the user)."""
    internal = _is_internal.get(filename)
    if internal is None:
        internal = _is_internal[filename] = filename.startswith(_internal_prefixes() + ("<frozen",))
    return internal


@lru_cache(maxsize=4096)
def describe_frame(filename: str, lineno: int | None, function: str) -> str:
    """``file.py:line in func``, the form every report uses for a call site."""
    return f"{os.path.basename(filename)}:{lineno} in {function}"


def calls_from(site: str) -> scoped:
    """In this thread, report ``site`` where no user frame is on the stack (a replica thread running mirrorlab's
    own step, e.g. Keras' fit, for a ``strategy.run`` the user's code called at ``site``)."""
    return scoped(_OUTER_SITE, site)


def user_call_site(default: str = "<unknown>") -> str:
    """The innermost stack frame outside mirrorlab's own packages (else the site ``calls_from`` gave, else
    ``default``)."""
    frame = sys._getframe(1)
    while frame is not None:
        if not is_internal(frame.f_code.co_filename):
            return describe_frame(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return _OUTER_SITE.get() or default
