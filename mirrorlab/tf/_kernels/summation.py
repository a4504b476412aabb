"""Float sums in TensorFlow's CPU order, so that sums round as TF's do.

TF reduces the innermost dimension with Eigen's vectorised reducer: 32-byte packets (8 float32, 4 float64) added
into four packet accumulators, 4 packets at a time; the accumulators combined in order; the packets left over
added to the first; the last values summed alone; then the sum of the lone values plus the accumulator's lanes
(halves added, then pairs). Rows longer than 1024 packets are split at a packet boundary near the middle, each
half summed so and the two added; a full sum of many values is cut into one block per thread first. NumPy's
pairwise sum groups differently, so its float32 sums can differ from TF's in the last bit. Measured against TF
2.21's ``reduce_sum`` (1 to 3,000,000 values, every layout of axes).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["tf_sum", "tf_mean", "tf_sum_along", "tf_sum_each", "tf_sum_rows", "rows_summed_apart"]

_PACKET_BYTES = 32  # AVX packets, as TF's x86 builds use
_LEAF_PACKETS = 1024  # Eigen's kLeafSize: longer rows are split in two
_CYCLES_PER_VALUE = 1.9375  # Eigen's cost of summing one value, as TF 2.21 measures (threads from 108,388 values)


def tf_sum(values: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``values.sum(axis, keepdims)`` for a NumPy float32/float64 array, added in TF's order. As TF, axes of size 1
    are dropped and neighbouring reduced (or kept) axes merged first; then a full reduction or one over trailing
    axes sums contiguous rows (``_rows``), one over leading axes (optionally inside outer kept ones) adds whole
    rows (``_columns``); with more than three axes left, the kept ones are moved first. Other dtypes and CuPy
    arrays sum as NumPy (integers exactly; GPU kernels have their own order)."""
    if not isinstance(values, np.ndarray) or values.dtype not in (np.float32, np.float64) or not values.size:
        return values.sum(axis=axis, keepdims=keepdims, dtype=values.dtype)
    axes = set(range(values.ndim)) if axis is None else {int(a) % values.ndim for a in np.atleast_1d(axis)}
    out_shape = tuple(1 if i in axes else n for i, n in enumerate(values.shape) if keepdims or i not in axes)
    merged: list[list[Any]] = []  # [size, reduced] after TF's simplification
    for i, n in enumerate(values.shape):
        if n == 1:
            continue
        if merged and merged[-1][1] == (i in axes):
            merged[-1][0] *= n
        else:
            merged.append([n, i in axes])
    kinds = tuple(reduced for _, reduced in merged)
    sizes = [n for n, _ in merged]
    flat = np.ascontiguousarray(values)
    if kinds == (True,):
        out = _full(flat.reshape(-1))
    elif kinds == (False, True):
        out = _rows(flat.reshape(-1, sizes[-1]))
    elif kinds in ((True, False), (False, True, False)):
        out = _columns(flat.reshape(-1, sizes[-2], sizes[-1]))
    elif kinds == (True, False, True):  # Eigen's generic loop: the inner reduced axis outermost, each in order
        out = np.add.reduce(flat.reshape(sizes).transpose(2, 0, 1).reshape(-1, sizes[1]), axis=0)
    elif len(kinds) > 3:  # TF moves the kept axes first and sums the rest as rows
        kept = [i for i, reduced in enumerate(kinds) if not reduced]
        order = kept + [i for i, reduced in enumerate(kinds) if reduced]
        out = _rows(flat.reshape(sizes).transpose(order).reshape(int(np.prod([sizes[i] for i in kept])), -1))
    else:  # one value: nothing to add
        return values.sum(axis=axis, keepdims=keepdims, dtype=values.dtype)
    out = out.reshape(out_shape)
    return out if out.ndim else out[()]


