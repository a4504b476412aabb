"""``tf.distribute.CrossDeviceOps`` and its three kinds, which MirroredStrategy accepts as ``cross_device_ops``.

In TF they pick how values are combined across one worker's devices (copy to one device, hierarchical copies, or
NCCL); the sums they give are the same, so here every kind combines through the strategy's own collectives, and
the classes keep TF's constructors, argument checks and ``reduce``/``batch_reduce``/``broadcast`` methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..aggregation import ReduceOp
from .context import get_strategy

__all__ = ["CrossDeviceOps", "ReductionToOneDevice", "HierarchicalCopyAllReduce", "NcclAllReduce",
           "check_cross_device_ops"]


class CrossDeviceOps:
    """Reductions and broadcasts across the current strategy's devices, called in cross-replica context."""

    def reduce(self, reduce_op: ReduceOp, per_replica_value: Any, destinations: Any, options: Any = None) -> Any:
        """``per_replica_value`` reduced onto ``destinations`` (as ``extended.reduce_to``)."""
        _check_reduce_op(reduce_op)
        return get_strategy().extended.reduce_to(reduce_op, per_replica_value, destinations, options)

    def batch_reduce(self, reduce_op: ReduceOp, value_destination_pairs: Sequence[tuple[Any, Any]],
                     options: Any = None) -> list[Any]:
        """Each ``(value, destinations)`` pair reduced, in one batch (as ``extended.batch_reduce_to``)."""
        _check_reduce_op(reduce_op)
        return get_strategy().extended.batch_reduce_to(reduce_op, value_destination_pairs, options)

    def broadcast(self, tensor: Any, destinations: Any) -> Any:
        """``tensor`` mirrored onto ``destinations`` (as ``extended.broadcast_to``)."""
        return get_strategy().extended.broadcast_to(tensor, destinations)


class ReductionToOneDevice(CrossDeviceOps):
    """TF's copy-everything-to-one-device reduction (``reduce_to_device``, ``accumulation_fn`` are accepted)."""

    def __init__(self, reduce_to_device: str | None = None, accumulation_fn: Any = None) -> None:
        self._reduce_to_device = reduce_to_device
        self._accumulation_fn = accumulation_fn


class _PackedAllReduce(CrossDeviceOps):
    """An all-reduce that packs tensors into ``num_packs`` groups (0: no packing)."""

    _label = ""

    def __init__(self, num_packs: int = 1) -> None:
        if num_packs < 0:
            raise ValueError(f"{self._label} requires num_packs >= 0, but {num_packs} is specified\nFix: pass "
                             "num_packs=0 (no packing) or a positive number of packs.")
        self._num_packs = num_packs


class HierarchicalCopyAllReduce(_PackedAllReduce):
    """TF's hierarchical-copy all-reduce (for DGX-1-like GPU topologies)."""

    _label = "HierarchicalCopy"


class NcclAllReduce(_PackedAllReduce):
    """TF's NCCL all-reduce (mirrorlab's collectives also run on CPU devices, where TF's CPU build has no NCCL)."""

    _label = "NCCL all-reduce"


def _check_reduce_op(reduce_op: Any) -> None:
    if not isinstance(reduce_op, ReduceOp):
        raise ValueError("`reduce_op` must be Reduce.SUM or Reduce.MEAN.\nFix: pass tf.distribute.ReduceOp.SUM or "
                         f"ReduceOp.MEAN, not {reduce_op!r}.")


def check_cross_device_ops(cross_device_ops: Any) -> None:
    """TF fails on the first reduction when ``cross_device_ops`` is not a CrossDeviceOps; say so at construction."""
    if cross_device_ops is not None and not callable(getattr(cross_device_ops, "batch_reduce", None)):
        raise AttributeError(
            f"'{type(cross_device_ops).__name__}' object has no attribute 'batch_reduce'\nFix: pass "
            "cross_device_ops=tf.distribute.ReductionToOneDevice(), HierarchicalCopyAllReduce() or NcclAllReduce(), "
            "or leave it None.")
