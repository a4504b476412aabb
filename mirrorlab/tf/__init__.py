"""The TensorFlow-compatible API: ``import mirrorlab.tf as tf`` and TF 2.21 code runs with that line changed.

``tf.distribute`` (the strategies, from mirrorlab's core), ``tf.data``, ``tf.keras``, ``tf.train``, ``tf.errors``,
``tf.config`` and the everyday ops, as in TensorFlow. This package imitates TensorFlow's numeric library, tf.data and
Keras on top of the core; the core never imports it.
"""

from .. import cluster, config, distribute, errors, nest, train
from . import _frontend  # noqa: F401  (installs TF's rules in the core)
from . import data, dtypes, io, keras, linalg, math, nn, random
from .array_ops import (abs, add, add_n, argmax, argmin, cast, clip_by_value, concat, divide, equal, exp, expand_dims,
                        fill, gather, greater, greater_equal, identity, less, less_equal, log, matmul, maximum, minimum,
                        multiply, negative, not_equal, one_hot, ones, ones_like, range, rank, reduce_all, reduce_any,
                        reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_sum, reshape, shape, sigmoid, size,
                        sqrt, square, squeeze, stack, stop_gradient, subtract, tanh, transpose, truediv, where, zeros,
                        zeros_like)
from .clip_ops import clip_by_global_norm, clip_by_norm
from .manip_ops import (argsort, boolean_mask, cond, cumsum, einsum, eye, gather_nd, linspace, norm, pad, reverse,
                        sort, split, tensordot, tile, unstack)
from .math_ops import floor, logical_and, logical_not, logical_or, pow, reduce_logsumexp, round, sign
from .tensor_conversion import convert_to_tensor, is_tensor
from .dtypes import (bool, complex64, complex128, float16, float32, float64, int8, int16, int32, int64, string,
                     uint8, uint16, uint32, uint64)
from .._version import __version__
from .autodiff import GradientTape
from .constant import constant
from ..aggregation import ReduceOp, VariableAggregation, VariableAggregationV2, VariableSynchronization
from ..communication import CollectiveCommunication, CommunicationImplementation, CommunicationOptions
from .data import TensorSpec
from .function import function
from .logging_ops import print_v2 as print  # tf.print (kept out of __all__: a star import must not shadow print)
from .module import Module
from .name_scope import name_scope
from ..tensor import IndexedSlices, Tensor
from .tensor_shape import TensorShape
from ..distribute import (DistributedValues, InputContext, Mirrored, MirroredStrategy, MirroredVariable,
                          MultiWorkerMirroredStrategy, PerReplica, ReplicaContext, Strategy, StrategyExtended,
                          SyncOnReadVariable, ValueContext, Variable, get_replica_context, get_strategy, has_strategy,
                          in_cross_replica_context)
from .public_tensors import hand_out_tensors as _hand_out_tensors

for _namespace in (globals(), vars(math), vars(nn), vars(linalg), vars(random)):
    _hand_out_tensors(_namespace)

__all__ = [
    "cluster", "config", "data", "distribute", "dtypes", "errors", "io", "keras", "linalg", "math", "nest", "nn",
    "random", "train", "constant", "ReduceOp", "VariableAggregation", "VariableAggregationV2",
    "VariableSynchronization", "CollectiveCommunication", "CommunicationImplementation", "CommunicationOptions",
    "DistributedValues", "InputContext", "Mirrored", "MirroredStrategy", "MirroredVariable",
    "MultiWorkerMirroredStrategy", "PerReplica", "ReplicaContext", "Strategy", "StrategyExtended",
    "SyncOnReadVariable", "ValueContext", "Variable", "get_replica_context",
    "get_strategy", "has_strategy", "in_cross_replica_context", "function", "Module", "name_scope", "TensorSpec",
    "TensorShape", "Tensor", "IndexedSlices", "GradientTape", "add_n", "__version__",
]
