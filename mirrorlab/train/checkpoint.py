"""``Checkpoint`` and ``CheckpointManager``: saving and restoring variables, as TF does under MWMS.

Saving is a collective: every worker must call it, because ON_READ variables (metrics) are aggregated
over all replicas while saving. The chief writes the real path; the other workers write a temporary
path they delete right after (no races on a shared file system). A checkpoint is ``<prefix>.npz`` (the
arrays) plus ``<prefix>.index.json`` (the manifest: dtype, shape, synchronization and aggregation of
each variable, step, cluster shape, mirrorlab version and the data file's SHA-256). The manifest is
written last, atomically: a checkpoint without it, or whose data does not match it, is never restored.
Nothing is ever unpickled.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from .. import errors
from .._version import __version__
from ..distribute import context
from ..distribute.variables import DistributedVariable, Variable, plain_variable
from ..runtime import current_environment
from ..tensor import to_host
from .files import atomic_write, is_chief, remove_temp_dirpath, write_filepath
from .tracking import tracked_variables

__all__ = ["Checkpoint", "CheckpointManager", "LoadStatus", "latest_checkpoint", "load_variable",
           "list_variables", "load_checkpoint_manifest"]

VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"  # TF's checkpoint key of a variable: <object path> + this
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
COUNTER_KEY = "save_counter" + VALUE_SUFFIX
FORMAT = "mirrorlab-checkpoint"
FORMAT_VERSION = 1
MAX_MANIFEST_BYTES = 64 << 20
STATE_FILE = "checkpoint"
_TEMP_DIR = re.compile(r"(^|[\\/])workertemp_\d+([\\/]|$)")


def _prefix_paths(prefix: str) -> tuple[Path, Path]:
    return Path(f"{prefix}.npz"), Path(f"{prefix}.index.json")


def _strategy_of(variables: dict[str, Variable]) -> Any:
    for var in variables.values():
        if isinstance(var, DistributedVariable):
            return var.distribute_strategy
    return context.get_strategy()


def load_checkpoint_manifest(prefix: str | os.PathLike) -> dict:
    """The manifest of a complete checkpoint; raises NotFoundError/DataLossError for anything else."""
    data_path, index_path = _prefix_paths(str(prefix))
    if not index_path.exists():
        hint = " (its data file exists: the save was interrupted)" if data_path.exists() else ""
        raise errors.NotFoundError(f"Unsuccessful TensorSliceReader constructor: Failed to find any matching files for "
                                   f"{prefix}: no complete mirrorlab checkpoint there{hint}.")
    if index_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise errors.DataLossError(f"{index_path} is larger than {MAX_MANIFEST_BYTES} bytes: not a mirrorlab manifest")
    try:
        manifest = json.loads(index_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise errors.DataLossError(f"{index_path} is not a valid checkpoint manifest: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise errors.DataLossError(f"{index_path} is not a {FORMAT} manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise errors.DataLossError(f"{index_path} has format version {manifest.get('version')}; this mirrorlab "
                                   f"reads version {FORMAT_VERSION}")
    return manifest


def checkpoint_key(path: str) -> str:
    """TF's key of the variable at object path ``path`` (``model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE``);
    a key passes through unchanged."""
    return path if path.endswith(VALUE_SUFFIX) or path == OBJECT_GRAPH_KEY else path + VALUE_SUFFIX


def _saved_entries(manifest: dict) -> dict[str, dict]:
    """The manifest's variables by TF key (checkpoints written before keys carried TF's suffix included)."""
    return {checkpoint_key(name): entry for name, entry in manifest["variables"].items()}


def _load_arrays(prefix: str, manifest: dict) -> dict[str, np.ndarray]:
    data_path = Path(str(prefix)).with_name(manifest["data_file"])
    try:
        raw = data_path.read_bytes()
    except FileNotFoundError:
        raise errors.DataLossError(f"{data_path} is missing: the checkpoint's data file was deleted") from None
    if hashlib.sha256(raw).hexdigest() != manifest["sha256"]:
        raise errors.DataLossError(f"{data_path} does not match its manifest (SHA-256 differs): the checkpoint is "
                                   "corrupt or was overwritten; restore an earlier one.")
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
            return {name: archive[entry["key"]] for name, entry in _saved_entries(manifest).items()}
    except (ValueError, KeyError, OSError) as exc:
        raise errors.DataLossError(f"{data_path} cannot be read safely (mirrorlab never unpickles checkpoint "
                                   f"data): {exc}") from None


class LoadStatus:
    """What a restore matched: ``assert_consumed`` fails if anything was left unmatched on either side."""

    def __init__(self, restored: list[str], missing: list[str], unused: list[str]) -> None:
        self.restored = restored
        self.missing = missing
        self.unused = unused

    def assert_consumed(self) -> "LoadStatus":
        if self.missing or self.unused:
            raise AssertionError(f"Checkpoint not fully consumed: variables without a saved value {self.missing}; "
                                 f"saved values without a variable {self.unused}")
        return self

    def assert_existing_objects_matched(self) -> "LoadStatus":
        if self.missing:
            raise AssertionError(f"Unresolved objects: no saved value for {self.missing}")
        return self

    def assert_nontrivial_match(self) -> "LoadStatus":
        if not self.restored:
            raise AssertionError("Nothing was restored: the checkpoint shares no variable with this object graph")
        return self

    def expect_partial(self) -> "LoadStatus":
        return self

    def run_restore_ops(self, session: Any = None) -> None:
        """Nothing to run: restores happen eagerly."""


class Checkpoint:
    """Groups trackable objects (variables, models, optimizers, anything holding them) for saving."""

    def __init__(self, root: Any = None, **kwargs: Any) -> None:
        roots = dict(kwargs)
        if root is not None:
            roots["root"] = root
        for name, value in roots.items():
            if value is None or isinstance(value, (str, bytes, int, float, bool)):
                raise ValueError(f"`Checkpoint` was expecting a trackable object (an object derived from "
                                 f"`Trackable`), got {value!r} for `{name}`.")
        self._roots = roots
        self._counter: Variable | None = None

    @property
    def save_counter(self) -> Variable:
        """An int64 variable counting the calls to ``save`` (saved and restored with the checkpoint), as TF's.
        TF creates it on the first ``save``, ``restore`` or access, never on ``write``/``read``."""
        if self._counter is None:
            self._counter = plain_variable(np.int64(0), name="save_counter")
        return self._counter

    def _saves(self) -> int:
        """The save count, without creating the counter."""
        return 0 if self._counter is None else int(self._counter.numpy())

    def _count_save(self) -> int:
        """One more save (creating the counter if needed); returns the new count."""
        self.save_counter.assign_add(np.int64(1))
        return self._saves()

    def __getattr__(self, name: str) -> Any:
        """The objects the checkpoint was given are its attributes (``ckpt.model``), as in TF."""
        roots = self.__dict__.get("_roots", {})
        if name in roots:
            return roots[name]
        raise AttributeError(f"'Checkpoint' object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        """Assigning a public attribute adds it to what is saved, as in TF."""
        if name.startswith("_") or name == "save_counter":
            object.__setattr__(self, name, value)
        else:
            self._roots[name] = value

    def _checkpoint_children(self) -> dict[str, Any]:
        """What a checkpoint nested in another one contributes: its roots (and its counter once it has one)."""
        children = dict(self._roots)
        if self._counter is not None:
            children["save_counter"] = self._counter
        return children

    def _variables(self) -> dict[str, Variable]:
        """Every tracked variable by TF key (the save counter once it exists)."""
        return {checkpoint_key(path): var for path, var in tracked_variables(self._checkpoint_children()).items()}

    # -- saving ----------------------------------------------------------------------------------

    def write(self, file_prefix: str | os.PathLike, options: Any = None) -> str:
        """Save to exactly ``file_prefix`` (no counter). Every worker must call it; a non-chief worker
        writes to ``write_filepath(file_prefix)`` and deletes it (a path already inside a
        ``workertemp_<id>`` directory is used as given and left for the caller to remove)."""
        variables = self._variables()
        values = {name: np.asarray(to_host(var._save_value())) for name, var in variables.items()}
        strategy = _strategy_of(variables)
        prefix = str(file_prefix)
        redirect = not is_chief(strategy) and not _TEMP_DIR.search(prefix)
        self._write_files(write_filepath(prefix, strategy) if redirect else prefix, values, variables, strategy)
        if redirect:
            remove_temp_dirpath(os.path.dirname(prefix), strategy)
        return prefix

    def save(self, file_prefix: str | os.PathLike, options: Any = None) -> str:
        """Save to ``<file_prefix>-<n>`` (n counts saves) and record it as the latest checkpoint."""
        path = self.write(f"{file_prefix}-{self._count_save()}")
        if is_chief(_strategy_of(self._variables())):
            _update_state(os.path.dirname(str(file_prefix)) or ".", path, None)
        return path

    def _write_files(self, prefix: str, values: dict[str, np.ndarray], variables: dict[str, Variable],
                     strategy: Any) -> None:
        data_path, index_path = _prefix_paths(prefix)
        keys = {name: f"v{i}" for i, name in enumerate(values)}
        buffer = io.BytesIO()
        np.savez(buffer, **{keys[name]: value for name, value in values.items()})
        raw = buffer.getvalue()
        atomic_write(data_path, raw)
        hook = getattr(current_environment(), "io_point", None)
        if hook is not None:
            hook("checkpoint-commit")  # a simulated crash here leaves data without a manifest
        ext = strategy.extended
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION, "mirrorlab_version": __version__,
            "step": self._saves(), "data_file": data_path.name, "sha256": hashlib.sha256(raw).hexdigest(),
            "cluster": {"workers": getattr(ext, "_num_workers", 1), "replicas_in_sync": strategy.num_replicas_in_sync},
            "variables": {name: {"key": keys[name], "dtype": values[name].dtype.name, "shape": list(values[name].shape),
                                 "synchronization": var.synchronization.name, "aggregation": var.aggregation.name}
                          for name, var in variables.items()},
        }
        atomic_write(index_path, json.dumps(manifest, indent=1, sort_keys=True).encode())

    # -- restoring -------------------------------------------------------------------------------

    def read(self, save_path: str | os.PathLike) -> LoadStatus:
        """Restore every tracked variable that has a saved value (ON_READ SUM values are split across
        replicas, as TF does); shapes must match."""
        manifest = load_checkpoint_manifest(save_path)
        saved = _load_arrays(str(save_path), manifest)
        variables = self._variables()
        # The save counter is bookkeeping: restored when both sides have it, never reported as (un)matched.
        counter, count = variables.pop(COUNTER_KEY, None), saved.pop(COUNTER_KEY, None)
        if counter is not None and count is not None:
            counter._restore_value(count)
        restored, missing = [], []
        for name, var in variables.items():
            if name not in saved:
                missing.append(name)
                continue
            value = saved[name]
            if tuple(value.shape) != tuple(var.shape):
                raise ValueError(f"Received incompatible tensor with shape {tuple(value.shape)} when attempting to "
                                 f"restore variable with shape {tuple(var.shape)} and name {name} from {save_path}. "
                                 "Fix: build the model exactly as it was when the checkpoint was saved.")
            if value.dtype != var.dtype:
                raise TypeError(f"Checkpoint {save_path} holds {name} as {value.dtype.name} but the variable is "
                                f"{var.dtype.name}.")
            var._restore_value(value)
            restored.append(name)
        unused = sorted(set(saved) - set(variables))
        return LoadStatus(restored, missing, unused)

    def restore(self, save_path: str | os.PathLike | None, options: Any = None) -> LoadStatus:
        """``read`` plus the save counter; ``None`` restores nothing (fresh start)."""
        if save_path is None:
            return LoadStatus([], [], [])
        _ = self.save_counter  # restore creates the counter; read gives it the saved count
        return self.read(save_path)


def _state_path(directory: str) -> Path:
    return Path(directory) / STATE_FILE


def _read_state(directory: str) -> list[str]:
    path = _state_path(directory)
    if not path.exists():
        return []
    found = re.findall(r'^all_model_checkpoint_paths: "(.*)"$', path.read_text(encoding="utf-8"), re.M)
    return [p if os.path.isabs(p) else os.path.join(directory, p) for p in found]


def _update_state(directory: str, latest: str, keep: list[str] | None) -> None:
    paths = keep if keep is not None else [p for p in _read_state(directory) if p != latest] + [latest]
    rel = [os.path.relpath(p, directory) for p in paths]
    text = f'model_checkpoint_path: "{os.path.relpath(latest, directory)}"\n'
    text += "".join(f'all_model_checkpoint_paths: "{r}"\n' for r in rel)
    atomic_write(_state_path(directory), text.encode())


def latest_checkpoint(checkpoint_dir: str | os.PathLike) -> str | None:
    """The newest complete checkpoint recorded in ``checkpoint_dir``, or None."""
    for path in reversed(_read_state(str(checkpoint_dir))):
        if _prefix_paths(path)[1].exists():
            return path
    return None


def load_variable(ckpt_dir_or_file: str | os.PathLike, name: str) -> Any:
    """One saved value by TF's key (``v/.ATTRIBUTES/VARIABLE_VALUE``) or its object path (``v``).
    ``_CHECKPOINTABLE_OBJECT_GRAPH`` gives the object graph as JSON bytes (TF gives a serialized proto)."""
    prefix = _resolve(ckpt_dir_or_file)
    manifest = load_checkpoint_manifest(prefix)
    key = checkpoint_key(name[:-2] if name.endswith(":0") else name)
    entries = _saved_entries(manifest)
    if key == OBJECT_GRAPH_KEY:
        return json.dumps(entries, sort_keys=True).encode()
    if key not in entries:
        raise errors.NotFoundError(f"Key {name} not found in checkpoint\n(checkpoint {prefix} holds "
                                   f"{sorted(entries)})")
    return _load_arrays(prefix, manifest)[key]


def list_variables(ckpt_dir_or_file: str | os.PathLike) -> list[tuple[str, list[int]]]:
    """``(key, shape)`` of every saved value, with TF's keys (and its object-graph entry)."""
    manifest = load_checkpoint_manifest(_resolve(ckpt_dir_or_file))
    listed = [(key, entry["shape"]) for key, entry in _saved_entries(manifest).items()]
    return sorted(listed + [(OBJECT_GRAPH_KEY, [])])


