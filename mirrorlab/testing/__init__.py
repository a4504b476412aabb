"""Property-testing your own training code on simulated clusters: Hypothesis strategies (``strategies``), named
cluster shapes (``combinations``) and the pytest plugin (``sim_cluster`` fixture, ``cluster_shapes`` marker,
replay lines on failure) that ``pip install mirrorlab`` registers."""

from . import combinations, strategies
from .combinations import ClusterShape
from .strategies import cluster_shapes, datasets, fault_schedules, global_batches, seeds, tf_configs

__all__ = ["combinations", "strategies", "ClusterShape", "cluster_shapes", "seeds", "fault_schedules",
           "tf_configs", "global_batches", "datasets"]
