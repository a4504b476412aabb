"""Where one collective of a real worker runs, from values every worker agrees on (the op, the requested
implementation, the dtype, whether this worker's arrays are on GPUs), so every worker picks the same path:

- ``host``: NumPy arrays run the CPU algorithms over gRPC or shared memory. NCCL asked for without GPUs lands
  here, as TF's NCCL request on CPU devices falls back to its ring (TF logs ``NCCL_NO_GPU``; so does mirrorlab,
  once per collective group, and ``strategy.extended.transport_name`` says so).
- ``nccl``: NCCL all-reduce or broadcast of device arrays of a dtype NCCL sums (``NCCL_DTYPES``), when CuPy
  has an NCCL library (every worker must: the rendezvous fingerprint is the place to compare installs).
- ``staged``: any other collective of device arrays goes through pinned host memory to the CPU algorithms (TF:
  RING on GPUs, and NCCL for all-gathers, whose blocks may differ in length between workers).
"""

from __future__ import annotations

from mirrorlab.communication import CommunicationImplementation

__all__ = ["NCCL_DTYPES", "NCCL_OPS", "NCCL_NO_GPU", "collective_path", "fallback_label"]

NCCL_DTYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32", "uint32": "NCCL_UINT32",
               "int64": "NCCL_INT64", "uint64": "NCCL_UINT64", "float16": "NCCL_FLOAT16",
               "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64"}
"""NumPy dtype name -> the name of ``cupy.cuda.nccl``'s constant for it (bool and complex have none)."""

NCCL_OPS = ("all_reduce", "broadcast")
NCCL_NO_GPU = "Enabled NCCL communication but no GPUs detected/specified."
"""TF's warning (``_warn_nccl_no_gpu``), the first line of mirrorlab's."""


def collective_path(op: str, implementation: CommunicationImplementation, on_gpu: bool, dtype: str,
                    nccl_available: bool = True) -> str:
    """``host``, ``nccl`` or ``staged`` for one collective (see the module docstring); without an NCCL library
    (``nccl_available`` False) NCCL requests are staged, as TF runs its ring where NcclReduce is not registered."""
    if not on_gpu:
        return "host"
    if (implementation == CommunicationImplementation.NCCL and op in NCCL_OPS and dtype in NCCL_DTYPES
            and nccl_available):
        return "nccl"
    return "staged"


def fallback_label(transport: str) -> str:
    """``strategy.extended.transport_name`` once NCCL was asked for on a worker without GPUs."""
    return f"{transport} (NCCL requested without GPUs: CPU collectives, as TF's ring)"
