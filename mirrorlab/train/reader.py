"""Reading a saved checkpoint: its manifest and arrays (checked, never unpickled), TF's keys, and the readers
``load_checkpoint`` (a ``CheckpointReader``), ``load_variable`` and ``list_variables``.

A checkpoint is ``<prefix>.npz`` (the arrays; strings length-prefixed in uint8 arrays, see strings.py) plus
``<prefix>.index.json`` (the manifest: dtype, shape,
synchronization and aggregation of each variable in saving order, step, cluster shape, mirrorlab version and the
data file's SHA-256), written last: a checkpoint without it, or whose data does not match it, is never read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import errors
from ..frontend import current_frontend
from ..tensor import STRING
from .file_checks import DTYPE, SHAPE, check, check_array, fields, kind, map_of, read_json, read_npz
from .state import checkpoint_files, latest_checkpoint
from .strings import STRING_DTYPE, decode_strings

__all__ = ["CheckpointReader", "FORMAT", "FORMAT_VERSION", "OBJECT_GRAPH_KEY", "VALUE_SUFFIX", "checkpoint_key",
           "list_variables", "load_arrays", "load_checkpoint", "load_checkpoint_manifest", "load_variable",
           "saved_graph"]

VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"  # TF's checkpoint key of a variable: <object path> + this
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
FORMAT = "mirrorlab-checkpoint"
FORMAT_VERSION = 1


_ENTRY = fields({"key": kind(str), "dtype": DTYPE, "shape": SHAPE},
                {"synchronization": kind(str), "aggregation": kind(str)})
_MANIFEST = fields({"format": kind(str), "version": kind(int), "data_file": kind(str), "sha256": kind(str),
                    "variables": map_of(_ENTRY)},
                   {"step": kind(int), "cluster": kind(dict), "graph": map_of(map_of(kind(str)))})


def load_checkpoint_manifest(prefix: str | os.PathLike) -> dict:
    """The manifest of a complete checkpoint, its schema checked; raises NotFoundError/DataLossError for anything
    else."""
    data_path, index_path = checkpoint_files(prefix)
    if os.path.isdir(prefix):
        raise errors.DataLossError(
            f"Unable to open table file {prefix}: FAILED_PRECONDITION: {prefix}; Is a directory: perhaps your file is "
            "in a different file format and you need to use a different restore operator?\nFix: pass a checkpoint "
            "prefix, e.g. mirrorlab.train.latest_checkpoint(directory).")
    if not index_path.exists():
        hint = (" (its data file exists: the save was interrupted)" if data_path.exists() else
                f" ({prefix}.index is a TensorFlow checkpoint: mirrorlab reads only the checkpoints it writes)"
                if Path(f"{prefix}.index").exists() else "")
        raise errors.NotFoundError(f"Unsuccessful TensorSliceReader constructor: Failed to find any matching files for "
                                   f"{prefix}\n(no complete mirrorlab checkpoint there{hint})")
    manifest = read_json(index_path, kind(dict), "checkpoint manifest")
    if manifest.get("format") != FORMAT:
        raise errors.DataLossError(f"{index_path} is not a {FORMAT} manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise errors.DataLossError(f"{index_path} has format version {manifest.get('version')}; this mirrorlab "
                                   f"reads version {FORMAT_VERSION}")
    check(manifest, _MANIFEST, index_path)
    if Path(manifest["data_file"]).name != manifest["data_file"] or manifest["data_file"] in ("", ".", ".."):
        raise errors.DataLossError(f"{index_path} is damaged: its data_file {manifest['data_file']!r} is not a file "
                                   "name beside it.")
    return manifest


def checkpoint_key(path: str) -> str:
    """TF's key of the variable at object path ``path`` (``model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE``);
    a key passes through unchanged."""
    return path if path.endswith(VALUE_SUFFIX) or path == OBJECT_GRAPH_KEY else path + VALUE_SUFFIX


def saved_entries(manifest: dict) -> dict[str, dict]:
    """The manifest's variables by TF key, in saving order (checkpoints written before keys carried TF's suffix
    included)."""
    return {checkpoint_key(name): entry for name, entry in manifest["variables"].items()}


def saved_graph(manifest: dict) -> dict[str, dict[str, str]]:
    """The saved object graph's edges (see tracking.ObjectGraph); for a manifest written without them, the
    edges along each saved key's path."""
    if "graph" in manifest:
        return manifest["graph"]
    graph: dict[str, dict[str, str]] = {"": {}}
    for key in manifest["variables"]:
        parts = checkpoint_key(key)[:-len(VALUE_SUFFIX)].split("/")
        for depth, name in enumerate(parts):
            parent = "/".join(parts[:depth])
            graph.setdefault(parent, {})[name] = "/".join(parts[:depth + 1])
    return graph


