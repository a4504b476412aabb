"""Host buffers that device arrays are staged through for the CPU collectives (RING/AUTO on GPUs, all-gathers):
one buffer per collective group, reused and grown by doubling, so a training step allocates no pinned memory
after the first. The allocator is injected: ``pinned`` (CuPy's page-locked memory, fast DMA) on a GPU worker,
any buffer-protocol object in CPU tests of the bookkeeping."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["StagingBuffer", "pinned"]


def pinned(nbytes: int) -> Any:
    """``nbytes`` of page-locked host memory (CuPy's ``alloc_pinned_memory``; CuPy is loaded already when a
    worker holds device arrays)."""
    return sys.modules["cupy"].cuda.alloc_pinned_memory(nbytes)


class StagingBuffer:
    """A reused host buffer: ``host_copy`` puts a device array's data in it, ``to_device`` brings a result back."""

    def __init__(self, allocate: Callable[[int], Any] = pinned) -> None:
        self._allocate = allocate
        self._memory: Any = None
        self.capacity = 0
        self.allocations = 0

    def host_array(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A writable NumPy array of ``shape`` and ``dtype`` over the buffer (grown when too small); valid until
        the next call, which may reuse the same bytes."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = count * dtype.itemsize
        if nbytes > self.capacity:
            self.capacity = max(nbytes, 2 * self.capacity)
            self._memory = self._allocate(self.capacity)
            self.allocations += 1
        return np.frombuffer(self._memory, dtype, count).reshape(shape) if count else np.empty(shape, dtype)

    def host_copy(self, array: Any) -> np.ndarray:
        """``array``'s data (a CuPy array, or NumPy) in the buffer; the device-to-host copy is synchronous."""
        host = self.host_array(tuple(array.shape), array.dtype)
        if host.size:
            if isinstance(array, np.ndarray):
                host[...] = array
            else:
                array.get(out=host)
        return host

    def staged(self, run: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``run(inst, array)`` on a host copy of a device ``array``, its result copied to the current GPU."""
        def call(inst: Any, array: Any) -> Any:
            return to_device(run(inst, self.host_copy(array)))

        return call


def to_device(result: Any) -> Any:
    """A host result on the current GPU (a copy of its data: the staging buffer it may view is reused)."""
    return sys.modules["cupy"].array(np.asarray(result))
