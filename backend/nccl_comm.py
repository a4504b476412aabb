"""NCCL collectives of one collective group over ``cupy.cuda.nccl``: one ``NcclCommunicator`` per worker (rank =
the worker's rank, on the GPU of its first replica, where the group has already summed the worker's GPUs), set up
at the group's first NCCL collective with the unique id rank 0 makes (``nccl_unique_id.py``), and all-reduce and
broadcast on device arrays in the group's own stream.

NCCL calls return before the work is done: ``device_wait`` polls the stream and ``ncclCommGetAsyncError`` within
the collective's deadline and aborts the communicator when the group is aborted (a lost peer's heartbeat, a peer's
error), so a dead peer gives the gRPC path's error, never a hang. CuPy is imported only when this runs.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Any

from mirrorlab import errors
from mirrorlab.collective.communicator import Instance

from .device_wait import wait_for_device
from .nccl_choice import NCCL_DTYPES
from .nccl_unique_id import UniqueIdExchange, cupy_ids, id_bytes

__all__ = ["NcclCollectives", "nccl_library", "nccl_fact", "new_communicator", "NCCL_FACT"]

NCCL_FACT = "mirrorlab-nccl"


def nccl_library() -> ModuleType | None:
    """``cupy.cuda.nccl`` when CuPy has an NCCL library to call (else None: CuPy loads NCCL only if installed)."""
    try:
        from cupy.cuda import nccl
    except ImportError:
        return None
    return nccl if getattr(nccl, "available", False) else None


def nccl_fact(has_gpus: bool) -> dict[str, str]:
    """The rendezvous entry every worker must agree on, as one NCCL request must take the same path everywhere:
    the NCCL version a GPU worker can call, ``none`` for GPUs without it, ``cpu`` (CuPy never loaded) otherwise."""
    if not has_gpus:
        return {NCCL_FACT: "cpu"}
    nccl = nccl_library()
    return {NCCL_FACT: "none" if nccl is None else str(nccl.get_version())}


class NcclCollectives:
    """Collective group ``group``'s NCCL communicator, made on first use; ``setup_timeout`` bounds its setup when
    the collective has no ``timeout_seconds``."""

    def __init__(self, group: int, ids: UniqueIdExchange, setup_timeout: float) -> None:
        self.group = group
        self.ids = ids
        self.setup_timeout = setup_timeout
        self._comm: Any = None
        self._stream: Any = None

    def all_reduce(self, inst: Instance, flat: Any) -> Any:
        """The sum of every worker's ``flat`` (a contiguous CuPy vector on the current GPU)."""
        cupy, nccl = sys.modules["cupy"], nccl_library()
        send = cupy.ascontiguousarray(flat)
        out = cupy.empty_like(send)
        self._launch(inst, "allReduce", lambda comm, stream: comm.allReduce(
            send.data.ptr, out.data.ptr, send.size, _nccl_dtype(send), nccl.NCCL_SUM, stream))
        return out

    def broadcast(self, inst: Instance, value: Any) -> Any:
        """Rank 0's ``value`` on every worker (the others' ``value`` gives only shape and dtype)."""
        cupy = sys.modules["cupy"]
        send = cupy.ascontiguousarray(value)
        out = cupy.empty_like(send)
        self._launch(inst, "broadcast", lambda comm, stream: comm.broadcast(
            send.data.ptr, out.data.ptr, send.size, _nccl_dtype(send), 0, stream))
        return out

    def close(self) -> None:
        """Abort the communicator (never waits for peers that may be gone)."""
        if self._comm is not None:
            self._comm.abort()
            self._comm = None

    # -- launching and waiting -----------------------------------------------------------------------

    def _launch(self, inst: Instance, what: str, call: Any) -> None:
        comm = self._communicator(inst)
        cupy = sys.modules["cupy"]
        self._stream.wait_event(cupy.cuda.get_current_stream().record())  # the inputs are written
        try:
            call(comm, self._stream.ptr)
        except Exception as exc:  # NcclError: invalid usage, a peer gone before the launch
            self.close()
            raise self._failed(inst, f"{what} failed to launch: {exc}") from None
        wait_for_device(lambda: self._stream.done, lambda: _async_error(comm), lambda: inst.comm.error,
                        inst.deadline, self.close, lambda text: self._failed(inst, text),
                        lambda: inst.timed_out(f"NCCL {what} to finish on every worker (one has not joined it)"),
                        inst.comm.now)

    def _failed(self, inst: Instance, text: str) -> errors.OpError:
        return inst.comm.fail(errors.UnavailableError(
            f"NCCL failed in {inst.state.describe()} on {inst.comm.worker_label(inst.rank)}: {text}\nFix: look at "
            "the other workers' logs for the first error (a worker that died, a GPU error); NCCL_DEBUG=WARN "
            "shows NCCL's own reason."))

    def _communicator(self, inst: Instance) -> Any:
        """The group's communicator, set up now if this is its first NCCL collective (bounded by the deadline)."""
        if self._comm is not None:
            return self._comm
        cupy, nccl = sys.modules["cupy"], nccl_library()
        deadline = inst.deadline if inst.deadline is not None else inst.comm.now() + self.setup_timeout
        if inst.rank == 0:
            raw = id_bytes(nccl.get_unique_id())
            self.ids.publish(self.group, raw)
        else:
            raw = self.ids.fetch(self.group, deadline, lambda: inst.comm.error)
        made: dict[str, Any] = {}
        device = cupy.cuda.Device()

        def setup() -> None:  # ncclCommInitRank blocks until every rank joins: off this thread, bounded
            with device:
                try:
                    made["comm"] = new_communicator(nccl, inst.size, raw, inst.rank)
                except Exception as exc:  # NcclError
                    made["error"] = exc

        thread = threading.Thread(target=setup, name=f"nccl-setup-g{self.group}", daemon=True)
        thread.start()
        wait_for_device(lambda: not thread.is_alive(), lambda: None, lambda: inst.comm.error, deadline,
                        lambda: None, lambda text: self._failed(inst, text),
                        lambda: inst.timed_out("every worker to join the NCCL communicator"), inst.comm.now)
        if "error" in made:
            raise self._failed(inst, f"setting up the communicator failed: {made['error']}")
        self._stream = cupy.cuda.Stream(non_blocking=True)
        self._comm = made["comm"]
        return self._comm


def new_communicator(nccl: ModuleType, size: int, raw: bytes, rank: int) -> Any:
    """``NcclCommunicator(size, id, rank)`` with the id in the form this CuPy takes (see ``cupy_ids``): a form it
    refuses fails on the argument's type or range before NCCL is called."""
    *others, last = cupy_ids(raw)
    for form in others:
        try:
            return nccl.NcclCommunicator(size, form, rank)
        except (TypeError, OverflowError):
            continue
    return nccl.NcclCommunicator(size, last, rank)


def _nccl_dtype(array: Any) -> int:
    return getattr(nccl_library(), NCCL_DTYPES[array.dtype.name])


def _async_error(comm: Any) -> str | None:
    """NCCL's asynchronous error of ``comm`` as text (a peer's connection lost, a remote error), or None."""
    try:
        comm.check_async_error()
    except Exception as exc:  # NcclError
        return str(exc)
    return None
