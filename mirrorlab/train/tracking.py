"""The object graph a checkpoint saves and restores, as TF's: a breadth-first walk from the checkpoint's root.

An object's children are what ``_checkpoint_children()`` returns if it defines it, the items of
lists/tuples/dicts, and otherwise the public attributes of plain objects (as TF's AutoTrackable), each in the
order it was added. Every object is known by its first path in the walk (``model/layers/0/kernel``, the same on
every worker), and the graph keeps every named edge, so a restore matches objects along any path to them, as
TF's does.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..distribute.variables import Variable

__all__ = ["NON_STRING_KEY", "GraphMatch", "ObjectGraph", "escape_name", "holds_no_state", "match_graph",
           "object_graph", "trackable_children", "unescape_path"]

_LEAF_TYPES = (str, bytes, int, float, bool, complex, type(None), np.ndarray, np.generic)
NON_STRING_KEY = "-non_string_key"  # TF's name for a dict entry whose key is not a string


def escape_name(name: str) -> str:
    """A child's name as one segment of a path and checkpoint key, as TF escapes it: ``.`` doubled, ``/`` as
    ``.S`` (so ``{"x/y": v}`` saves under ``x.Sy/.ATTRIBUTES/VARIABLE_VALUE``)."""
    return name.replace(".", "..").replace("/", ".S")


def unescape_path(path: str) -> str:
    """An escaped path's names joined by ``.``, as TF shows an object (``x.Sy/z`` is ``x/y.z``)."""
    return ".".join(_unescape(segment) for segment in path.split("/"))


def _unescape(segment: str) -> str:
    """One escaped name, read left to right (``..`` is ``.``, ``.S`` is ``/``)."""
    return re.sub(r"\.([.S])", lambda pair: "." if pair.group(1) == "." else "/", segment)


def holds_no_state(value: Any) -> bool:
    """True for values that hold no state (None, numbers, strings, arrays): never part of the graph (TF does not
    track them)."""
    return isinstance(value, _LEAF_TYPES)


def trackable_children(obj: Any) -> Iterator[tuple[str, Any]]:
    """``obj``'s named children, in the order they were added (none for a variable or a plain value)."""
    if isinstance(obj, Variable) or holds_no_state(obj):
        return
    hook = getattr(obj, "_checkpoint_children", None)
    if callable(hook):
        yield from hook().items()
    elif isinstance(obj, Mapping):
        yield from ((key if isinstance(key, str) else NON_STRING_KEY, value) for key, value in obj.items())
    elif isinstance(obj, (list, tuple)):
        yield from ((str(i), v) for i, v in enumerate(obj))
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        yield from ((name, value) for name, value in vars(obj).items() if not name.startswith("_"))


@dataclass
class ObjectGraph:
    """Variables by first path, each object's edges (``{first path: {child name: child's first path}}``, the
    root at ``""``), and the dicts TF refuses to save (a non-string key holding state)."""

    variables: dict[str, Variable] = field(default_factory=dict)
    children: dict[str, dict[str, str]] = field(default_factory=dict)
    unsaveable: list[Any] = field(default_factory=list)


def object_graph(roots: Mapping[str, Any]) -> ObjectGraph:
    """The graph of everything reachable from ``roots`` (the root's children, in order)."""
    graph = ObjectGraph()
    first: dict[int, str] = {id(roots): ""}
    alive: list[Any] = [roots]  # every object met stays referenced, so no id is reused by a new temporary list
    queue: deque[tuple[str, Any]] = deque([("", roots)])
    while queue:
        path, obj = queue.popleft()
        edges = graph.children.setdefault(path, {})
        for name, child in trackable_children(obj):
            if holds_no_state(child):
                continue
            alive.append(child)
            if name == NON_STRING_KEY and isinstance(obj, Mapping):
                graph.unsaveable.append(obj)
            if id(child) not in first:
                first[id(child)] = f"{path}/{escape_name(name)}" if path else escape_name(name)
                if isinstance(child, Variable):
                    graph.variables[first[id(child)]] = child
                else:
                    queue.append((first[id(child)], child))
            edges[name] = first[id(child)]
    return graph


@dataclass
class GraphMatch:
    """What a walk matched to a saved graph: variables by the path they were saved under, and the other objects
    (by ``id``: the object and its saved path), where variables created later can still be matched."""

    variables: dict[str, Variable] = field(default_factory=dict)
    objects: dict[int, tuple[Any, str]] = field(default_factory=dict)
    rebound: list[str] = field(default_factory=list)  # nodes reached at an object matched already: bound, unrestored


def match_graph(roots: Mapping[str, Any], saved: Mapping[str, Mapping[str, str]], start: str = "") -> GraphMatch:
    """Match the objects below ``roots`` (the children of the object saved at ``start``) to the saved graph: the
    walk follows each saved child's name from the saved node its parent matched, in saving order; each object and
    each saved node is matched once (a node saved under two names goes to the first object found, as in TF). An
    object found again at another saved node binds that node too but restores nothing there (TF restores an object
    once per restore), and so do its children at that node's children."""
    match = GraphMatch()
    seen: set[int] = set()
    alive: list[Any] = []  # every object met stays referenced, so no id is reused by a new temporary list
    taken: set[str] = set()
    queue: deque[tuple[str, Any]] = deque([(start, roots)])
    while queue:
        saved_path, obj = queue.popleft()
        children = dict(trackable_children(obj))
        for name, target in saved.get(saved_path, {}).items():  # in saving order: the first object takes a node
            child = children.get(name)
            if holds_no_state(child) or target in taken:
                continue
            alive.append(child)
            taken.add(target)
            if id(child) in seen:
                match.rebound.append(target)
                if not isinstance(child, Variable):
                    queue.append((target, child))
                continue
            seen.add(id(child))
            if isinstance(child, Variable):
                match.variables[target] = child
            else:
                match.objects[id(child)] = (child, target)
                queue.append((target, child))
    return match
