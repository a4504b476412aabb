"""Recovering a checkpoint directory after an interrupted save or sweep: the newest complete, readable checkpoint
on disk (the state file may be older, missing or damaged), and the leftovers a kill leaves (temporary files, data
without a manifest, a manifest whose data was deleted), which a manager removes at construction."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from .. import errors
from ..runtime import current_environment
from .reader import load_arrays, load_checkpoint_manifest
from .state import STATE_FILE, checkpoint_files

__all__ = ["delete_checkpoint", "managed_checkpoints", "newest_readable", "remove_leftovers"]

log = logging.getLogger("mirrorlab")

_TEMP = re.compile(r"^\..+\.tmp-[0-9a-f]{12}$")  # files.atomic_write's temporary names


def _number(name: str, prefix: str) -> str | None:
    """The checkpoint prefix ``<prefix>-<n>`` that file ``name`` belongs to (data or manifest), else None."""
    match = re.fullmatch(rf"({re.escape(prefix)}-\d+)(?:\.npz|\.index\.json)", name)
    return match.group(1) if match else None


def _entries(directory: str) -> list[str]:
    """The names in ``directory`` (none if it does not exist)."""
    try:
        return os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []


def managed_checkpoints(directory: str, name: str) -> list[str]:
    """The prefixes ``<directory>/<name>-<n>`` whose data and manifest both exist, oldest manifest first."""
    prefixes = {p for entry in _entries(directory) if (p := _number(entry, name)) is not None}
    complete = [os.path.join(directory, p) for p in prefixes
                if all(f.is_file() for f in checkpoint_files(os.path.join(directory, p)))]
    return sorted(complete, key=_written_at)


def _written_at(prefix: str) -> tuple[int, str]:
    """When the checkpoint at ``prefix`` was completed (its manifest's mtime), then its path for ties."""
    return checkpoint_files(prefix)[1].stat().st_mtime_ns, prefix


def newest_readable(prefixes: list[str]) -> str | None:
    """The newest (by manifest time) of ``prefixes`` whose manifest and data read back and match; damaged ones are
    skipped with a warning naming what is wrong."""
    for prefix in sorted(prefixes, key=_written_at, reverse=True):
        try:
            load_arrays(prefix, load_checkpoint_manifest(prefix))
            return prefix
        except (errors.DataLossError, errors.NotFoundError) as exc:
            log.warning("skipping the damaged checkpoint %s: %s", prefix, exc.message)
    return None


def remove_leftovers(directory: str, name: str) -> list[Path]:
    """Remove what interrupted saves and sweeps of checkpoints ``<name>-<n>`` left in ``directory``: temporary files
    of checkpoint and state files, data files without a manifest and manifests without their data. Returns them."""
    removed = []
    for entry in _entries(directory):
        path = Path(directory, entry)
        if _TEMP.match(entry):
            original = entry[1:entry.rindex(".tmp-")]
            leftover = original == STATE_FILE or _number(original, name) is not None
        else:
            prefix = _number(entry, name)
            leftover = prefix is not None and not all(f.is_file() for f in checkpoint_files(Path(directory, prefix)))
        if leftover and path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    if removed:
        log.warning("removed what interrupted checkpoint saves left in %s: %s", directory,
                    ", ".join(sorted(p.name for p in removed)))
    return removed


def delete_checkpoint(prefix: str) -> None:
    """Delete a checkpoint's files, its manifest first: a kill in between leaves data without a manifest, which
    no reader takes for a checkpoint and the next manager removes."""
    data, manifest = checkpoint_files(prefix)
    manifest.unlink(missing_ok=True)
    current_environment().io_point("checkpoint-sweep")  # a fault point between the two removals
    data.unlink(missing_ok=True)
