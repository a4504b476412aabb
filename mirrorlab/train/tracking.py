"""Finding the variables a checkpoint saves: a walk of the object graph from the checkpoint's roots.

An object's children are what ``_checkpoint_children()`` returns if it defines it, the items of
lists/tuples/dicts, and otherwise the attributes of plain objects that lead to variables (as TF's
AutoTrackable). Keys are the attribute paths (``model/layers/0/kernel``), the same on every worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..distribute.variables import Variable

__all__ = ["tracked_variables"]

_LEAF_TYPES = (str, bytes, int, float, bool, complex, type(None))


def _children(obj: Any) -> Iterator[tuple[str, Any]]:
    hook = getattr(obj, "_checkpoint_children", None)
    if callable(hook):
        yield from hook().items()
    elif isinstance(obj, Mapping):
        for key in sorted(obj, key=str):
            yield str(key), obj[key]
    elif isinstance(obj, (list, tuple)):
        yield from ((str(i), v) for i, v in enumerate(obj))
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for name, value in sorted(vars(obj).items()):
            if not name.startswith("_"):
                yield name, value


def tracked_variables(roots: Mapping[str, Any]) -> dict[str, Variable]:
    """Every variable reachable from ``roots``, by its first (shortest, then sorted) path."""
    found: dict[str, Variable] = {}
    seen: set[int] = set()
    frontier = sorted(roots.items())
    while frontier:
        next_frontier = []
        for path, obj in frontier:
            if id(obj) in seen or isinstance(obj, _LEAF_TYPES):
                continue
            seen.add(id(obj))
            if isinstance(obj, Variable):
                found[path] = obj
                continue
            next_frontier += [(f"{path}/{name}", child) for name, child in _children(obj)]
        frontier = sorted(next_frontier)
    return dict(sorted(found.items()))
