"""Where each worker writes (the chief the real path, others their own path, or a temporary copy they delete
when handed the chief's), and atomic file writes (temporary file, fsync, rename) so a crash never leaves a
half-written file."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..callsite import user_call_site
from ..collective.request_kind import requesting
from ..distribute import context
from ..tensor import to_host

__all__ = ["write_filepath", "write_dirpath", "remove_temp_dirpath", "atomic_write", "is_chief", "writes_own_path"]


def _role(strategy: Any = None) -> tuple[bool, int | None]:
    """Whether this worker writes real paths (single worker or chief), and its task id."""
    strategy = strategy if strategy is not None else context.get_strategy()
    ext = strategy.extended
    multi = getattr(ext, "_num_workers", 1) > 1
    return (not multi or ext.should_checkpoint), getattr(ext, "_task_id", None)


def is_chief(strategy: Any = None) -> bool:
    """Whether this worker writes the real checkpoint (always true on a single worker)."""
    return _role(strategy)[0]


def writes_own_path(prefix: str, strategy: Any = None, collective: bool = True) -> bool:
    """Whether this worker writes checkpoint ``prefix`` itself: on a single worker and on the chief always; on
    another worker when its path differs from the chief's (MWMS asks each worker to save to its own path, e.g.
    ``write_dirpath``). A worker handed the chief's very path writes a temporary copy instead, which TF's workers
    would race on. The workers compare paths in a broadcast of the chief's path digest, when the save is a
    ``collective`` anyway (call it on every worker then); a save that is not (TF's reads no ON_READ SUM/MEAN
    variable) may run on the chief alone, so it writes as given (atomically: workers writing one path leave the
    same files)."""
    strategy = strategy if strategy is not None else context.get_strategy()
    ext = strategy.extended
    if getattr(ext, "_num_workers", 1) <= 1 or not collective:
        return True
    digest = np.frombuffer(hashlib.sha256(prefix.encode()).digest(), np.int64).copy()
    with requesting("checkpoint save"):
        chief = np.asarray(to_host(ext._group.broadcast([digest], user_call_site())[0]))
    return is_chief(strategy) or not np.array_equal(chief, digest)


def write_dirpath(dirpath: str | os.PathLike, strategy: Any = None) -> str:
    """``dirpath`` on the chief; ``dirpath/workertemp_<task_id>`` on other workers, created (TF's helper)."""
    chief, task_id = _role(strategy)
    if chief:
        return str(dirpath)
    temporary = os.path.join(str(dirpath), f"workertemp_{task_id}")
    os.makedirs(temporary, exist_ok=True)
    return temporary


def write_filepath(filepath: str | os.PathLike, strategy: Any = None) -> str:
    """``filepath`` on the chief; ``dirname/workertemp_<task_id>/basename`` on other workers."""
    dirname, base = os.path.split(str(filepath))
    return os.path.join(write_dirpath(dirname, strategy), base)


def remove_temp_dirpath(dirpath: str | os.PathLike, strategy: Any = None) -> None:
    """Delete the non-chief temporary directory made by ``write_dirpath`` (nothing on the chief)."""
    chief, task_id = _role(strategy)
    if not chief:
        shutil.rmtree(os.path.join(str(dirpath), f"workertemp_{task_id}"), ignore_errors=True)


def atomic_write(path: str | os.PathLike, data: bytes | Any) -> None:
    """Write ``data`` (bytes, or a callable taking a binary file) to ``path`` all at once: readers see the
    old file or the complete new one, never a partial one, even if the process dies mid-write."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with open(temp, "wb") as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    finally:
        if temp.exists():
            temp.unlink()
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    """Flush a directory's entries (a rename) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
