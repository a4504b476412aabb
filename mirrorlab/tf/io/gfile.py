"""``tf.io.gfile`` on local files: the directory helpers TF's multi-worker examples call."""

from __future__ import annotations

import glob as _glob
import os
import shutil

__all__ = ["GFile", "copy", "exists", "glob", "isdir", "listdir", "makedirs", "mkdir", "remove", "rename", "rmtree"]

GFile = open


def exists(path: str) -> bool:
    return os.path.exists(path)


def isdir(path: str) -> bool:
    return os.path.isdir(path)


def listdir(path: str) -> list[str]:
    return sorted(os.listdir(path))


def glob(pattern: str) -> list[str]:
    return sorted(_glob.glob(pattern))


def makedirs(path: str) -> None:
    """Create ``path`` and its parents; an existing directory is fine (as TF's)."""
    os.makedirs(path, exist_ok=True)


def mkdir(path: str) -> None:
    os.mkdir(path)


def remove(path: str) -> None:
    os.remove(path)


def rmtree(path: str) -> None:
    """Delete the directory ``path`` and everything in it."""
    shutil.rmtree(path)


def rename(src: str, dst: str, overwrite: bool = False) -> None:
    _refuse_existing(dst, overwrite)
    os.replace(src, dst)


def copy(src: str, dst: str, overwrite: bool = False) -> None:
    _refuse_existing(dst, overwrite)
    shutil.copyfile(src, dst)


def _refuse_existing(dst: str, overwrite: bool) -> None:
    """FileExistsError if ``dst`` exists and ``overwrite`` is False (rename and copy)."""
    if not overwrite and os.path.exists(dst):
        raise FileExistsError(f"{dst} exists; pass overwrite=True to replace it.")
