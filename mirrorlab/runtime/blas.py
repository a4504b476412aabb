"""One BLAS thread count for the simulator and real workers: OpenBLAS' threading changes the bits of a
matrix product (a 784-wide product differs between 1 and 2 threads), so both pin it the same way.

``MIRRORLAB_BLAS_THREADS`` sets the count (default 1); the real backend's handshake compares it across workers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from threadpoolctl import threadpool_limits

__all__ = ["pin_blas_threads", "BLAS_THREADS_VAR"]

BLAS_THREADS_VAR = "MIRRORLAB_BLAS_THREADS"


def pin_blas_threads(environ: Mapping[str, str] = os.environ) -> int:
    """Limit every loaded BLAS to ``MIRRORLAB_BLAS_THREADS`` threads (default 1) for this process; returns it."""
    raw = environ.get(BLAS_THREADS_VAR) or "1"
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{BLAS_THREADS_VAR}={raw!r} is not a positive integer. Fix: e.g. {BLAS_THREADS_VAR}=1 "
                         "(the same on every worker and on the simulator, so results are bit-identical).")
    threads = int(raw)
    threadpool_limits(limits=threads, user_api="blas")  # stays in force: never used as a context manager
    return threads
