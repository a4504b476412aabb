"""Argument checks for simulator settings and faults: one clear ValueError per bad field, at construction.

A bad setting must fail where it is written, naming the field, the value and the fix, instead of surfacing
later as a TypeError inside a simulator thread, a fault that never fires or a false desync.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_count", "check_seconds", "check_probability", "check_distinct"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_count(owner: str, field: str, value: Any, minimum: int, fix: str, optional: bool = False) -> None:
    """``value`` must be an int >= ``minimum`` (or None when ``optional``)."""
    if optional and value is None:
        return
    if not _is_int(value) or value < minimum:
        raise ValueError(f"{owner}: {field}={value!r} must be an integer >= {minimum}. Fix: {fix}")


def check_seconds(owner: str, field: str, value: Any, positive: bool, fix: str, optional: bool = False) -> None:
    """``value`` must be a finite number of seconds, > 0 when ``positive`` else >= 0 (or None when ``optional``)."""
    if optional and value is None:
        return
    bound = "> 0" if positive else ">= 0"
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0 or (positive and value == 0)):
        raise ValueError(f"{owner}: {field}={value!r} must be a finite number {bound}. Fix: {fix}")


def check_probability(owner: str, field: str, value: Any) -> None:
    """``value`` must be a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{owner}: {field}={value!r} must be a probability between 0 and 1. Fix: use e.g. "
                         f"{field}=0.5 to drop every other message on average, {field}=1.0 to drop all.")


def check_distinct(owner: str, first: str, second: str, a: Any, b: Any) -> None:
    """Two worker indices of a message fault must differ (a worker does not message itself)."""
    if a == b:
        raise ValueError(f"{owner}: {first} and {second} are both worker {a!r}; a worker sends no messages to "
                         f"itself. Fix: name two different workers.")
