"""Collectives over all replicas of the cluster: a fixed-order local step over this worker's replicas,
then the ring algorithms across workers through the communicator.

Every instance is fingerprinted, fault hooks run before it, and one trace event per local replica
records it. Results are read-only arrays, identical (bit for bit) on every replica.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import errors
from ..aggregation import ReduceOp
from ..placement import Placement
from ..communication import Options
from ..tensor import array_module, dtype_name, frozen, shape_of, to_host
from ..trace import CollectiveEvent, Trace
from .algorithm_choice import AllReduceAlgorithm, choose_all_reduce
from .allgather_ring import allgather_ring, concat_blocks
from .barrier import barrier
from .broadcast_tree import broadcast_tree
from .closed_form import ClosedForm
from .communicator import FIX_DESYNC, Communicator, Instance, shape_mismatch_text
from .message import Fingerprint
from .packing import group_by_size

__all__ = ["CollectiveGroup", "sum_in_order", "mean_of_sum", "truediv_dtype", "local_mismatch"]


def sum_in_order(arrays: Sequence[Any]) -> Any:
    """``((a0 + a1) + a2) + ...`` into a fresh array (or ``a0`` itself for one array)."""
    if len(arrays) == 1:
        return arrays[0]
    xp = array_module(arrays[0])
    acc = xp.add(arrays[0], arrays[1], out=xp.empty(arrays[0].shape, arrays[0].dtype))
    for a in arrays[2:]:
        xp.add(acc, a, out=acc)
    return acc


def local_mismatch(leaf: Sequence[Any], gather: bool = False) -> tuple[str, Any, Any, int] | None:
    """The first local replica whose value disagrees with replica 0's in dtype or shape (all but the first
    dimension for gathers), as ``(what, first, other, k)``; None when they agree."""
    first = leaf[0]
    for k, a in enumerate(leaf[1:], start=1):
        if a.dtype != first.dtype:
            return "dtype", first, a, k
        if (a.shape[1:] != first.shape[1:]) if gather else (a.shape != first.shape):
            return "shape", first, a, k
    return None


def truediv_dtype(dtype: Any) -> np.dtype:
    """The dtype of TF's ``truediv``: floats keep theirs, 8/16-bit integers give float32, wider ones float64."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return dtype
    return np.dtype(np.float32 if dtype.itemsize <= 2 else np.float64)


def mean_of_sum(total: Any, count: int) -> Any:
    """``total / count`` with TF's dtype rule (``truediv_dtype``)."""
    dtype = truediv_dtype(total.dtype)
    return frozen((total / dtype.type(count)).astype(dtype, copy=False))


