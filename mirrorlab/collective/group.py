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
from ..communication import CommunicationImplementation, Options
from ..tensor import array_module, dtype_name, frozen, shape_of, to_host
from ..trace import CollectiveEvent, Trace
from .allgather_ring import allgather_ring, concat_blocks
from .allreduce_halving_doubling import allreduce_halving_doubling
from .allreduce_ring import allreduce_ring
from .barrier import barrier
from .broadcast_tree import broadcast_tree
from .communicator import FIX_DESYNC, Communicator, Instance, shape_mismatch_text
from .message import Fingerprint
from .packing import group_by_size

__all__ = ["CollectiveGroup", "sum_in_order", "mean_of_sum", "tf_dtype", "RING_UP_TO"]

# AUTO uses the ring (TF's algorithm) up to this many workers, recursive halving/doubling beyond:
# 2*log2(n) rounds instead of 2*(n-1) for the same bytes. RING forces the ring at any size.
RING_UP_TO = 8


def sum_in_order(arrays: Sequence[Any]) -> Any:
    """``((a0 + a1) + a2) + ...`` into a fresh array (or ``a0`` itself for one array)."""
    if len(arrays) == 1:
        return arrays[0]
    xp = array_module(arrays[0])
    acc = xp.add(arrays[0], arrays[1], out=xp.empty(arrays[0].shape, arrays[0].dtype))
    for a in arrays[2:]:
        xp.add(acc, a, out=acc)
    return acc


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

    @property
    def num_replicas(self) -> int:
        return self.comm.size * self.num_local

    @property
    def worker(self) -> int:
        return self.comm.rank

    # -- instance bookkeeping -------------------------------------------------------------------

    def _run(self, fingerprint: Fingerprint, site: str, options: Options | None,
             local_shapes: Sequence[Any], body: Callable[[Instance], Any],
             inputs: Sequence[Sequence[Any]] = ()) -> Any:
        """Run ``body`` as the next instance and trace it; ``inputs[k]`` are the arrays local replica k contributed
        (looked at only when the trace records values)."""
        opts = self.options.merge(options)
        try:
            inst = self.comm.start(fingerprint, site, opts.timeout_seconds)
        except errors.OpError as exc:  # the group was aborted before: this worker entered the collective all the same
            self._record(self.comm.seq, fingerprint, site, local_shapes, self.comm.now(), "error", _error_text(exc),
                         inputs, None)
            raise
        if self._before is not None:
            self._before(inst.state.seq)
        start = self.comm.now()
        status, text, result = "ok", "", None
        try:
            result = body(inst)
            return result
        except errors.OpError as exc:
            status, text = "error", _error_text(exc)
            raise
        finally:
            inst.done()
            self._record(inst.state.seq, fingerprint, site, local_shapes, start, status, text, inputs, result)

    def _record(self, seq: int, fp: Fingerprint, site: str, local_shapes: Sequence[Any],
                start: float, status: str, text: str, inputs: Sequence[Sequence[Any]], result: Any) -> None:
        if self.trace is None:
            return
        end = self.comm.now()
        base = self.worker * self.num_local
        values = self.trace.record_values
        digest = _digest(result) if values and status == "ok" else None
        jsonable: dict[int, list] = {}  # local replicas usually share one shape object
        for k, shape in enumerate(local_shapes):
            if id(shape) not in jsonable:
                jsonable[id(shape)] = _jsonable(shape)
            self.trace.add(CollectiveEvent(
                worker=self.worker, replica=base + k, seq=seq, op=fp.op, detail=fp.detail,
                dtype=fp.dtype, shape=jsonable[id(shape)], start=start, end=end, site=site,
                status=status, error=text, step=self.step if values else None,
                nonfinite=_nonfinite(inputs[k] if k < len(inputs) else ()) if values else None, digest=digest))

    def _check_local(self, leaves: Sequence[Sequence[Any]], addn: bool, gather: bool = False) -> None:
        """Local replicas must agree on dtype and shape (all but the first dimension for gathers)."""
        for leaf in leaves:
            first = leaf[0]
            for k, a in enumerate(leaf[1:], start=1):
                if a.dtype != first.dtype:
                    raise self._local_error(addn, "dtype", first, a, k)
                if (a.shape[1:] != first.shape[1:]) if gather else (a.shape != first.shape):
                    raise self._local_error(addn, "shape", first, a, k)

    def _local_error(self, addn: bool, what: str, first: Any, other: Any, k: int) -> errors.OpError:
        if addn:  # a single worker's cross-replica reduce is one local AddN in TF: no group to poison
            if what == "shape":
                return errors.InvalidArgumentError(
                    "Inputs to operation AddN of type AddN must have the same size and shape.  Input 0: "
                    f"{_dims(first)} != input {k}: {_dims(other)}\n{FIX_DESYNC}")
            return errors.InvalidArgumentError(
                f"cannot compute AddN as input #{k}(zero-based) was expected to be a {tf_dtype(first)} tensor "
                f"but is a {tf_dtype(other)} tensor\n{FIX_DESYNC}")
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
                   *, mean_count: int | None = None, addn: bool = False) -> list[Any]:
        """Reduce each leaf over all replicas; ``leaves[i][k]`` is leaf i on local replica k.

        MEAN divides the sum by ``mean_count`` (default: all replicas). ``addn`` marks TF's single-worker
        ``strategy.reduce``, a local AddN: its dtype list and errors, and a mismatch poisons nothing."""
        _check_reducible(leaves, addn)
        self._check_local(leaves, addn)
        with self.placement.scope(0):  # local replicas' values meet on the first replica's device
            return self._all_reduce([self.placement.gathered(leaf) for leaf in leaves], op, site, options, mean_count)

    def _all_reduce(self, leaves: Sequence[Sequence[Any]], op: ReduceOp, site: str, options: Options | None,
                    mean_count: int | None) -> list[Any]:
        sums = [leaf[0] if len(leaf) == 1 else frozen(sum_in_order(leaf)) for leaf in leaves]
        out: list[Any] = [None] * len(sums)
        opts = self.options.merge(options)
        for pack in group_by_size(sums, opts.bytes_per_pack):
            by_dtype: dict[str, list[int]] = {}
            for i in pack:
                by_dtype.setdefault(dtype_name(sums[i]), []).append(i)
            for dtype, idx in by_dtype.items():
                packed = self._reduce_pack([sums[i] for i in idx], dtype, op, site, options, [leaves[i] for i in idx])
                for i, value in zip(idx, packed):
                    out[i] = value
        count = self.num_replicas if mean_count is None else mean_count
        if op == ReduceOp.MEAN and count > 1:
            out = [mean_of_sum(v, count) for v in out]
        return [frozen(v) for v in out]

    def _reduce_pack(self, arrays: list[Any], dtype: str, op: ReduceOp, site: str,
                     options: Options | None, replica_leaves: Sequence[Sequence[Any]]) -> list[Any]:
        shapes = [shape_of(a) for a in arrays]
        fp = Fingerprint("all_reduce", dtype, shapes[0] if len(shapes) == 1 else tuple(shapes), op.name)
        local_shapes = [fp.shape] * self.num_local
        implementation = self.options.merge(options).implementation
        use_ring = implementation == CommunicationImplementation.RING or self.comm.size <= RING_UP_TO

        def body(inst: Instance) -> list[Any]:
            if inst.size == 1:
                return arrays
            xp = array_module(arrays[0])
            flat = arrays[0].reshape(-1) if len(arrays) == 1 else frozen(xp.concatenate([a.reshape(-1) for a in arrays]))
            algorithm = allreduce_ring if use_ring else allreduce_halving_doubling
            total = algorithm(inst, flat)
            parts, pos = [], 0
            for a in arrays:
                parts.append(total[pos:pos + a.size].reshape(a.shape))
                pos += a.size
            return parts

        return self._run(fp, site, options, local_shapes, body, list(zip(*replica_leaves)))

    def all_gather(self, leaves: Sequence[Sequence[Any]], site: str, options: Options | None = None) -> list[Any]:
        """Concatenate each leaf along axis 0 over all replicas, in global replica order."""
        out = []
        for leaf in leaves:
            self._check_local([leaf], addn=False, gather=True)
            with self.placement.scope(0):
                out.append(self._all_gather(self.placement.gathered(leaf), site, options))
        return out

    def _all_gather(self, leaf: Sequence[Any], site: str, options: Options | None) -> Any:
        first = leaf[0]
        block = first if len(leaf) == 1 else array_module(first).concatenate(leaf, axis=0)
        fp = Fingerprint("all_gather", dtype_name(first), (None, *shape_of(first)[1:]))

        def body(inst: Instance) -> Any:
            return block if inst.size == 1 else concat_blocks(allgather_ring(inst, block))

        return frozen(self._run(fp, site, options, [shape_of(a) for a in leaf], body, [(a,) for a in leaf]))

    def broadcast(self, values: Sequence[Any], site: str, options: Options | None = None) -> list[Any]:
        """The chief's (rank 0's) value of each leaf on every worker; shapes and dtypes must agree."""
        out = []
        for value in values:
            fp = Fingerprint("broadcast", dtype_name(value), shape_of(value), "root 0")

            def body(inst: Instance, value: Any = value) -> Any:
                return value if inst.size == 1 else broadcast_tree(inst, value, root=0)

            out.append(frozen(self._run(fp, site, options, [shape_of(value)] * self.num_local, body,
                                        [(value,)] * self.num_local)))
        return out

    def barrier(self, site: str, what: str = "barrier", options: Options | None = None) -> None:
        """Wait until every worker reaches the same barrier (``what`` names it in reports)."""
        self._run(Fingerprint("barrier", detail=what), site, options, [()] * self.num_local,
                  lambda inst: None if inst.size == 1 else barrier(inst))


