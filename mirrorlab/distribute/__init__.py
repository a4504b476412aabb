"""The strategy layer: contexts, per-replica values, variables, replica execution and the strategies."""

from types import SimpleNamespace

from ..aggregation import ReduceOp
from ..cluster import ClusterResolver, SimpleClusterResolver, TFConfigClusterResolver
from ..communication import CollectiveCommunication, CollectiveHints, CommunicationImplementation, CommunicationOptions
from .context import (experimental_set_strategy, get_replica_context, get_strategy, has_strategy,
                      in_cross_replica_context)
from .cross_device_ops import CrossDeviceOps, HierarchicalCopyAllReduce, NcclAllReduce, ReductionToOneDevice
from .input_context import InputContext, ValueContext
from .input_lib import DistributedDataset, DistributedIterator, InputOptions, InputReplicationMode
from .preemption import PreemptionCheckpointHandler, TerminationConfig
from .replica_context import ReplicaContext
from .strategy import (ExperimentalMultiWorkerMirroredStrategy, MirroredStrategy, MultiWorkerMirroredStrategy,
                       OneDeviceStrategy, RunOptions, Strategy, StrategyExtended)
from .values import DistributedValues, Mirrored, PerReplica, PerReplicaSpec
from .distributed_variables import DistributedVariable, MirroredVariable, SyncOnReadVariable
from .variables import Variable

experimental = SimpleNamespace(CommunicationOptions=CommunicationOptions,
                               CommunicationImplementation=CommunicationImplementation,
                               CollectiveCommunication=CollectiveCommunication, CollectiveHints=CollectiveHints,
                               MultiWorkerMirroredStrategy=ExperimentalMultiWorkerMirroredStrategy,
                               PreemptionCheckpointHandler=PreemptionCheckpointHandler,
                               TerminationConfig=TerminationConfig, ValueContext=ValueContext)
cluster_resolver = SimpleNamespace(ClusterResolver=ClusterResolver, SimpleClusterResolver=SimpleClusterResolver,
                                   TFConfigClusterResolver=TFConfigClusterResolver)

__all__ = [
    "ReduceOp", "experimental", "cluster_resolver", "InputOptions", "InputReplicationMode", "DistributedDataset",
    "DistributedIterator",
    "get_replica_context", "get_strategy", "has_strategy", "in_cross_replica_context", "experimental_set_strategy",
    "CrossDeviceOps", "ReductionToOneDevice", "HierarchicalCopyAllReduce", "NcclAllReduce", "RunOptions",
    "InputContext", "ValueContext", "ReplicaContext", "MirroredStrategy", "MultiWorkerMirroredStrategy",
    "OneDeviceStrategy", "Strategy", "StrategyExtended", "DistributedValues", "Mirrored", "PerReplica", "PerReplicaSpec",
    "DistributedVariable", "MirroredVariable", "SyncOnReadVariable", "Variable",
]
