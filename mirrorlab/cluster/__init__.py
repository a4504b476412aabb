"""Cluster description and roles: ``ClusterSpec``, ``TF_CONFIG``, cluster resolvers and who is chief."""

from mirrorlab.cluster.resolvers import ClusterResolver, SimpleClusterResolver, TFConfigClusterResolver
from mirrorlab.cluster.roles import (
    ALLOWED_TASK_TYPES,
    WorkerRole,
    collective_leader,
    coordination_leader,
    id_in_cluster,
    is_chief,
    normalize_cluster_spec,
    validate_cluster_spec,
    worker_count,
    worker_role,
)
from mirrorlab.cluster.spec import ClusterDict, ClusterSpec
from mirrorlab.cluster.tf_config import TF_CONFIG_EXAMPLE, read_tf_config

__all__ = [
    "ClusterSpec", "ClusterDict", "ClusterResolver", "SimpleClusterResolver", "TFConfigClusterResolver",
    "read_tf_config", "TF_CONFIG_EXAMPLE", "ALLOWED_TASK_TYPES", "WorkerRole", "normalize_cluster_spec",
    "validate_cluster_spec", "is_chief", "worker_count", "id_in_cluster", "collective_leader",
    "coordination_leader", "worker_role",
]
