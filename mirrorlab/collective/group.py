"""Collectives over all replicas of the cluster: a fixed-order local step over this worker's replicas,
then the ring algorithms across workers through the communicator.

Every instance is fingerprinted, fault hooks run before it, and one trace event per local replica
records it. Results are read-only arrays, identical (bit for bit) on every replica.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import errors
from ..aggregation import ReduceOp
from ..communication import Options
from ..tensor import array_module, dtype_name, frozen, shape_of
from ..trace import CollectiveEvent, Trace
from .allgather_ring import allgather_ring, concat_blocks
from .allreduce_ring import allreduce_ring
from .barrier import barrier
from .broadcast_tree import broadcast_tree
from .communicator import FIX_DESYNC, Communicator, Instance
from .message import Fingerprint
from .packing import group_by_size

__all__ = ["CollectiveGroup", "sum_in_order", "mean_of_sum"]


def sum_in_order(arrays: Sequence[Any]) -> Any:
    """``((a0 + a1) + a2) + ...`` into a fresh array (or ``a0`` itself for one array)."""
    if len(arrays) == 1:
        return arrays[0]
    xp = array_module(arrays[0])
    acc = xp.add(arrays[0], arrays[1], out=xp.empty(arrays[0].shape, arrays[0].dtype))
    for a in arrays[2:]:
        xp.add(acc, a, out=acc)
    return acc


def mean_of_sum(total: Any, count: int) -> Any:
    """``total / count`` with TF's dtype rule: floats keep their dtype, integers divide to float64."""
    if np.dtype(total.dtype).kind in "fc":
        return frozen(total / total.dtype.type(count))
    return frozen(total / np.float64(count))