COLLECTIVE_DTYPES = ("float16", "float32", "float64", "int32", "int64")
ADDN_DTYPES = COLLECTIVE_DTYPES + ("uint8", "int16", "int8", "complex64", "uint16", "complex128", "uint32", "uint64")
_TF_NAMES = {"float16": "half", "float32": "float", "float64": "double"}
# The allowed-type lists exactly as TF's kernels print them (they include types mirrorlab lacks).
_TF_ALLOWED = {
    "CollectiveReduceV2": "bfloat16, float, half, double, int32, int64",
    "AddN": "float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, "
            "quint16, uint16, complex128, half, uint32, uint64, variant",
    "CollectiveBcastSendV2": "bool, float, half, double, int32, int64",
}
BROADCAST_DTYPES = ("bool", "float16", "float32", "float64", "int32", "int64")


def tf_dtype(a: Any) -> str:
    """TF's kernel-level dtype name (``float`` for float32, ``double``, ``half``)."""
    name = dtype_name(a)
    return _TF_NAMES.get(name, name)


def _check_reducible(leaves: Sequence[Sequence[Any]], addn: bool) -> None:
    """Reject dtypes TF's reduction kernels reject (bool, strings...), before any communication."""
    allowed = ADDN_DTYPES if addn else COLLECTIVE_DTYPES
    for leaf in leaves:
        if dtype_name(leaf[0]) not in allowed:
            raise _attr_not_allowed(leaf[0], "AddN" if addn else "CollectiveReduceV2",
                                    "cast the value to one of those dtypes before reducing (e.g. bool -> int32).")


