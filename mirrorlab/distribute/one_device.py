"""TF's ``ReductionToOneDevice``: how ``MirroredStrategy`` on CPUs reduces and gathers int32 values.

TF 2.21's MirroredStrategy over CPU devices uses collective ops, except for int32 values, which it sends
to one device instead (``MirroredExtended._get_cross_device_ops``): gathers are a plain ``ConcatV2``
(negative axes work, scalars fail, a mismatch raises at once and poisons nothing) and all-reduces a
local ``AddN``. Every int32 value gets a ReductionToOneDevice of its own, so a batch of several values
(``batch_reduce_to``, a nest all-reduced in replicas) with any int32 among them is refused, on any number of
devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import errors
from .kernel_dtypes import tf_dtype
from ..tensor import array_module, dtype_name, frozen

__all__ = ["is_int32", "concat_on_one_device", "check_batch_placement"]

MIXED_BATCH = "Inputs to batch_reduce_to must be either all on the host or all on the compute devices."


def is_int32(components: Sequence[Any]) -> bool:
    """Whether TF routes this value (its per-replica components) to one device."""
    return any(dtype_name(c) == "int32" for c in components)


def check_batch_placement(leaves: Sequence[Sequence[Any]]) -> bool:
    """True if a batch of reduced values (each its per-replica parts) is one int32 value, which goes to one device;
    raises TF's ValueError for several values with any int32 among them (MirroredStrategy's batch needs one
    cross-device-ops object for all, and each int32 value gets a new one)."""
    int32 = [is_int32(leaf) for leaf in leaves]
    if len(int32) > 1 and any(int32):
        raise ValueError(f"{MIXED_BATCH}\nFix: reduce each int32 value in a call of its own (TF's MirroredStrategy "
                         "cannot batch int32 values, with each other or with other dtypes).")
    return int32 == [True]


def _dims(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def concat_on_one_device(components: Sequence[Any], axis: int) -> Any:
    """``ConcatV2`` of the per-replica components along ``axis``, with TF's errors."""
    first = components[0]
    rank = first.ndim
    if rank == 0:
        raise errors.InvalidArgumentError("ConcatOp : Can't concatenate scalars (use tf.stack instead)\nFix: "
                                          "gather values of rank >= 1, e.g. expand a scalar to shape [1].")
    if not -rank <= axis < rank:
        raise errors.InvalidArgumentError(f"ConcatOp : Expected concatenating dimensions in the range [{-rank}, "
                                          f"{rank}), but got {axis}")
    along = axis % rank
    for k, other in enumerate(components[1:], start=1):
        if other.dtype != first.dtype:
            raise errors.InvalidArgumentError(
                f"cannot compute ConcatV2 as input #{k}(zero-based) was expected to be a {tf_dtype(first)} tensor "
                f"but is a {tf_dtype(other)} tensor")
        if other.ndim != rank:
            raise errors.InvalidArgumentError(
                f"ConcatOp : Ranks of all input tensors should match: shape[0] = {_dims(first.shape)} vs. "
                f"shape[{k}] = {_dims(other.shape)}")
        for d in range(rank):
            if d != along and other.shape[d] != first.shape[d]:
                raise errors.InvalidArgumentError(
                    f"ConcatOp : Dimension {d} in both shapes must be equal: shape[0] = {_dims(first.shape)} vs. "
                    f"shape[{k}] = {_dims(other.shape)}")
    return frozen(array_module(first).concatenate(list(components), axis=along))
