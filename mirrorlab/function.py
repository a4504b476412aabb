"""``mirrorlab.function``: TF's ``tf.function`` decorator, accepted so TF programs run with only the import
changed. mirrorlab always executes eagerly (as ``tf.config.run_functions_eagerly(True)`` does in TF), so
the decorated function is returned unchanged; the strategy semantics do not depend on tracing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["function"]


def function(func: Callable[..., Any] | None = None, input_signature: Any = None, autograph: bool = True,
             jit_compile: Any = None, reduce_retracing: bool = False, **experimental: Any) -> Any:
    """``@function`` and ``@function(...)`` both return the function itself (eager execution)."""
    if func is None:
        return lambda f: f
    if not callable(func):
        raise TypeError(f"function expects a callable to decorate, got {type(func).__name__}")
    return func