def load_arrays(prefix: str | os.PathLike, manifest: dict) -> dict[str, np.ndarray]:
    """Every saved array by TF key, in saving order, after checking the data file against the manifest."""
    data_path = Path(str(prefix)).with_name(manifest["data_file"])
    try:
        raw = data_path.read_bytes()
    except FileNotFoundError:
        raise errors.DataLossError(f"{data_path} is missing: the checkpoint's data file was deleted") from None
    if hashlib.sha256(raw).hexdigest() != manifest["sha256"]:
        raise errors.DataLossError(f"{data_path} does not match its manifest (SHA-256 differs): the checkpoint is "
                                   "corrupt or was overwritten; restore an earlier one.")
    archive = read_npz(raw, data_path)
    arrays = {}
    for name, entry in saved_entries(manifest).items():
        where = f"{data_path} ({name})"
        if entry["key"] not in archive:
            raise errors.DataLossError(f"{where} is damaged: its manifest names the array {entry['key']!r}, which "
                                       "the data file lacks.")
        array = archive[entry["key"]]
        if entry["dtype"] == STRING_DTYPE:
            arrays[name] = decode_strings(array, entry["shape"], where)
        else:
            check_array(array, entry["dtype"], entry["shape"], where)
            arrays[name] = array
    return arrays


class CheckpointReader:
    """The saved values of one checkpoint by TF key (TF's ``CheckpointReader``, from ``load_checkpoint``).
    ``_CHECKPOINTABLE_OBJECT_GRAPH`` is the object graph as JSON bytes (TF gives a serialized proto)."""

    def __init__(self, prefix: str | os.PathLike) -> None:
        self._prefix = str(prefix)
        self._manifest = load_checkpoint_manifest(prefix)
        self._entries = saved_entries(self._manifest)
        self._arrays: dict[str, np.ndarray] | None = None  # read (and checked) on the first get_tensor

    def has_tensor(self, name: str) -> bool:
        """Whether ``name`` is a saved key."""
        return name in self._entries or name == OBJECT_GRAPH_KEY

    def get_tensor(self, name: str) -> Any:
        """The value saved under key ``name`` (a NumPy scalar for a scalar, bytes for a scalar string, object arrays
        of bytes for other strings, as TF's reader gives them)."""
        if name == OBJECT_GRAPH_KEY:
            return json.dumps(self._entries, sort_keys=True).encode()
        if name not in self._entries:
            full = checkpoint_key(name)
            fix = (f"Fix: use the full key {full!r}." if full in self._entries
                   else f"Keys in {self._prefix}: {sorted(self._entries)}.")
            raise errors.NotFoundError(f"Key {name} not found in checkpoint\n{fix}")
        if self._arrays is None:
            self._arrays = load_arrays(self._prefix, self._manifest)
        value = self._arrays[name]
        return value[()] if value.ndim == 0 else value

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """Every key's shape (the object graph's is ``[]``)."""
        shapes = {key: list(entry["shape"]) for key, entry in self._entries.items()}
        return {**shapes, OBJECT_GRAPH_KEY: []}

    def get_variable_to_dtype_map(self) -> dict[str, np.dtype]:
        """Every key's dtype; the object graph is a string, as TF's (``tf.string``)."""
        dtypes = {key: current_frontend().as_dtype(entry["dtype"]) for key, entry in self._entries.items()}
        return {**dtypes, OBJECT_GRAPH_KEY: STRING}


def _resolve(ckpt_dir_or_file: str | os.PathLike) -> str:
    """A checkpoint prefix: the latest one of a directory, or the path itself."""
    if not isinstance(ckpt_dir_or_file, (str, bytes, os.PathLike)):
        raise TypeError(f"Expected binary or unicode string, got {ckpt_dir_or_file!r}\nFix: pass a checkpoint "
                        "prefix or directory (latest_checkpoint returns None where there is none).")
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}")
        return latest
    return path


def load_checkpoint(ckpt_dir_or_file: str | os.PathLike) -> CheckpointReader:
    """A reader of the checkpoint at a prefix, or of the latest one in a directory."""
    return CheckpointReader(_resolve(ckpt_dir_or_file))


def load_variable(ckpt_dir_or_file: str | os.PathLike, name: str) -> Any:
    """One saved value by TF's key (``v/.ATTRIBUTES/VARIABLE_VALUE``; a ``:0`` suffix is ignored, as TF)."""
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name[:-2] if name.endswith(":0") else name)


def list_variables(ckpt_dir_or_file: str | os.PathLike) -> list[tuple[str, list[int]]]:
    """``(key, shape)`` of every saved value, with TF's keys (and its object-graph entry), sorted by key."""
    return sorted(load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map().items())
