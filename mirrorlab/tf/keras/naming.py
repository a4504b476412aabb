"""Keras 3's automatic object names: the class name in snake case, made unique per name (``dense``,
``dense_1``, ...) within one worker process (each simulated worker counts on its own);
``clear_session`` starts the counts again."""

from __future__ import annotations

import re
import threading
import contextlib
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ...runtime import current_environment

__all__ = ["auto_name", "clear_session", "to_snake_case", "keras_path", "keras_path_scope", "mark_keras_weight"]

_lock = threading.Lock()
_paths = threading.local()  # ``stack``: the names of the layers whose scopes are open (Keras' object path)


def to_snake_case(name: str) -> str:
    """``RMSprop`` -> ``rm_sprop``, ``Conv2D`` -> ``conv2d``, ``InputLayer`` -> ``input_layer`` (Keras' rule)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _counts() -> defaultdict:
    return current_environment().process_state.setdefault("keras_name_uids", defaultdict(int))


def auto_name(class_name: str) -> str:
    """The next unused automatic name for an object of ``class_name``."""
    name = to_snake_case(class_name)
    with _lock:
        counts = _counts()
        unique = f"{name}_{counts[name]}" if counts[name] else name
        counts[name] += 1
    return unique


def clear_session() -> None:
    """Forget the names given so far (``keras.backend.clear_session``): the next Dense is ``dense`` again."""
    with _lock:
        _counts().clear()


@contextlib.contextmanager
def keras_path_scope(name: str) -> Iterator[None]:
    """Within the block, Keras paths of new weights start with ``name`` (a layer's or model's; TF's name scopes are
    not part of a Keras path)."""
    stack = _paths.__dict__.setdefault("stack", [])
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


def keras_path(name: str) -> str:
    """Keras 3's ``variable.path`` of a weight ``name`` made now: the open layers' names, then ``name``."""
    return "/".join([*getattr(_paths, "stack", []), name])


def mark_keras_weight(var: Any, path: str) -> Any:
    """``var`` marked as a Keras weight (restored with Keras' own assign, see train.restoring) with Keras' ``path``."""
    var._keras_weight = True
    var._keras_path = path
    return var
