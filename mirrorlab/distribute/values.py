"""Per-replica containers returned by and passed to ``strategy.run``: ``PerReplica`` and ``Mirrored``."""

from __future__ import annotations

import operator
from abc import ABC
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import to_host
from . import context

__all__ = ["DistributedValues", "ReplicaValues", "PerReplica", "Mirrored", "PerReplicaSpec"]


class DistributedValues(ABC):
    """TF's ``tf.distribute.DistributedValues``, for ``isinstance``: per-replica and mirrored values, and (as in TF)
    distributed variables, which variables.py registers. mirrorlab's own code tells them apart (``ReplicaValues``)."""


class ReplicaValues:
    """One value per local replica of this worker (index = local replica id): what ``PerReplica`` and ``Mirrored``
    share; distributed variables are not among them."""

    def __init__(self, values: Sequence[Any]) -> None:
        self._values = tuple(values)

    @property
    def values(self) -> tuple:
        return self._values

    def _get_replica(self, local_id: int) -> Any:
        return self._values[local_id]

    def __repr__(self) -> str:
        body = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self._values))
        return f"{type(self).__name__}:{{\n{body}\n}}"

    __str__ = __repr__


DistributedValues.register(ReplicaValues)


class PerReplica(ReplicaValues):
    """Values that may differ between replicas (a batch shard, a per-replica loss)."""


class Mirrored(ReplicaValues):
    """Values that are identical on every replica (e.g. an update's result). As TF's, it acts as its value:
    public attributes, operators and NumPy conversion use this replica's copy (the first outside ``run``)."""

    def _get(self) -> Any:
        """The copy of the replica running now (the first one in cross-replica context)."""
        frame = context.current_frame()
        return self._values[frame.replica._local_id if frame is not None and frame.replica is not None else 0]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return getattr(self._get(), name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self._get(), dtype)

    def numpy(self) -> Any:
        """This replica's value as a NumPy copy (TF's tensors have ``numpy()``; mirrorlab's are arrays)."""
        value = self._get()
        return value.numpy() if callable(getattr(value, "numpy", None)) else np.array(to_host(value))


def _delegate_operators(cls: type) -> None:
    """Give ``cls`` Python's arithmetic and comparison operators, applied to ``cls._get()``."""
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor"):
        op = getattr(operator, name)
        dunder = name.rstrip("_")
        setattr(cls, f"__{dunder}__", lambda self, other, op=op: op(self._get(), other))
        setattr(cls, f"__r{dunder}__", lambda self, other, op=op: op(other, self._get()))
    for name in ("lt", "le", "gt", "ge", "neg", "abs", "invert", "getitem"):
        op = getattr(operator, name)
        setattr(cls, f"__{name}__", lambda self, *other, op=op: op(self._get(), *other))


_delegate_operators(Mirrored)


class PerReplicaSpec:
    """The type of a PerReplica value: one spec per local replica (a distributed dataset's element_spec)."""

    def __init__(self, *value_specs: Any) -> None:
        self._value_specs = tuple(value_specs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PerReplicaSpec) and other._value_specs == self._value_specs

    def __hash__(self) -> int:
        return hash(self._value_specs)

    def __repr__(self) -> str:
        return f"PerReplicaSpec({', '.join(repr(s) for s in self._value_specs)})"