def check_broadcastable(value: Any, what: str) -> None:
    """TF's error for dtypes its cross-worker broadcast rejects (int8, uint8, complex...), before any work."""
    if dtype_name(value) not in BROADCAST_DTYPES:
        raise _attr_not_allowed(value, "CollectiveBcastSendV2",
                                f"{what} is broadcast from the chief to every worker, which TF does only for those "
                                "dtypes: create it as int32, int64 or a float.")


def _attr_not_allowed(value: Any, kernel: str, fix: str) -> errors.InvalidArgumentError:
    """TF's error for a dtype ``kernel`` does not take, with its allowed-type list and ``fix``."""
    return errors.InvalidArgumentError(
        f"Value for attr 'T' of {tf_dtype(value)} is not in the list of allowed values: {_TF_ALLOWED[kernel]}\n\t; "
        f"NodeDef: {{{{node {kernel}}}}}\nFix: {fix}")


GATHER_DTYPES = ("float32", "float16", "float64", "int32", "int64")


def check_gatherable(leaves: Sequence[Sequence[Any]]) -> None:
    """TF's TypeError for dtypes its gathers across replicas reject (bool, strings...), before any work."""
    for leaf in leaves:
        if dtype_name(leaf[0]) not in GATHER_DTYPES:
            raise TypeError(f"Value passed to parameter 'input' has DataType {dtype_name(leaf[0])} not in list of "
                            f"allowed values: {', '.join(GATHER_DTYPES)}\nFix: cast the value to one of those "
                            "dtypes before gathering (e.g. bool -> int32).")


def _dims(a: Any) -> str:
    return "[" + ",".join(str(d) for d in shape_of(a)) + "]"


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