def tf_sum_each(values: Any) -> Any:
    """``tf_sum(values[k], axis=0)`` for every k, stacked: each slab of a 3-D array summed over its rows on its own
    (a stacked step's per-replica bias gradients), which ``tf_sum(values, axis=1)`` is not (Eigen's packets then
    run across slabs)."""
    if (isinstance(values, np.ndarray) and values.dtype in (np.float32, np.float64) and values.ndim == 3
            and values.shape[1] > 1 and values.shape[2] > 1):
        return _columns(np.ascontiguousarray(values), each=True)
    return np.stack([tf_sum(slab, axis=0) for slab in values])


def tf_sum_rows(values: Any) -> Any:
    """``tf_sum(values[k])`` for every row of a 2-D array: each replica's full sum of its per-example values in a
    stacked step. Rows of more than one value that one thread sums (``_full``) and short enough to be one leaf
    sum as ``_leaves`` does, all at once; others row by row."""
    if isinstance(values, np.ndarray) and values.dtype in (np.float32, np.float64) and values.ndim == 2:
        length = values.shape[1]
        if 1 < length <= (_PACKET_BYTES // values.dtype.itemsize) * _LEAF_PACKETS and _threads(length) == 1:
            return _leaves(np.ascontiguousarray(values), _PACKET_BYTES // values.dtype.itemsize)
    return np.array([tf_sum(row) for row in values], dtype=values.dtype)


def rows_summed_apart(width: int, dtype: Any) -> bool:
    """Whether ``tf_sum`` along rows of ``width`` values sums each row on its own, wherever it lies in the array
    (rows of up to 1024 packets; longer ones are split at packets counted from the array's start)."""
    return width * np.dtype(dtype).itemsize <= _PACKET_BYTES * _LEAF_PACKETS


def _columns(slabs: np.ndarray, each: bool = False) -> np.ndarray:
    """Each slab's sum of rows (``slabs``: outer x rows x columns), as Eigen keeps inner dimensions. Outputs go in
    packets from the first; a packet within one slab's columns, with 16 rows or more, adds every fourth row into
    one of four accumulators, which are then combined in order and take the rows left over. Other outputs add
    their rows in order. ``each``: packets counted from each slab's start, as when each slab is summed alone."""
    packet = _PACKET_BYTES // slabs.dtype.itemsize
    outer, rows, columns = slabs.shape
    if rows >= 16 and not columns % packet:  # every output lies in a vectorised packet
        return _four_accumulators(slabs)
    out = np.add.reduce(slabs, axis=1)  # rows in order (NumPy's reduce over a non-inner axis is sequential)
    if rows < 16:
        return out
    if each:  # each slab's first whole packets
        whole = columns // packet * packet
        if whole:
            out[:, :whole] = _four_accumulators(slabs[:, :, :whole])
        return out
    starts = np.arange(0, (outer * columns // packet) * packet, packet)
    starts = starts[starts % columns + packet <= columns]  # the packets Eigen vectorises
    if not len(starts):
        return out
    vectorised = (starts[:, None] + np.arange(packet)).ravel()
    out.reshape(-1)[vectorised] = _four_accumulators(slabs).reshape(-1)[vectorised]
    return out


def _four_accumulators(slabs: np.ndarray) -> np.ndarray:
    """Each slab's sum of rows as a vectorised packet adds them: every fourth row into one of four accumulators,
    which are then combined in order and take the rows left over."""
    outer, rows, columns = slabs.shape
    four = (rows // 4) * 4
    lanes = np.add.reduce(slabs[:, :four].reshape(outer, -1, 4, columns), axis=1)
    accum = ((lanes[:, 0] + lanes[:, 1]) + lanes[:, 2]) + lanes[:, 3]
    for j in range(four, rows):
        accum = accum + slabs[:, j]
    return accum


def tf_sum_along(values: Any, axis: int) -> Any:
    """The sum along one axis, kept, as TF's softmax kernels and their gradients add: along the last axis of the
    values with ``axis`` moved last (TF transposes it there)."""
    if axis in (-1, values.ndim - 1):
        return tf_sum(values, axis=-1, keepdims=True)
    return np.moveaxis(tf_sum(np.moveaxis(values, axis, -1), axis=-1, keepdims=True), -1, axis)


def tf_mean(values: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The mean over ``axis`` of a float (or complex) array as TF's ``reduce_mean``: ``tf_sum`` divided by the
    count, in the values' dtype (NaN when empty)."""
    count = values.size if axis is None else int(np.prod([values.shape[a] for a in np.atleast_1d(axis)]))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (tf_sum(values, axis, keepdims) / values.dtype.type(count)).astype(values.dtype)


def _full(values: np.ndarray) -> np.ndarray:
    """The sum of all values, as Eigen's full reduction on TF's thread pool: enough values (by Eigen's cost model)
    are cut into one block per thread (as many threads as CPUs this process may use), each summed as a row from its
    own start; then the values left over, plus each block's sum in order."""
    count, packet = values.size, _PACKET_BYTES // values.dtype.itemsize
    threads = _threads(count)
    if threads == 1:
        return np.asarray(_split(values, 0, count, packet))
    block = int(np.floor(np.float32(count) / np.float32(threads)))
    blocks = count // block
    total = _split(values, blocks * block, count - blocks * block, packet) if blocks * block < count else \
        values.dtype.type(0)
    for i in range(blocks):
        total = total + _split(values, i * block, block, packet)
    return np.asarray(total)


def _threads(count: int) -> int:
    """How many threads Eigen's cost model gives a full sum of ``count`` values (at most this process's CPUs)."""
    return min(_cpus(), max(1, int((count * _CYCLES_PER_VALUE - 100000) / 100000 + 0.9)))


def _cpus() -> int:
    """The CPUs this process may run on: the size of TF's intra-op thread pool."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _rows(rows: np.ndarray) -> np.ndarray:
    """Each row's sum in Eigen's order (rows of up to 1024 packets at once; longer ones split, row by row)."""
    packet = _PACKET_BYTES // rows.dtype.itemsize
    length = rows.shape[1]
    if length <= packet * _LEAF_PACKETS:
        return _leaves(rows, packet)
    flat = rows.reshape(-1)  # (Eigen aligns a long row's split from the tensor's start)
    return np.array([_split(flat, r * length, length, packet) for r in range(rows.shape[0])], dtype=rows.dtype)


def _split(row: np.ndarray, first: int, count: int, packet: int) -> Any:
    """The sum of ``row[first:first + count]``, as Eigen's tree: longer than 1024 packets, split at the packet
    boundary (counted from the array's start) after the middle, each side summed, added to zero in order."""
    if not count:
        return row.dtype.type(0)
    if count <= packet * _LEAF_PACKETS:
        return _leaves(row[None, first:first + count], packet)[0]
    split = packet * -(-(first + -(-count // 2)) // packet)
    left = min(split - first, count)
    total = row.dtype.type(0) + _split(row, first, left, packet)
    if left < count:
        total = total + _split(row, split, count - left, packet)
    return total


def _leaves(rows: np.ndarray, packet: int) -> np.ndarray:
    """Eigen's leaf sum of each row (up to 1024 packets), vectorised over the rows."""
    count, zero = rows.shape[1], rows.dtype.type(0)
    blocks = (count // (4 * packet)) * 4 * packet
    accum = np.zeros((rows.shape[0], packet), rows.dtype)
    if blocks:  # four accumulators, each adding every fourth packet in order (a reduce over a non-inner axis is
        lanes = np.add.reduce(rows[:, :blocks].reshape(rows.shape[0], -1, 4, packet), axis=1)  # sequential)
        accum = ((lanes[:, 0] + lanes[:, 1]) + lanes[:, 2]) + lanes[:, 3]
    whole = (count // packet) * packet
    for start in range(blocks, whole, packet):
        accum = accum + rows[:, start:start + packet]
    lone = np.full(rows.shape[0], zero)
    for j in range(whole, count):
        lone = lone + rows[:, j]
    while accum.shape[1] > 1:  # the lanes' horizontal sum: halves added, again and again
        half = accum.shape[1] // 2
        accum = accum[:, :half] + accum[:, half:]
    return lone + accum[:, 0]
