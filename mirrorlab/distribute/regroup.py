"""Turning per-replica results into nests of ``PerReplica`` (TF's ``regroup``) and back (``select_replica``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import nest
from .values import PerReplica, ReplicaValues

__all__ = ["regroup", "select_replica"]


def regroup(values: Sequence[Any], wrap: type = PerReplica, always_wrap: bool = False) -> Any:
    """One structure per replica -> one structure whose differing leaves are ``wrap`` objects.

    A leaf that is the same object on every replica (a variable, a captured constant) is returned
    unwrapped, unless ``always_wrap``; with a single replica everything is unwrapped.
    """
    v0 = values[0]
    if not nest.is_nested(v0):  # a leaf (asked first: the ABC check for a Mapping is slow, and most values are leaves)
        return v0 if not always_wrap and all(v is v0 for v in values[1:]) else wrap(values)
    if isinstance(v0, (list, tuple)):
        for v in values[1:]:
            if not isinstance(v, (list, tuple)) or len(v) != len(v0):
                raise ValueError(f"Replicas returned differently structured values: {v0!r} vs {v!r}. "
                                 "Fix: return the same structure from every replica.")
        items = [regroup([v[i] for v in values], wrap, always_wrap) for i in range(len(v0))]
        if isinstance(v0, tuple) and hasattr(type(v0), "_fields"):
            return type(v0)(*items)
        return type(v0)(items)
    for v in values[1:]:  # (a Mapping: nested, and neither a list nor a tuple)
        if not isinstance(v, Mapping) or set(v) != set(v0):
            raise ValueError(f"Replicas returned dicts with different keys: {sorted(v0)} vs {sorted(v)}. "
                             "Fix: return the same keys from every replica.")
    return type(v0)((k, regroup([v[k] for v in values], wrap, always_wrap)) for k in v0)


def select_replica(local_id: int, structure: Any) -> Any:
    """``structure`` as replica ``local_id`` sees it: each DistributedValues leaf replaced by its component."""
    if isinstance(structure, ReplicaValues):
        return structure._get_replica(local_id)
    if not nest.is_nested(structure):
        return structure
    leaves = nest.flatten(structure)
    picked = [v._get_replica(local_id) if isinstance(v, ReplicaValues) else v for v in leaves]
    return nest.pack_sequence_as(structure, picked)
