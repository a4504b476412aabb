"""``mirrorlab.data``: lazy, streaming input pipelines in the style of ``tf.data``, and TF 2.21's rules for
splitting them across workers and replicas (auto-sharding, rebatching, partial and empty batches)."""

from types import SimpleNamespace

from .dataset import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, TensorSpec
from .options import SHARD_HINT, AutoShardPolicy, DistributeOptions, Options
from .sources import NumpyFileDataset, TextLineDataset

experimental = SimpleNamespace(AutoShardPolicy=AutoShardPolicy, SHARD_HINT=SHARD_HINT, AUTOTUNE=AUTOTUNE,
                               INFINITE_CARDINALITY=INFINITE_CARDINALITY, UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY,
                               DistributeOptions=DistributeOptions)

__all__ = ["Dataset", "TensorSpec", "TextLineDataset", "NumpyFileDataset", "Options", "AutoShardPolicy",
           "DistributeOptions", "SHARD_HINT", "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "experimental"]
