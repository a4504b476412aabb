"""``mirrorlab.data``: lazy, streaming input pipelines in the style of ``tf.data``, and TF 2.21's rules for
splitting them across workers and replicas (auto-sharding, rebatching, partial and empty batches)."""

from . import experimental
from .dataset import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, DatasetSpec, TensorSpec
from .options import SHARD_HINT, AutoShardPolicy, DistributeOptions, Options, ThreadingOptions
from .sources import NumpyFileDataset, TextLineDataset

__all__ = ["Dataset", "DatasetSpec", "TensorSpec", "TextLineDataset", "NumpyFileDataset", "Options",
           "ThreadingOptions", "AutoShardPolicy", "DistributeOptions", "SHARD_HINT", "AUTOTUNE", "INFINITE_CARDINALITY",
           "UNKNOWN_CARDINALITY", "experimental"]
