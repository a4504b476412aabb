"""A stable fingerprint of a dataset graph, for ``Dataset.snapshot``'s directory (TF hashes the input's GraphDef).

Two pipelines built the same way (the same ops, arguments, functions and captured values) get the same fingerprint,
in this process and in the next run of the program; any difference in them gives another. What cannot be described
stably (an object whose only description is its address) makes the fingerprint differ between processes: a
snapshot is then written again rather than read for the wrong pipeline.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

import numpy as np

from .dataset import Dataset

__all__ = ["fingerprint"]

# State a node keeps while it is iterated (seed generators, a cache's elements) or derives from its arguments: not
# part of what the pipeline is, and it changes from one pass to the next.
_VOLATILE = frozenset({"_seeds", "_memory", "_stream", "_upcoming", "_identity", "_spec_source", "_hashed"})


def fingerprint(dataset: Any) -> str:
    """The fingerprint of ``dataset``'s graph as a decimal string (TF names its snapshot directories so)."""
    digest = hashlib.sha256()
    _Feeder(digest).feed(dataset)
    return str(int.from_bytes(digest.digest()[:8], "big"))


class _Feeder:
    """Feeds a canonical description of a value into a hash, once per object (graphs share nodes)."""

    def __init__(self, digest: Any) -> None:
        self.digest = digest
        self.seen: dict[int, int] = {}

    def put(self, *parts: Any) -> None:
        for part in parts:
            self.digest.update(part if isinstance(part, bytes) else str(part).encode())
            self.digest.update(b"\x00")

    def feed(self, value: Any) -> None:
        if isinstance(value, (type(None), bool, int, float, complex, str, bytes, range, np.dtype, np.generic)):
            self.put(type(value).__name__, repr(value))
            return
        if id(value) in self.seen:  # a node or object already described: refer to it by its order
            self.put("seen", self.seen[id(value)])
            return
        self.seen[id(value)] = len(self.seen)
        if isinstance(value, np.ndarray):
            self.put("ndarray", value.dtype.str, value.shape)
            self.put(value.tobytes() if value.dtype != object else repr(value.tolist()))
        elif isinstance(value, (list, tuple)):
            self.put(type(value).__qualname__, len(value))
            for item in value:
                self.feed(item)
        elif isinstance(value, dict):
            self.put("dict", len(value))
            for key in sorted(value, key=repr):
                self.feed(key)
                self.feed(value[key])
        elif isinstance(value, Dataset):
            self.put("dataset", type(value).__module__, type(value).__qualname__)
            self._attributes(value)
        elif isinstance(value, types.FunctionType):
            self._function(value)
        elif isinstance(value, types.MethodType):
            self.put("method")
            self.feed(value.__func__)
            self.feed(value.__self__)
        elif isinstance(value, types.CodeType):
            self.put("code", value.co_code, value.co_names, value.co_varnames, value.co_freevars)
            self.feed(value.co_consts)
        elif isinstance(value, types.ModuleType):
            self.put("module", value.__name__)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            self.put("object", type(value).__module__, type(value).__qualname__)
            self._attributes(value)
        else:  # builtins, ufuncs, classes: their repr names them (an address in it varies between processes)
            self.put("other", type(value).__qualname__, repr(value))

    def _attributes(self, value: Any) -> None:
        names = sorted(name for name in vars(value) if name not in _VOLATILE)
        self.put(len(names))
        for name in names:
            self.put(name)
            self.feed(vars(value)[name])

    def _function(self, fn: types.FunctionType) -> None:
        """A Python function by what it computes: its code, defaults and the values it closes over."""
        self.put("function", fn.__module__, fn.__qualname__)
        self.feed(fn.__code__)
        self.feed(fn.__defaults__)
        self.feed(fn.__kwdefaults__)
        cells = []
        for cell in fn.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # an empty cell
                cells.append(None)
        self.feed(tuple(cells))
        self.put("globals")
        for name in sorted(set(fn.__code__.co_names) & set(fn.__globals__)):
            global_value = fn.__globals__[name]
            self.put(name)
            if isinstance(global_value, types.FunctionType):  # a helper it calls: its code, not all it reaches
                self.put(global_value.__module__, global_value.__qualname__)
                self.feed(global_value.__code__)
            elif not isinstance(global_value, (types.ModuleType, type)):  # a global constant it reads
                self.feed(global_value)
