"""Where each worker writes (the chief the real path, others a temporary one they delete), and
atomic file writes (temporary file, fsync, rename) so a crash never leaves a half-written file."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..distribute import context

__all__ = ["write_filepath", "write_dirpath", "remove_temp_dirpath", "atomic_write", "is_chief"]


def _role(strategy: Any = None) -> tuple[bool, int | None]:
    strategy = strategy if strategy is not None else context.get_strategy()
    ext = strategy.extended
    multi = getattr(ext, "_num_workers", 1) > 1
    return (not multi or ext.should_checkpoint), getattr(ext, "_task_id", None)


def is_chief(strategy: Any = None) -> bool:
    """Whether this worker writes the real checkpoint (always true on a single worker)."""
    return _role(strategy)[0]


def write_dirpath(dirpath: str | os.PathLike, strategy: Any = None) -> str:
    """``dirpath`` on the chief; ``dirpath/workertemp_<task_id>`` on other workers (TF's helper)."""
    chief, task_id = _role(strategy)
    return str(dirpath) if chief else os.path.join(str(dirpath), f"workertemp_{task_id}")


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
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
