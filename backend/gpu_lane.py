"""A real worker's ``DeviceLane``: where each collective of one group runs (``nccl_choice.collective_path``):
NumPy arrays as they are, device arrays through NCCL (``nccl_comm``) or staged through pinned host memory
(``pinned_staging``) to the CPU algorithms; and NCCL asked for on a worker without GPUs said once, in the log and in
``strategy.extended.transport_name``, as TF warns."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from mirrorlab.collective.device_lane import DeviceLane, Run
from mirrorlab.communication import CommunicationImplementation
from mirrorlab.tensor import is_cupy

from .nccl_choice import NCCL_NO_GPU, collective_path
from .nccl_comm import NcclCollectives, nccl_library
from .nccl_unique_id import UniqueIdExchange
from .pinned_staging import StagingBuffer

__all__ = ["GpuLane"]

log = logging.getLogger("mirrorlab.backend")


class GpuLane(DeviceLane):
    """Collective group ``group``'s lane on a worker with GPUs (``has_gpus``) or without; ``on_fallback`` runs
    once when NCCL is asked for without GPUs. Collectives of one group run one at a time, so one staging buffer
    serves them all."""

    def __init__(self, group: int, ids: UniqueIdExchange, setup_timeout: float, has_gpus: bool,
                 on_fallback: Callable[[], None]) -> None:
        self.has_gpus = has_gpus
        self._on_fallback = on_fallback
        self.fell_back = False
        self.staging = StagingBuffer()
        self.nccl = NcclCollectives(group, ids, setup_timeout)

    def route(self, op: str, implementation: CommunicationImplementation, array: Any, name: str | None,
              run: Run) -> tuple[str | None, Run]:
        if implementation == CommunicationImplementation.NCCL and not self.has_gpus and not self.fell_back:
            self.fell_back = True
            log.warning("%s mirrorlab runs the CPU collectives instead (the ring's order up to 8 workers), as TF "
                        "falls back to its ring on CPU devices.", NCCL_NO_GPU)
            self._on_fallback()
        on_gpu = is_cupy(array)
        wants_nccl = on_gpu and implementation == CommunicationImplementation.NCCL
        path = collective_path(op, implementation, on_gpu, "" if array is None else array.dtype.name,
                               wants_nccl and self.nccl_available)
        if path == "nccl":
            return "nccl", getattr(self.nccl, op)
        if path == "staged":
            return (None if name is None else f"{name} (staged)"), self.staging.staged(run)
        return name, run

    @functools.cached_property
    def nccl_available(self) -> bool:
        """Whether CuPy can call NCCL here (asked once, and only for device arrays: CuPy is loaded then)."""
        available = nccl_library() is not None
        if not available:
            log.warning("NCCL was asked for but CuPy has no NCCL library: device arrays go through pinned host "
                        "memory to the CPU collectives. Fix: pip install nvidia-nccl-cu12 (or -cu13).")
        return available

    def close(self) -> None:
        """Release the NCCL communicator, if one was made."""
        self.nccl.close()