class CollectiveGroup:
    """This worker's view of the cluster-wide replica group (``comm.size`` workers x ``num_local``).

    ``before_collective(seq)`` is the fault hook (the simulator crashes or delays workers there). ``step`` is the
    strategy's current ``run`` count, which traces recording values carry.
    """

    def __init__(self, comm: Communicator, num_local: int, devices: Sequence[str], options: Options,
                 trace: Trace | None = None, before_collective: Callable[[int], None] | None = None) -> None:
        self.comm = comm
        self.num_local = num_local
        self.devices = list(devices)
        self.options = options
        self.trace = trace
        self._before = before_collective
        self.placement = Placement(self.devices)
        self.step = 0
        self._plans: dict[tuple, tuple[Fingerprint, list[Any], AllReduceAlgorithm]] = {}  # see ``_pack_plan``

    @property
    def num_replicas(self) -> int:
        return self.comm.size * self.num_local

    @property
    def worker(self) -> int:
        return self.comm.rank

    # -- instance bookkeeping -------------------------------------------------------------------

    def _run(self, fingerprint: Fingerprint, site: str, options: Options | None,
             local_shapes: Sequence[Any], body: Callable[[Instance], Any],
             inputs: Sequence[Sequence[Any]] = (), algorithm: str | None = None,
             closed_form: ClosedForm | None = None) -> Any:
        """Run ``body`` as the next instance and trace it; ``inputs[k]`` are the arrays local replica k contributed
        (looked at only when the trace records values); ``algorithm`` names the cross-worker algorithm, if chosen;
        ``closed_form``: the same instance stated whole, which the transport may compute instead."""
        opts = self.options.merge(options)
        try:
            inst = self.comm.start(fingerprint, site, opts.timeout_seconds)
        except errors.OpError as exc:  # the group was aborted before: this worker entered the collective all the same
            self._record(self.comm.seq, fingerprint, site, local_shapes, self.comm.now(), "error", _error_text(exc),
                         inputs, None, algorithm)
            raise
        inst.algorithm = algorithm
        if self._before is not None:
            self._before(inst.state.seq)
        start = self.comm.now()
        status, text, result = "ok", "", None
        try:
            result = inst.run(body, closed_form)
            return result
        except errors.OpError as exc:
            status, text = "error", _error_text(exc)
            raise
        finally:
            inst.done()
            self._record(inst.state.seq, fingerprint, site, local_shapes, start, status, text, inputs, result,
                         algorithm)

    def _record(self, seq: int, fp: Fingerprint, site: str, local_shapes: Sequence[Any], start: float, status: str,
                text: str, inputs: Sequence[Sequence[Any]], result: Any, algorithm: str | None) -> None:
        if self.trace is None:
            return
        end = self.comm.now()
        worker, trace = self.comm.rank, self.trace
        base = worker * self.num_local
        values = trace.record_values
        digest = _digest(result) if values and status == "ok" else None
        step = self.step if values else None
        jsonable: dict[int, list] = {}  # local replicas usually share one shape object
        for k, shape in enumerate(local_shapes):
            if id(shape) not in jsonable:
                jsonable[id(shape)] = _jsonable(shape)
            nonfinite = _nonfinite(inputs[k] if k < len(inputs) else ()) if values else None
            # (positional: the event's fields in order, as building it by keyword costs a third more per replica)
            trace.add(CollectiveEvent(worker, base + k, seq, fp.op, fp.detail, fp.dtype, jsonable[id(shape)], start,
                                      end, site, status, text, step, nonfinite, digest, algorithm))

    def _check_local(self, leaves: Sequence[Sequence[Any]], gather: bool = False) -> None:
        """Local replicas must agree on dtype and shape (all but the first dimension for gathers)."""
        for leaf in leaves:
            mismatch = local_mismatch(leaf, gather)
            if mismatch is not None:
                raise self._local_error(*mismatch)

    def _local_error(self, what: str, first: Any, other: Any, k: int) -> errors.OpError:
        seq, device = self.comm.seq + 1, self.devices[k]
        detail = (f"\n  local replica shapes on worker {self.worker}: {[list(shape_of(first)), list(shape_of(other))]}"
                  f" (replicas 0 and {k}), dtypes {dtype_name(first)} and {dtype_name(other)}\n{FIX_DESYNC}")
        if what == "shape":
            text = shape_mismatch_text(seq, device, shape_of(other), shape_of(first))
            return self.comm.fail(errors.CollectiveShapeMismatchError(text + detail))
        text = (f"Collective instance {seq} expected data_type {dtype_name(first)} but got data_type "
                f"{dtype_name(other)} at device {device}.")
        return self.comm.fail(errors.CollectiveTypeMismatchError(text + detail))

    # -- collectives ------------------------------------------------------------------------------

    def all_reduce(self, op: ReduceOp, leaves: Sequence[Sequence[Any]], site: str, options: Options | None = None,
                   *, mean_count: int | None = None) -> list[Any]:
        """Reduce each leaf over all replicas; ``leaves[i][k]`` is leaf i on local replica k.

        MEAN divides the sum by ``mean_count`` (default: all replicas). The caller has checked the dtypes (the
        strategy applies TF's kernel lists, ``distribute/kernel_dtypes.py``)."""
        self._check_local(leaves)
        with self.placement.scope(0):  # local replicas' values meet on the first replica's device
            return self._all_reduce([self.placement.gathered(leaf) for leaf in leaves], op, site, options, mean_count)

    def _all_reduce(self, leaves: Sequence[Sequence[Any]], op: ReduceOp, site: str, options: Options | None,
                    mean_count: int | None) -> list[Any]:
        sums = [leaf[0] if len(leaf) == 1 else frozen(sum_in_order(leaf)) for leaf in leaves]
        if len(sums) == 1:  # one pack of one dtype, whatever the pack size
            out = self._reduce_pack(sums, dtype_name(sums[0]), op, site, options, leaves)
        else:
            out = [None] * len(sums)
            for pack in group_by_size(sums, self.options.merge(options).bytes_per_pack):
                by_dtype: dict[str, list[int]] = {}
                for i in pack:
                    by_dtype.setdefault(dtype_name(sums[i]), []).append(i)
                for dtype, idx in by_dtype.items():
                    packed = self._reduce_pack([sums[i] for i in idx], dtype, op, site, options,
                                               [leaves[i] for i in idx])
                    for i, value in zip(idx, packed):
                        out[i] = value
        count = self.num_replicas if mean_count is None else mean_count
        if op == ReduceOp.MEAN and count > 1:
            out = [mean_of_sum(v, count) for v in out]
        return [frozen(v) for v in out]

    def _reduce_pack(self, arrays: list[Any], dtype: str, op: ReduceOp, site: str,
                     options: Options | None, replica_leaves: Sequence[Sequence[Any]]) -> list[Any]:
        implementation = self.options.merge(options).implementation
        fp, local_shapes, algorithm = self._pack_plan(arrays, dtype, op, implementation)
        name, run = self.comm.lane.route("all_reduce", implementation, arrays[0], algorithm.name, algorithm.run)
        if self.comm.size == 1:
            return self._run(fp, site, options, local_shapes, lambda inst: arrays, list(zip(*replica_leaves)))
        xp = array_module(arrays[0])
        flat = arrays[0].reshape(-1) if len(arrays) == 1 else frozen(xp.concatenate([a.reshape(-1) for a in arrays]))

        def finish(total: Any) -> list[Any]:
            parts, pos = [], 0
            for a in arrays:
                parts.append(total[pos:pos + a.size].reshape(a.shape))
                pos += a.size
            return parts

        closed = ClosedForm(flat, algorithm.total, finish) if run is algorithm.run else None
        return self._run(fp, site, options, local_shapes, lambda inst: finish(run(inst, flat)),
                         list(zip(*replica_leaves)), name, closed)

    def _pack_plan(self, arrays: list[Any], dtype: str, op: ReduceOp, implementation: Any
                   ) -> tuple[Fingerprint, list[Any], AllReduceAlgorithm]:
        """The fingerprint, the local replicas' shapes (as traced) and the algorithm of a packed all-reduce: the same
        for the same shapes, dtype, op and implementation, so made once (a training step repeats its packs)."""
        key = (dtype, op, implementation, *[a.shape for a in arrays])
        plan = self._plans.get(key)
        if plan is None:
            shapes = [shape_of(a) for a in arrays]
            fp = Fingerprint("all_reduce", dtype, shapes[0] if len(shapes) == 1 else tuple(shapes), op.name)
            algorithm = choose_all_reduce(sum(a.nbytes for a in arrays), self.comm.size, implementation)
            plan = self._plans[key] = (fp, [fp.shape] * self.num_local, algorithm)
        return plan

    def all_gather(self, leaves: Sequence[Sequence[Any]], site: str, options: Options | None = None) -> list[Any]:
        """Concatenate each leaf along axis 0 over all replicas, in global replica order."""
        out = []
        for leaf in leaves:
            self._check_local([leaf], gather=True)
            with self.placement.scope(0):
                out.append(self._all_gather(self.placement.gathered(leaf), site, options))
        return out

    def _all_gather(self, leaf: Sequence[Any], site: str, options: Options | None) -> Any:
        first = leaf[0]
        block = first if len(leaf) == 1 else array_module(first).concatenate(leaf, axis=0)
        fp = Fingerprint("all_gather", dtype_name(first), (None, *shape_of(first)[1:]))
        _, run = self.comm.lane.route("all_gather", self.options.merge(options).implementation, block, None,
                                      gather_ring)

        def body(inst: Instance) -> Any:
            return block if inst.size == 1 else run(inst, block)

        return frozen(self._run(fp, site, options, [shape_of(a) for a in leaf], body, [(a,) for a in leaf]))

    def broadcast(self, values: Sequence[Any], site: str, options: Options | None = None) -> list[Any]:
        """The chief's (rank 0's) value of each leaf on every worker; shapes and dtypes must agree."""
        out = []
        implementation = self.options.merge(options).implementation
        for value in values:
            fp = Fingerprint("broadcast", dtype_name(value), shape_of(value), "root 0")
            _, run = self.comm.lane.route("broadcast", implementation, value, None, broadcast_from_chief)

            def body(inst: Instance, value: Any = value, run: Any = run) -> Any:
                return value if inst.size == 1 else run(inst, value)

            out.append(frozen(self._run(fp, site, options, [shape_of(value)] * self.num_local, body,
                                        [(value,)] * self.num_local)))
        return out

    def barrier(self, site: str, what: str = "barrier", options: Options | None = None) -> None:
        """Wait until every worker reaches the same barrier (``what`` names it in reports)."""
        _, run = self.comm.lane.route("barrier", self.options.merge(options).implementation, None, None,
                                      lambda inst, _: barrier(inst))
        self._run(Fingerprint("barrier", detail=what), site, options, [()] * self.num_local,
                  lambda inst: None if inst.size == 1 else run(inst, None))


