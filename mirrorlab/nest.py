"""Nested structures (tuples, lists, dicts, namedtuples) flattened and rebuilt the way ``tf.nest`` does.

Dicts flatten in sorted key order; everything that is not a tuple, list or mapping is a leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["is_nested", "is_flat_sequence", "flatten", "pack_sequence_as", "map_structure", "assert_same_structure"]


_LEAF, _SEQUENCE, _NAMEDTUPLE, _MAPPING = range(4)


class _KindCache(dict):
    """How tf.nest treats each type, cached per type: the ABC check for ``Mapping`` is the slow part, and every
    collective asks it of every leaf."""

    def __missing__(self, cls: type) -> int:
        if issubclass(cls, Mapping):
            kind = _MAPPING
        elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
            kind = _NAMEDTUPLE
        else:
            kind = _SEQUENCE if issubclass(cls, (tuple, list)) else _LEAF
        self[cls] = kind
        return kind


_KINDS = _KindCache()


def is_nested(value: Any) -> bool:
    """True for the containers tf.nest descends into."""
    return _KINDS[type(value)] != _LEAF


def is_flat_sequence(value: Any) -> bool:
    """True for a list or tuple (namedtuples too) whose items are all leaves: its items are its leaves."""
    return _KINDS[type(value)] in (_SEQUENCE, _NAMEDTUPLE) and not any(map(is_nested, value))


def _sorted_keys(mapping: Mapping) -> list:
    try:
        return sorted(mapping)
    except TypeError as exc:
        raise TypeError(f"nest only supports dicts with sortable keys, got keys {list(mapping)!r}") from exc


def _children(value: Any) -> list:
    if _KINDS[type(value)] == _MAPPING:
        return [value[k] for k in _sorted_keys(value)]
    return list(value)


def flatten(structure: Any) -> list:
    """All leaves of ``structure`` in tf.nest order."""
    if not is_nested(structure):
        return [structure]
    children = _children(structure)
    if any(map(is_nested, children)):
        return _flatten_walk(structure)
    return children  # the common flat case (a list, tuple or dict of leaves), without the walk


def _flatten_walk(structure: Any) -> list:
    """``flatten`` for any structure, by an iterative depth-first walk (deep nests stay off the recursion limit)."""
    out: list = []
    stack = [structure]
    while stack:
        item = stack.pop()
        if is_nested(item):
            stack.extend(reversed(_children(item)))
        else:
            out.append(item)
    return out


def _rebuild(template: Any, children: list) -> Any:
    kind = _KINDS[type(template)]
    if kind == _MAPPING:
        values = dict(zip(_sorted_keys(template), children))
        return type(template)((k, values[k]) for k in template)
    if kind == _NAMEDTUPLE:
        return type(template)(*children)
    return type(template)(children)


def pack_sequence_as(structure: Any, flat: list) -> Any:
    """Rebuild ``structure`` with its leaves replaced, in order, by ``flat``."""
    flat = list(flat)
    if not is_nested(structure):  # a leaf: the one item itself
        _check_count(1, flat, structure)
        return flat[0]
    children = _children(structure)
    if not any(map(is_nested, children)):  # the common flat case, without the walk
        _check_count(len(children), flat, structure)
        return _rebuild(structure, flat)
    return _pack_walk(structure, flat)


def _pack_walk(structure: Any, flat: list) -> Any:
    """``pack_sequence_as`` for any structure, by a recursive walk."""
    _check_count(len(_flatten_walk(structure)), flat, structure)
    return _build(structure, iter(flat))


def _build(template: Any, leaves: Iterator[Any]) -> Any:
    """``template`` with its leaves taken in order from ``leaves`` (a function of its own, not a closure calling
    itself: such a closure is a reference cycle that keeps the leaves alive until a garbage collection)."""
    if not is_nested(template):
        return next(leaves)
    return _rebuild(template, [_build(c, leaves) for c in _children(template)])


def _check_count(count: int, flat: list, structure: Any) -> None:
    if count != len(flat):
        raise ValueError(
            f"Could not pack sequence. Structure had {count} atoms, but flat_sequence had {len(flat)} items.  "
            f"Structure: {structure}, flat_sequence: {flat}."
        )


def assert_same_structure(a: Any, b: Any, check_types: bool = True) -> None:
    """Raise TF's errors where two nests differ: ValueError for their nesting, lengths or keys, TypeError for their
    container types (a list against a tuple too, unless ``check_types`` is False); the second line names the place."""
    same = "The two structures don't have the same nested structure."

    def check(x: Any, y: Any, path: str) -> None:
        where = path or "the top"
        if is_nested(x) != is_nested(y):
            raise ValueError(f"{same}\n\nAt {where}: {type(x).__name__} vs {type(y).__name__}.")
        if not is_nested(x):
            return
        kind = _KINDS[type(x)]
        if kind != _KINDS[type(y)] or (check_types and type(x) is not type(y)):
            error = TypeError if check_types else ValueError
            raise error(f"{same}\n\nAt {where}: the sequence types differ ({type(x).__name__} vs "
                        f"{type(y).__name__}).")
        if kind == _MAPPING and _sorted_keys(x) != _sorted_keys(y):
            raise ValueError(f"{same}\n\nThe two dictionaries at {where} don't have the same keys: "
                             f"{_sorted_keys(x)} vs {_sorted_keys(y)}.")
        cx, cy = _children(x), _children(y)
        if len(cx) != len(cy):
            raise ValueError(f"{same}\n\nAt {where}: {len(cx)} vs {len(cy)} elements.")
        keys = _sorted_keys(x) if kind == _MAPPING else range(len(cx))
        for key, i, j in zip(keys, cx, cy):
            check(i, j, f"{path}[{key!r}]")

    check(a, b, "")


def map_structure(fn: Callable, *structures: Any, check_types: bool = True, expand_composites: bool = False) -> Any:
    """Apply ``fn`` leaf-wise across structures of the same shape (and container types, unless ``check_types`` is
    False)."""
    if not structures:
        raise ValueError("Must provide at least one structure")
    if len(structures) == 1 and type(structures[0]) in (tuple, list) and not any(map(is_nested, structures[0])):
        return type(structures[0])([fn(leaf) for leaf in structures[0]])  # the common flat case, without the walk
    for other in structures[1:]:
        assert_same_structure(structures[0], other, check_types=check_types)
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*leaves) for leaves in zip(*flats)])
