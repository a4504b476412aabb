"""Where a worker's per-replica arrays live: NumPy for CPU devices, CuPy arrays on GPU ``k`` for
``.../device:GPU:k`` when CuPy and a GPU are present (as TF puts each replica's copy on its device).

CuPy is imported only when a strategy has GPU devices. On a CPU machine every method is the identity,
so the NumPy path pays nothing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from . import nest
from .tensor import NO_DEVICE, is_cupy

__all__ = ["Placement", "gpu_module", "gpu_index"]

_GPU_RE = re.compile(r"(?:^|/)(?:device:)?GPU:(\d+)$", re.IGNORECASE)


def gpu_index(device: str) -> int | None:
    """``k`` for a ``GPU:k`` device name, None for a CPU device."""
    match = _GPU_RE.search(device)
    return int(match.group(1)) if match else None


def gpu_module() -> tuple[ModuleType, int] | None:
    """``(cupy, number of GPUs)`` when CuPy imports and sees a GPU, else None."""
    module = sys.modules.get("cupy")
    if module is None:
        if importlib.util.find_spec("cupy") is None:
            return None
        try:
            import cupy as module
        except Exception:  # a broken CuPy install is a CPU machine
            return None
    try:
        count = int(module.cuda.runtime.getDeviceCount())
    except Exception:  # CuPy without a driver or device
        return None
    return (module, count) if count else None


class Placement:
    """Puts values on the devices of one worker's replicas (local replica ``k`` on ``devices[k]``)."""

    def __init__(self, devices: Sequence[str]) -> None:
        self.size = len(devices)
        indices = [gpu_index(d) for d in devices]
        found = gpu_module() if any(i is not None for i in indices) else None
        self._cupy: ModuleType | None = None
        self._gpus: list[int] = []
        if found is not None:
            module, count = found
            self._cupy = module
            # Simulated clusters may name more GPUs than the machine has: they share the real ones.
            self._gpus = [(i or 0) % count for i in indices]

    @property
    def on_gpu(self) -> bool:
        """True when replicas hold CuPy arrays on GPUs."""
        return self._cupy is not None

    def scope(self, k: int) -> contextlib.AbstractContextManager:
        """Make replica ``k``'s GPU current (a no-op for CPU devices)."""
        return self._cupy.cuda.Device(self._gpus[k]) if self._cupy is not None else NO_DEVICE

    def bind(self, k: int, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` run with replica ``k``'s device current."""
        if self._cupy is None:
            return fn

        def call() -> Any:
            with self.scope(k):
                return fn()

        return call

    def put(self, value: Any, k: int) -> Any:
        """Every array leaf of ``value`` on replica ``k``'s device."""
        if self._cupy is None:
            return value
        with self.scope(k):
            return nest.map_structure(self._to_device, value)

    def _to_device(self, leaf: Any) -> Any:
        if isinstance(leaf, np.ndarray) or is_cupy(leaf):
            return self._cupy.asarray(leaf)
        return leaf

    def replicate(self, value: Any) -> list[Any]:
        """One copy of ``value`` per replica (the same object on CPU)."""
        if self._cupy is None:
            return [value] * self.size
        return [self.put(value, k) for k in range(self.size)]

    def gathered(self, arrays: Sequence[Any]) -> list[Any]:
        """All replicas' arrays on the first replica's device, to combine them there."""
        if self._cupy is None:
            return list(arrays)
        return [self.put(a, 0) for a in arrays]