def gather_ring(inst: Instance, block: Any) -> Any:
    """Every rank's ``block`` concatenated along axis 0 in rank order (the ring all-gather)."""
    return concat_blocks(allgather_ring(inst, block))


def broadcast_from_chief(inst: Instance, value: Any) -> Any:
    """Rank 0's ``value`` on every rank (the binomial-tree broadcast)."""
    return broadcast_tree(inst, value, root=0)


def _error_text(exc: errors.OpError) -> str:
    """How a trace event records a failed collective: the class and the first line of the message."""
    return f"{type(exc).__name__}: {exc.message.splitlines()[0]}"


def _nonfinite(arrays: Sequence[Any]) -> int:
    """How many NaN/Inf values ``arrays`` hold (integers have none)."""
    return sum(int(array_module(a).count_nonzero(~array_module(a).isfinite(a)))
               for a in arrays if a.dtype.kind in "fc")


def _digest(result: Any) -> str | None:
    """A short SHA-1 of a collective's result arrays (equal on every replica when the collective is sound)."""
    arrays = result if isinstance(result, (list, tuple)) else [] if result is None else [result]
    if not arrays:
        return None
    sha = hashlib.sha1()
    for a in arrays:
        sha.update(np.ascontiguousarray(to_host(a)).tobytes())
    return sha.hexdigest()[:12]


def _jsonable(shape: Any) -> list:
    return [_jsonable(s) if isinstance(s, tuple) else s for s in shape]
