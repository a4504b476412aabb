"""Per-replica containers returned by and passed to ``strategy.run``: ``PerReplica`` and ``Mirrored``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["DistributedValues", "PerReplica", "Mirrored", "PerReplicaSpec"]


class DistributedValues:
    """One value per local replica of this worker (index = local replica id)."""

    def __init__(self, values: Sequence[Any]) -> None:
        self._values = tuple(values)

    @property
    def values(self) -> tuple:
        return self._values

    def __len__(self) -> int:
        return len(self._values)

    def _get_replica(self, local_id: int) -> Any:
        return self._values[local_id]

    def __repr__(self) -> str:
        body = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self._values))
        return f"{type(self).__name__}:{{\n{body}\n}}"

    __str__ = __repr__


class PerReplica(DistributedValues):
    """Values that may differ between replicas (a batch shard, a per-replica loss)."""


class Mirrored(DistributedValues):
    """Values that are identical on every replica (e.g. an all-reduce result)."""


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