class CollectiveGroup:
    """This worker's view of the cluster-wide replica group (``comm.size`` workers x ``num_local``).

    ``before_collective(seq)`` is the fault hook (the simulator crashes or delays workers there).
    """

    def __init__(self, comm: Communicator, num_local: int, devices: Sequence[str], options: Options,
                 trace: Trace | None = None, before_collective: Callable[[int], None] | None = None) -> None:
        self.comm = comm
        self.num_local = num_local
        self.devices = list(devices)
        self.options = options
        self.trace = trace
        self._before = before_collective

    @property
    def num_replicas(self) -> int:
        return self.comm.size * self.num_local

    @property
    def worker(self) -> int:
        return self.comm.rank

    # -- instance bookkeeping -------------------------------------------------------------------

    def _run(self, fingerprint: Fingerprint, site: str, options: Options | None,
             local_shapes: Sequence[Any], body: Callable[[Instance], Any]) -> Any:
        opts = self.options.merge(options)
        inst = self.comm.start(fingerprint, site, opts.timeout_seconds)
        if self._before is not None:
            self._before(inst.state.seq)
        start = self.comm.now()
        status, text = "ok", ""
        try:
            return body(inst)
        except errors.OpError as exc:
            status, text = "error", f"{type(exc).__name__}: {exc.message.splitlines()[0]}"
            raise
        finally:
            inst.done()
            self._record(inst, fingerprint, site, local_shapes, start, status, text)

    def _record(self, inst: Instance, fp: Fingerprint, site: str, local_shapes: Sequence[Any],
                start: float, status: str, text: str) -> None:
        if self.trace is None:
            return
        end = self.comm.now()
        base = self.worker * self.num_local
        for k, shape in enumerate(local_shapes):
            self.trace.add(CollectiveEvent(
                worker=self.worker, replica=base + k, seq=inst.state.seq, op=fp.op, detail=fp.detail,
                dtype=fp.dtype, shape=_jsonable(shape), start=start, end=end, site=site,
                status=status, error=text))

    def _local_mismatch(self, what: str, leaf: list[Any], expected: str, got: str, k: int) -> errors.OpError:
        seq = self.comm.seq + 1
        text = (f"{what} mismatch in the collective instance {seq}. Op at device {self.devices[0]} expected "
                f"{expected} but another member in the group ({self.devices[k]}) expected {got}. "
                "This is likely due to different input shapes at different members of the collective op.\n"
                f"  local replica shapes on worker {self.worker}: "
                f"{[list(shape_of(a)) for a in leaf]}, dtypes {[dtype_name(a) for a in leaf]}\n{FIX_DESYNC}")
        return self.comm.fail(errors.CollectiveMismatchError(text))

    # -- collectives ------------------------------------------------------------------------------

    def all_reduce(self, op: ReduceOp, leaves: Sequence[Sequence[Any]], site: str,
                   options: Options | None = None) -> list[Any]:
        """Reduce each leaf over all replicas; ``leaves[i][k]`` is leaf i on local replica k."""
        for leaf in leaves:
            for k, a in enumerate(leaf[1:], start=1):
                if a.dtype != leaf[0].dtype:
                    raise self._local_mismatch("Data type", leaf, f"dtype {dtype_name(leaf[0])}", f"dtype {dtype_name(a)}", k)
                if a.shape != leaf[0].shape:
                    raise self._local_mismatch("Shape", leaf, f"shape {_dims(leaf[0])}", f"shape {_dims(a)}", k)
        sums = [sum_in_order(leaf) for leaf in leaves]
        out: list[Any] = [None] * len(sums)
        opts = self.options.merge(options)
        for pack in group_by_size(sums, opts.bytes_per_pack):
            by_dtype: dict[str, list[int]] = {}
            for i in pack:
                by_dtype.setdefault(dtype_name(sums[i]), []).append(i)
            for dtype, idx in by_dtype.items():
                for i, value in zip(idx, self._reduce_pack([sums[i] for i in idx], dtype, site, options)):
                    out[i] = value
        if op == ReduceOp.MEAN:
            out = [mean_of_sum(v, self.num_replicas) for v in out]
        return [frozen(v) for v in out]

    def _reduce_pack(self, arrays: list[Any], dtype: str, site: str, options: Options | None) -> list[Any]:
        shapes = [shape_of(a) for a in arrays]
        fp = Fingerprint("all_reduce", dtype, shapes[0] if len(shapes) == 1 else tuple(shapes), "SUM")
        local_shapes = [fp.shape] * self.num_local

        def body(inst: Instance) -> list[Any]:
            if inst.size == 1:
                return arrays
            xp = array_module(arrays[0])
            flat = arrays[0].reshape(-1) if len(arrays) == 1 else xp.concatenate([a.reshape(-1) for a in arrays])
            total = allreduce_ring(inst, flat)
            parts, pos = [], 0
            for a in arrays:
                parts.append(total[pos:pos + a.size].reshape(a.shape))
                pos += a.size
            return parts

        return self._run(fp, site, options, local_shapes, body)

    def all_gather(self, leaves: Sequence[Sequence[Any]], site: str, options: Options | None = None) -> list[Any]:
        """Concatenate each leaf along axis 0 over all replicas, in global replica order."""
        out = []
        for leaf in leaves:
            first = leaf[0]
            if first.ndim == 0:
                raise errors.InvalidArgumentError(
                    "all_gather needs values of rank >= 1; got a scalar. Fix: gather a vector, "
                    "e.g. reshape the value to [1].")
            for k, a in enumerate(leaf[1:], start=1):
                if a.dtype != first.dtype:
                    raise self._local_mismatch("Data type", leaf, f"dtype {dtype_name(first)}", f"dtype {dtype_name(a)}", k)
                if a.shape[1:] != first.shape[1:]:
                    raise self._local_mismatch("Shape", leaf, f"shape {_dims(first)}", f"shape {_dims(a)}", k)
            block = first if len(leaf) == 1 else array_module(first).concatenate(leaf, axis=0)
            fp = Fingerprint("all_gather", dtype_name(first), (None, *shape_of(first)[1:]))

            def body(inst: Instance, block: Any = block) -> Any:
                return block if inst.size == 1 else concat_blocks(allgather_ring(inst, block))

            out.append(frozen(self._run(fp, site, options, [shape_of(a) for a in leaf], body)))
        return out

    def broadcast(self, values: Sequence[Any], site: str, options: Options | None = None) -> list[Any]:
        """The chief's (rank 0's) value of each leaf on every worker; shapes and dtypes must agree."""
        out = []
        for value in values:
            fp = Fingerprint("broadcast", dtype_name(value), shape_of(value), "root 0")

            def body(inst: Instance, value: Any = value) -> Any:
                return value if inst.size == 1 else broadcast_tree(inst, value, root=0)

            out.append(frozen(self._run(fp, site, options, [shape_of(value)] * self.num_local, body)))
        return out

    def barrier(self, site: str, what: str = "barrier", options: Options | None = None) -> None:
        """Wait until every worker reaches the same barrier (``what`` names it in reports)."""
        self._run(Fingerprint("barrier", detail=what), site, options, [()] * self.num_local,
                  lambda inst: None if inst.size == 1 else barrier(inst))


def _dims(a: Any) -> str:
    return "[" + ",".join(str(d) for d in shape_of(a)) + "]"


def _jsonable(shape: Any) -> list:
    return [_jsonable(s) if isinstance(s, tuple) else s for s in shape]
