"""The user's call site (``file.py:line in func``) of a collective, for desync and hang reports."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
from functools import lru_cache

__all__ = ["calls_from", "user_call_site"]

_outer = threading.local()  # ``site``: where the user called what this thread runs for (see ``calls_from``)


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


@contextlib.contextmanager
def calls_from(site: str):  # noqa: ANN201 (a context manager)
    """In this thread, report ``site`` where no user frame is on the stack (a replica thread running mirrorlab's
    own step, e.g. Keras' fit, for a ``strategy.run`` the user's code called at ``site``)."""
    outer = getattr(_outer, "site", None)
    _outer.site = site
    try:
        yield
    finally:
        _outer.site = outer


def user_call_site(default: str = "<unknown>") -> str:
    """The innermost stack frame outside mirrorlab's own packages (else the site ``calls_from`` gave, else
    ``default``)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        internal = _is_internal.get(filename)
        if internal is None:
            internal = _is_internal[filename] = filename.startswith(_internal_prefixes() + ("<frozen",))
        if not internal:
            return f"{os.path.basename(filename)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return getattr(_outer, "site", None) or default
