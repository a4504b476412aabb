"""The strategy layer: contexts, per-replica values, variables, replica execution and the strategies."""

from .context import (get_cross_replica_context, get_replica_context, get_strategy, has_strategy,
                      in_cross_replica_context)
from .input_context import InputContext, ValueContext
from .replica_context import ReplicaContext
from .strategy import MirroredStrategy, MultiWorkerMirroredStrategy, Strategy, StrategyExtended
from .values import DistributedValues, Mirrored, PerReplica
from .variables import DistributedVariable, MirroredVariable, SyncOnReadVariable, Variable

__all__ = [
    "get_cross_replica_context", "get_replica_context", "get_strategy", "has_strategy", "in_cross_replica_context",
    "InputContext", "ValueContext", "ReplicaContext", "MirroredStrategy", "MultiWorkerMirroredStrategy",
    "Strategy", "StrategyExtended", "DistributedValues", "Mirrored", "PerReplica", "DistributedVariable",
    "MirroredVariable", "SyncOnReadVariable", "Variable",
]
