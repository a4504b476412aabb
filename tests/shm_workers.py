"""Worker programs for the shared-memory transport tests, run in processes started with ``spawn``.

Results travel back as ``.npy`` files written without pickle; errors as ``<rank>.error`` text files
holding the exception's class name and message.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from mirrorlab.backend.shm_transport import ShmTransport
from mirrorlab.collective.allreduce_gather_reduce import allreduce_gather_reduce
from mirrorlab.collective.allreduce_halving_doubling import allreduce_halving_doubling
from mirrorlab.collective.allreduce_ring import allreduce_ring
from mirrorlab.collective.allreduce_ring_pipelined import allreduce_ring_pipelined
from mirrorlab.collective.communicator import Communicator
from mirrorlab.collective.message import Fingerprint

ALGORITHMS = {"ring": allreduce_ring, "halving_doubling": allreduce_halving_doubling,
              "gather_reduce": allreduce_gather_reduce,
              "pipelined_ring": lambda inst, x: allreduce_ring_pipelined(inst, x, segment_bytes=4096)}
DTYPES = ("float32", "float64", "int64", "int32")
LENGTHS = (0, 1, 5, 33, 1000, 70001)


def case_input(seed: int, rank: int, dtype: str, length: int) -> np.ndarray:
    """Worker ``rank``'s random input of one case (values spanning magnitudes, so order matters)."""
    rng = np.random.default_rng([seed, rank, length, DTYPES.index(dtype)])
    if dtype.startswith("int"):
        return rng.integers(-10**6, 10**6, length).astype(dtype)
    return (rng.standard_normal(length) * 10.0 ** rng.integers(-4, 5, length)).astype(dtype)


def cases() -> list[tuple[str, str, int]]:
    return [(a, d, n) for a in ALGORITHMS for d in DTYPES for n in LENGTHS]


def run_cases(comm: Communicator, seed: int) -> dict[str, np.ndarray]:
    """Every case's all-reduce result on this worker, keyed ``algorithm-dtype-length``."""
    results = {}
    for algorithm, dtype, length in cases():
        inst = comm.start(Fingerprint("all_reduce", dtype, (length,), algorithm), "shm test", 60.0)
        results[f"{algorithm}-{dtype}-{length}"] = ALGORITHMS[algorithm](
            inst, case_input(seed, comm.rank, dtype, length))
        inst.done()
    return results


def _report_error(out: Path, rank: int, exc: BaseException) -> None:
    (out / f"{rank}.error").write_text(f"{type(exc).__name__}\n{exc}")


def allreduce_worker(session: str, rank: int, size: int, seed: int, out: str) -> None:
    """Run every case over shared memory and save each result as ``<rank>-<case>.npy``."""
    folder = Path(out)
    try:
        with ShmTransport.connect(session, rank, size, ring_bytes=1 << 16, timeout=60.0) as transport:
            comm = Communicator(rank, size, [f"/job:worker/task:{r}" for r in range(size)], transport)
            for key, value in run_cases(comm, seed).items():
                np.save(folder / f"{rank}-{key}.npy", np.asarray(value), allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - the parent asserts on it
        _report_error(folder, rank, exc)
        raise


def endless_worker(session: str, rank: int, size: int, out: str) -> None:
    """All-reduce 4 MiB tensors until something fails; touches ``<rank>.started`` after the first."""
    folder = Path(out)
    try:
        names = [f"/job:worker/task:{r}" for r in range(size)]
        with ShmTransport.connect(session, rank, size, ring_bytes=1 << 18, timeout=60.0, names=names) as transport:
            comm = Communicator(rank, size, names, transport)
            x = np.ones(1 << 20, np.float32)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                inst = comm.start(Fingerprint("all_reduce", "float32", x.shape), "endless", None)
                allreduce_ring(inst, x)
                inst.done()
                (folder / f"{rank}.started").touch()
    except Exception as exc:  # noqa: BLE001 - the parent asserts on it
        _report_error(folder, rank, exc)