def _resolve(ckpt_dir_or_file: str | os.PathLike) -> str:
    path = str(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = latest_checkpoint(path)
        if latest is None:
            raise errors.NotFoundError(f"no checkpoint recorded in directory {path}")
        return latest
    return path


class CheckpointManager:
    """Numbered saves in one directory, keeping the newest ``max_to_keep`` (TF's CheckpointManager).

    On non-chief workers the files go to ``directory/workertemp_<task_id>`` and are removed after each
    save; every worker restores from the chief's ``directory``."""

    def __init__(self, checkpoint: Checkpoint, directory: str | os.PathLike, max_to_keep: int | None,
                 keep_checkpoint_every_n_hours: float | None = None, checkpoint_name: str = "ckpt",
                 step_counter: Any = None, checkpoint_interval: Any = None, init_fn: Any = None) -> None:
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"max_to_keep must be a positive integer or None, got {max_to_keep}.")
        self._checkpoint = checkpoint
        self._directory = str(directory)
        self._max_to_keep = max_to_keep
        self._name = checkpoint_name
        self._init_fn = init_fn
        self._checkpoints = [p for p in _read_state(self._directory) if _prefix_paths(p)[1].exists()]

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoints(self) -> list[str]:
        return list(self._checkpoints)

    @property
    def latest_checkpoint(self) -> str | None:
        return self._checkpoints[-1] if self._checkpoints else None

    def save(self, checkpoint_number: int | None = None, check_interval: bool = True, options: Any = None) -> str:
        """Save (a collective: call it on every worker); returns the chief's path."""
        ckpt = self._checkpoint
        count = ckpt._count_save()
        number = count if checkpoint_number is None else int(checkpoint_number)
        prefix = ckpt.write(os.path.join(self._directory, f"{self._name}-{number}"))
        if not is_chief(_strategy_of(ckpt._variables())):
            return prefix
        self._checkpoints = [p for p in self._checkpoints if p != prefix] + [prefix]
        if self._max_to_keep is not None:
            for old in self._checkpoints[:-self._max_to_keep]:
                for path in _prefix_paths(old):
                    path.unlink(missing_ok=True)
            self._checkpoints = self._checkpoints[-self._max_to_keep:]
        _update_state(self._directory, prefix, self._checkpoints)
        return prefix

    def restore_or_initialize(self) -> str | None:
        """Restore the latest checkpoint, or run ``init_fn`` when there is none."""
        if self.latest_checkpoint is not None:
            self._checkpoint.restore(self.latest_checkpoint)
            return self.latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None
