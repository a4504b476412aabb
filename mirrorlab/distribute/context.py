"""The per-thread distribution context: which strategy is current and whether this thread runs in a
replica (inside ``strategy.run``) or in cross-replica context (inside ``scope()`` or ``merge_call``)."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .replica_context import ReplicaContext
    from .strategy import Strategy

__all__ = ["get_strategy", "has_strategy", "get_replica_context", "in_cross_replica_context", "enter",
           "current_frame", "experimental_set_strategy"]


class Frame(NamedTuple):
    """One entry of a thread's context stack (a named tuple: every replica enters one per step)."""

    strategy: "Strategy"
    replica: "ReplicaContext | None"
    update: int | None = None  # the local copy ``extended.update``/``update_non_slot`` is updating (TF's UpdateContext)


_STACK: contextvars.ContextVar[list[Frame] | None] = contextvars.ContextVar("mirrorlab_strategy_stack", default=None)
_BASE: contextvars.ContextVar[Frame | None] = contextvars.ContextVar("mirrorlab_base_strategy", default=None)
"""Per thread (context variables: a greenlet carrying a simulated worker or replica has its own, and a new thread
starts without): the stack of frames, and the base frame ``experimental_set_strategy`` set."""


def _stack() -> list[Frame]:
    stack = _STACK.get()
    if stack is None:
        stack = []
        _STACK.set(stack)
    return stack


def current_frame() -> Frame | None:
    """The innermost scope or replica frame; below every scope, the one ``experimental_set_strategy`` set."""
    stack = _stack()
    return stack[-1] if stack else _BASE.get()


def experimental_set_strategy(strategy: "Strategy | None") -> None:
    """Make ``strategy`` current on this thread outside any scope, as if its ``scope()`` stayed entered (None
    clears it); TF's RuntimeError inside a scope."""
    if _stack():
        raise RuntimeError("Must not be called inside a `tf.distribute.Strategy` scope.\nFix: call "
                           "experimental_set_strategy outside every `with strategy.scope():` block.")
    if strategy is not None and not callable(getattr(strategy, "scope", None)):
        raise AttributeError(f"'{type(strategy).__name__}' object has no attribute 'scope'\nFix: pass a "
                             "tf.distribute strategy (or None to clear it).")
    _BASE.set(None if strategy is None else Frame(strategy, None))


class enter:  # noqa: N801 (used like a function: ``with context.enter(...)``)
    """Make ``strategy`` current on this thread, in replica context if ``replica`` is given; ``update`` (in
    cross-replica context) is the local copy being updated: distributed variables read and write only it.

    A class rather than a ``@contextmanager`` generator: every replica enters one per step and per variable
    update, and a generator costs twice as much."""

    __slots__ = ("_frame", "_stack")

    def __init__(self, strategy: "Strategy", replica: "ReplicaContext | None", update: int | None = None) -> None:
        self._frame = Frame(strategy, replica, update)

    def __enter__(self) -> None:
        self._stack = _stack()
        self._stack.append(self._frame)

    def __exit__(self, *exc_info: object) -> None:
        self._stack.pop()


def get_strategy() -> "Strategy":
    """The current strategy, or the default single-replica strategy outside any scope."""
    frame = current_frame()
    if frame is not None:
        return frame.strategy
    from .strategy import default_strategy

    return default_strategy()


def has_strategy() -> bool:
    """True inside a non-default strategy's scope or replica function."""
    frame = current_frame()
    return frame is not None and not frame.strategy._is_default


def get_replica_context() -> "ReplicaContext | None":
    """The replica context inside ``run``; None in cross-replica context; the default one otherwise."""
    frame = current_frame()
    if frame is None:
        from .strategy import default_strategy

        return default_strategy()._default_replica_context()
    return frame.replica


def in_cross_replica_context() -> bool:
    """True inside ``strategy.scope()`` (or a ``merge_call`` function) but outside ``run``."""
    frame = current_frame()
    return frame is not None and frame.replica is None and not frame.strategy._is_default
