"""Whether a run's outcome (simulated, or on real processes) is the one a scenario expects: each check returns the
reasons it is not.

An empty list means the outcome matches; otherwise each reason says what was expected and what happened,
which is what ``mirrorlab scenario run`` prints.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from mirrorlab.sim import RunResult

from .process_outcome import ProcessRun, class_names
from .schema import Expectation

__all__ = ["mismatches", "error_text", "weights_of", "same_values"]

#: Relative and absolute tolerance of "same weights" (float32 sums in another order differ in the last bits).
RTOL, ATOL = 1e-4, 1e-5


def error_text(error: BaseException) -> str:
    """The error's message with the notes the simulator added (cluster state, replay line)."""
    return "\n".join([str(error), *getattr(error, "__notes__", ())])


def weights_of(value: Any) -> Any:
    """What runs are compared by: a returned dict's ``weights``, else the whole value."""
    return value["weights"] if isinstance(value, dict) and "weights" in value else value


def _numbers(value: Any) -> list[float] | None:
    """The numbers of a nested list/tuple/array, flattened; None when it holds something else."""
    if isinstance(value, (list, tuple)):
        parts = [_numbers(v) for v in value]
        return None if any(p is None for p in parts) else [x for p in parts for x in p]
    try:
        return np.asarray(value, dtype=np.float64).ravel().tolist()
    except (TypeError, ValueError):
        return None


def same_values(a: Any, b: Any) -> bool:
    """Nested dicts/lists of numbers equal within float32 rounding (NaN equals NaN: the same corruption)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    left, right = _numbers(a), _numbers(b)
    if left is None or right is None:
        return a == b
    return len(left) == len(right) and bool(np.allclose(left, right, rtol=RTOL, atol=ATOL, equal_nan=True))


def _finite(value: Any) -> bool:
    numbers = _numbers(weights_of(value))
    return numbers is None or bool(np.all(np.isfinite(numbers)))


def _holds(name: str, values: list[Any], single: Callable[[], Any]) -> bool:
    if name == "same_on_all_workers":
        return all(same_values(weights_of(v), weights_of(values[0])) for v in values)
    if name == "finite":
        return all(_finite(v) for v in values)
    reference = weights_of(single())
    return all(same_values(weights_of(v), reference) for v in values)


def _error_mismatches(expect: Expectation, result: RunResult | ProcessRun) -> list[str]:
    failed = result.errors
    matching = {w: e for w, e in failed.items() if expect.error in class_names(e)}
    if not matching:
        seen = ", ".join(f"worker {w}: {class_names(e)[0]}" for w, e in failed.items()) or "every worker succeeded"
        return [f"expected {expect.error} on some worker, got {seen}"]
    reasons = [f"expected {expect.error} on worker {w}, it ended with "
               f"{class_names(failed[w])[0] if w in failed else 'success'}" for w in expect.workers if w not in matching]
    chosen = [matching[w] for w in expect.workers if w in matching] or list(matching.values())
    for fragment in expect.message:
        if not any(fragment in error_text(e) for e in chosen):
            reasons.append(f"expected the {expect.error} text to contain {fragment!r}")
    return reasons


def mismatches(expect: Expectation, result: RunResult | ProcessRun, workdir: str,
               single: Callable[[], Any]) -> list[str]:
    """Why ``result`` (run in ``workdir``, simulated or on processes) is not what ``expect`` says; ``single()`` gives
    a single-worker run's value, computed only when a property needs it."""
    if not expect.success:
        return _error_mismatches(expect, result)
    if not result.ok:
        return [f"expected success, worker {w} failed: {class_names(e)[0]}: {str(e).splitlines()[0] if str(e) else ''}"
                for w, e in result.errors.items()]
    values = list(result)
    reasons = [f"expected property {name} to hold, it does not" for name in expect.properties
               if not _holds(name, values, single)]
    reasons += [f"expected property {name} to be violated (the planted mistake), it holds" for name in expect.violated
                if _holds(name, values, single)]
    for key, wanted in expect.returns.items():
        for w, value in enumerate(values):
            got = value.get(key) if isinstance(value, dict) else None
            if not same_values(got, wanted):
                reasons.append(f"expected worker {w} to return {key}={wanted!r}, got {got!r}")
    names = sorted(os.listdir(workdir))
    reasons += [f"expected a file matching {p!r} in the work directory, found {names}" for p in expect.files
                if not fnmatch.filter(names, p)]
    reasons += [f"expected no file matching {p!r} in the work directory, found {fnmatch.filter(names, p)}"
                for p in expect.absent_files if fnmatch.filter(names, p)]
    return reasons
