"""This host's environment fingerprint: the versions, libraries, devices and variables that must match on
every worker, as a plain JSON-ready dict (written with ``mirrorlab diagnose --write-fingerprint``).

Package versions come from installed metadata, so TensorFlow is never imported; CuPy is imported only when it
is installed, and a CuPy without a driver or GPU is recorded as such, never raised.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import socket
import sys
import time
from typing import Any

from mirrorlab.diagnostics.liveness_lint import LIVENESS_VARS

__all__ = ["FINGERPRINT_SCHEMA", "PACKAGES", "collect_fingerprint", "is_fingerprint"]

#: The ``schema`` value of a fingerprint dict; a reader checks it before trusting the rest.
FINGERPRINT_SCHEMA = "mirrorlab.fingerprint/1"

#: Distributions whose versions must agree across workers (None where not installed).
PACKAGES = ("mirrorlab", "numpy", "grpcio", "protobuf", "threadpoolctl", "tensorflow", "tensorflow-cpu",
            "cupy-cuda12x", "cupy-cuda13x", "cupy")

#: Environment variables that change which libraries and devices a worker uses.
ENV_VARS = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def is_fingerprint(value: object) -> bool:
    """Whether a decoded JSON value is a fingerprint (by its schema key)."""
    return isinstance(value, dict) and value.get("schema") == FINGERPRINT_SCHEMA


def collect_fingerprint() -> dict[str, Any]:
    """The fingerprint of this process's host and environment."""
    return {
        "schema": FINGERPRINT_SCHEMA,
        "hostname": socket.gethostname(),
        "addresses": _addresses(),
        "collected_at": time.time(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": {name: _version(name) for name in PACKAGES},
        "env": {name: os.environ.get(name) for name in ENV_VARS},
        "liveness": {name: os.environ.get(name) for name in LIVENESS_VARS},
        "cuda": _cuda(),
        "blas": _blas(),
    }


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _addresses() -> list[str]:
    """The addresses this host's name resolves to locally (``/etc/hosts`` or the resolver); never probes peers."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)
    except OSError:
        return []
    return sorted({str(info[4][0]) for info in infos})


def _cuda() -> dict[str, Any]:
    """CUDA driver, runtime and NCCL versions and the device count, through CuPy when it is installed."""
    result: dict[str, Any] = {"cupy": None, "driver": None, "runtime": None, "nccl": None, "device_count": 0,
                              "error": None}
    cupy = sys.modules.get("cupy")
    if cupy is None:
        if importlib.util.find_spec("cupy") is None:
            return result
        try:
            import cupy
        except Exception as err:  # a broken CuPy install: record why, keep going
            result["error"] = f"import cupy failed: {type(err).__name__}: {err}"
            return result
    result["cupy"] = getattr(cupy, "__version__", None)
    runtime = cupy.cuda.runtime
    for key, read in (("device_count", lambda: runtime.getDeviceCount()),
                      ("driver", lambda: runtime.driverGetVersion()),
                      ("runtime", lambda: runtime.runtimeGetVersion()),
                      ("nccl", lambda: __import__("cupy.cuda.nccl", fromlist=["get_version"]).get_version())):
        try:
            result[key] = int(read())
        except Exception as err:  # no driver, no device or no NCCL: the reason is the finding's evidence
            result["error"] = result["error"] or f"{key}: {type(err).__name__}: {err}"
    return result


def _blas() -> list[dict[str, Any]]:
    """The BLAS/OpenMP libraries NumPy actually loaded, with versions and thread counts (threadpoolctl)."""
    import numpy  # noqa: F401  (loads NumPy's BLAS so threadpoolctl sees it)
    from threadpoolctl import threadpool_info

    keep = ("user_api", "internal_api", "version", "num_threads", "filepath")
    return [{key: info.get(key) for key in keep} for info in threadpool_info()]
