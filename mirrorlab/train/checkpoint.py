"""``Checkpoint`` and ``CheckpointManager``: saving and restoring variables, as TF 2.21 does under MWMS.

Saving is a collective where it is in TF: ON_READ SUM/MEAN variables (metrics) are all-reduced while saving,
so every worker must call it. The chief writes the real path. Another worker writes a path of its own (e.g.
``workertemp_<id>``, TF's ``write_dirpath``) as given, like the chief; handed the chief's path, it writes a
temporary copy it deletes right after (TF's workers would race on the shared files; see
``files.writes_own_path``). The files are written by writer.py and read by reader.py; nothing is ever unpickled.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mirrorlab.runtime import clock
from .. import errors
from ..aggregation import VariableAggregation, VariableSynchronization
from ..distribute import context
from ..distribute.distributed_variables import DistributedVariable
from ..distribute.variables import Variable, plain_variable
from ..runtime import current_environment
from ..tensor import to_host
from .files import is_chief, remove_temp_dirpath, write_filepath, writes_own_path
from .reader import checkpoint_key, load_arrays, load_checkpoint_manifest, saved_graph
from .recovery import delete_checkpoint, managed_checkpoints, newest_readable, remove_leftovers
from .state import CheckpointState, checkpoint_files, get_checkpoint_state, write_checkpoint_state
from .status import CheckpointLoadStatus, InitializationOnlyStatus
from .restoring import PendingRestore, restore_on_create
from .tracking import holds_no_state, object_graph, trackable_children
from .writer import write_checkpoint_files

__all__ = ["Checkpoint", "CheckpointManager", "CheckpointOptions", "restore_on_create"]

log = logging.getLogger("mirrorlab")


@dataclass
class CheckpointOptions:
    """TF's ``tf.train.CheckpointOptions``. mirrorlab writes synchronously on the host, so only
    ``experimental_write_callbacks`` has an effect: each is called after a write, with the path if it takes
    one argument."""

    experimental_io_device: str | None = None
    experimental_enable_async_checkpoint: bool = False
    experimental_write_callbacks: list[Callable[..., Any]] | None = None
    enable_async: bool = False
    experimental_skip_slot_variables: bool = False
    experimental_sharding_callback: Any = None


def _strategy_of(variables: dict[str, Variable]) -> Any:
    """The strategy the variables belong to (the current one if none is distributed)."""
    for var in variables.values():
        if isinstance(var, DistributedVariable):
            return var.distribute_strategy
    return context.get_strategy()


def _run_write_callbacks(options: CheckpointOptions | None, path: str) -> None:
    """TF's ``_execute_callbacks``: each callback gets the path if it takes one argument."""
    for callback in (options.experimental_write_callbacks or []) if options is not None else []:
        count = len(inspect.signature(callback).parameters)
        if count > 1:
            raise AssertionError("Callback functions for checkpoint are required to have 0 or 1"
                                 f"parameters, but this has {count} parameters: {callback}")
        if count:
            callback(path)
        else:
            callback()


class Checkpoint:
    """Groups trackable objects (variables, models, optimizers, anything holding them) for saving."""

    def __init__(self, root: Any = None, **kwargs: Any) -> None:
        if root is not None:
            _check_trackable("root", root)
        for name, value in kwargs.items():
            _check_trackable(name, value)
        self._root = root  # TF saves root's children at the top level, then the keyword arguments
        self._roots = dict(sorted(kwargs.items()))
        self._counter: Variable | None = None
        self._restore = PendingRestore({}, {}, "")  # what the last read kept for later variables

    @property
    def save_counter(self) -> Variable:
        """An int64 variable counting the calls to ``save`` (saved and restored with the checkpoint), as TF's.
        TF creates it on the first ``save``, ``restore`` or access, never on ``write``/``read``."""
        if self._counter is None:
            self._counter = plain_variable(np.int64(0), name="save_counter")
            self._restore.give({"save_counter": self._counter})
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
        if name == "root" and self.__dict__.get("_root") is not None:
            return self._root
        raise AttributeError(f"'Checkpoint' object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        """Assigning a public attribute adds it to what is saved, as in TF. Values that hold no state (numbers,
        strings, ...) are kept as plain attributes and not saved; like TF, they do not untrack what the name
        held before. A checkpoint given a ``root`` saves that object and its keyword arguments only, as TF's: later
        attributes are plain ones."""
        if (name.startswith("_") or name == "save_counter" or _untracked(value)
                or self.__dict__.get("_root") is not None):
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)
        self._roots[name] = value  # a reassigned attribute keeps its place, as in TF
        self._restore.give({name: value})
        restore_on_create(self)  # this checkpoint may itself be nested in one that is restoring

    def _distribute_strategy(self) -> Any:
        """The strategy the saved variables belong to (the current one if none is distributed)."""
        return _strategy_of(object_graph(self._checkpoint_children()).variables)

    def _checkpoint_children(self) -> dict[str, Any]:
        """What the checkpoint saves (also when nested in another one): ``root``'s children, the keyword
        arguments and later attributes in the order they were given, and the counter once it exists."""
        children = dict(trackable_children(self._root))
        for name, value in self._roots.items():
            children.setdefault(name, value)
        if self._counter is not None:
            children["save_counter"] = self._counter
        return children

    def _variables(self) -> dict[str, Variable]:
        """Every tracked variable by TF key (the save counter once it exists), in TF's saving order."""
        return {checkpoint_key(path): var for path, var in object_graph(self._checkpoint_children()).variables.items()}

    # -- saving ----------------------------------------------------------------------------------

    def write(self, file_prefix: str | os.PathLike, options: CheckpointOptions | None = None) -> str:
        """Save to exactly ``file_prefix`` (no counter, no state file) and return it. With ON_READ SUM/MEAN
        variables it is a collective every worker must call (see ``files.writes_own_path``)."""
        prefix = os.fspath(file_prefix)
        self._write(prefix, options)
        return prefix

    def _write(self, prefix: str, options: CheckpointOptions | None) -> bool:
        """``write``; returns whether this worker wrote ``prefix`` itself (see ``files.writes_own_path``)."""
        graph = object_graph(self._checkpoint_children())
        if graph.unsaveable:
            raise ValueError(f"Unable to save the object {graph.unsaveable[0]} (a dictionary wrapper constructed "
                             "automatically on attribute assignment). The wrapped dictionary contains a non-string "
                             "key which maps to a trackable object or mutable data structure.\n\nIf you don't need "
                             "this dictionary checkpointed, wrap it in a non-trackable object; it will be "
                             "subsequently ignored.\nFix: use string keys (e.g. str(key)) for dicts that hold "
                             "variables.")
        variables = {checkpoint_key(path): var for path, var in graph.variables.items()}
        strategy = _strategy_of(variables)
        own = writes_own_path(prefix, strategy, collective=any(map(_aggregates_on_save, variables.values())))
        target = prefix if own else write_filepath(prefix, strategy)
        if os.path.dirname(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)  # before the values, as TF (a failing one leaves it)
        values = {name: np.asarray(to_host(var._save_value())) for name, var in variables.items()}
        write_checkpoint_files(target, values, variables, graph.children, self._saves(), strategy)
        if not own:
            remove_temp_dirpath(os.path.dirname(prefix), strategy)
        _run_write_callbacks(options, prefix)
        return own

    def save(self, file_prefix: str | os.PathLike, options: CheckpointOptions | None = None) -> str:
        """Save to ``<file_prefix>-<n>`` (n counts saves) and record it as the directory's latest checkpoint
        (TF's state file then lists only it)."""
        path = f"{os.fspath(file_prefix)}-{self._count_save()}"
        if self._write(path, options):
            write_checkpoint_state(os.path.dirname(path) or ".", path, [path])
        return path

    def sync(self) -> None:
        """Nothing to wait for: mirrorlab's saves and restores finish before they return."""

    # -- restoring -------------------------------------------------------------------------------

    def read(self, save_path: str | os.PathLike, options: CheckpointOptions | None = None) -> CheckpointLoadStatus:
        """Restore every tracked variable that has a saved value (ON_READ SUM values are split across
        replicas, as TF does). Dtypes are checked before anything is assigned; saved values without a
        variable wait for one to be attached (see ``CheckpointLoadStatus``). ``None`` restores nothing (TF's
        initialization-only status)."""
        if save_path is None:
            return InitializationOnlyStatus(self)
        path = os.fspath(save_path)
        manifest = load_checkpoint_manifest(path)
        restore = PendingRestore(load_arrays(path, manifest), saved_graph(manifest), path)
        self._restore = restore  # kept if a value fails to restore: later variables still take theirs, as in TF
        restore.give(self._checkpoint_children(), reading=True,  # also remembers the objects matched
                     first=[name for name, _ in trackable_children(self._root)])
        return CheckpointLoadStatus(self)

    def restore(self, save_path: str | os.PathLike | None,
                options: CheckpointOptions | None = None) -> CheckpointLoadStatus:
        """``read``, then the save counter is created and takes its saved value (after the read, as TF's: a read
        that raises leaves the value for the counter made later); ``None`` restores nothing but still creates the
        counter, so a later ``write`` saves it, as TF's does."""
        try:
            status = self.read(save_path)
        except errors.NotFoundError as exc:
            raise type(exc)(f"Error when restoring from checkpoint or SavedModel at {save_path}: {exc.message}\n"
                            "Please double-check that the path is correct. You may be missing the checkpoint suffix "
                            "(e.g. the '-1' in 'path/to/ckpt-1').") from None
        _ = self.save_counter
        return status


def _aggregates_on_save(var: Variable) -> bool:
    """True for the variables whose saved value is an all-reduce (ON_READ SUM/MEAN), which makes a save a
    collective, as in TF."""
    return (var.synchronization == VariableSynchronization.ON_READ
            and var.aggregation in (VariableAggregation.SUM, VariableAggregation.MEAN))


def _usable_state(directory: str) -> CheckpointState | None:
    """The directory's state file, or None (logged) when it names no checkpoint: the manager then recovers the
    latest checkpoint from the files themselves."""
    try:
        return get_checkpoint_state(directory)
    except ValueError as exc:
        log.warning("%s; recovering the latest checkpoint from the files", exc)
        return None


def _as_int(value: Any) -> int:
    """A step or checkpoint number given as an int, a NumPy/CuPy scalar or an integer Variable."""
    return int(np.asarray(to_host(value)))


def _untracked(value: Any) -> bool:
    """True for what TF does not track as a checkpoint attribute: values holding no state, and objects whose class
    says that TF's counterpart is no Trackable (``_checkpoint_untrackable = True``, as Keras 3 metrics)."""
    return holds_no_state(value) or bool(getattr(type(value), "_checkpoint_untrackable", False))


def _check_trackable(name: str, value: Any) -> None:
    """TF refuses values that hold no state as ``Checkpoint(...)`` arguments."""
    if _untracked(value):
        raise ValueError(f"`Checkpoint` was expecting {name} to be a trackable object (an object derived from "
                         f"`Trackable`), got {value}. If you believe this object should be trackable (i.e. it is "
                         "part of the TensorFlow Python API and manages state), please open an issue.\nFix: pass a "
                         f"Variable (e.g. mirrorlab.Variable({name})) or an object holding variables.")


class CheckpointManager:
    """Numbered saves in one directory, keeping the newest ``max_to_keep`` (TF's CheckpointManager).

    Like TF's, it takes over only the checkpoints an earlier manager recorded with timestamps (never
    ones ``Checkpoint.save`` wrote), and keeps one every ``keep_checkpoint_every_n_hours``. A non-chief
    worker managing its own ``workertemp_<id>`` directory (TF's ``write_dirpath``) does all that there; one
    given the chief's directory writes temporary copies it removes after each save and leaves the chief's
    state file alone.

    A save survives a kill at any point: data, then manifest, then the state file (each atomic), and only then
    are old checkpoints deleted (manifest first) and the state recorded again. At construction the manager finds
    the newest complete checkpoint even where the state file is older or missing, and the chief removes what an
    interrupted save left (see recovery.py)."""

    def __init__(self, checkpoint: Checkpoint, directory: str | os.PathLike, max_to_keep: int | None,
                 keep_checkpoint_every_n_hours: float | None = None, checkpoint_name: str = "ckpt",
                 step_counter: Any = None, checkpoint_interval: Any = None, init_fn: Callable[[], Any] | None = None,
                 last_checkpoint_step: int | None = None) -> None:
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"Expected a positive integer or `None` for `max_to_keep`, got {max_to_keep}.")
        if checkpoint_interval is not None and step_counter is None:
            raise ValueError("`step_counter` should be passed if `checkpoint_interval` is not None.")
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._max_to_keep = max_to_keep
        self._keep_every = keep_checkpoint_every_n_hours
        self._name = checkpoint_name
        self._init_fn = init_fn
        self._step_counter = step_counter
        self._interval = checkpoint_interval
        self._last_step = last_checkpoint_step
        self._owner = is_chief(checkpoint._distribute_strategy())
        now = clock.now()
        state = _usable_state(self._directory)
        self._latest = None if state is None else state.model_checkpoint_path
        self._last_preserved = now - 1.0 if state is None else min(state.last_preserved_timestamp, now)
        paths = [] if state is None else state.all_model_checkpoint_paths
        stamps = ([] if state is None else state.all_model_checkpoint_timestamps) or [self._last_preserved] * len(paths)
        self._maybe_delete: dict[str, float] = {
            path: min(stamp, now) for path, stamp in zip(paths, stamps) if min(stamp, now) > self._last_preserved}
        self._recover(now)

    def _recover(self, now: float) -> None:
        """Undo an interrupted save or sweep: on the chief, remove its leftovers; on every worker, take the newest
        complete, readable checkpoint of this manager's name as the latest, even where the state file is older,
        missing or names a deleted or damaged one (then recorded in the state file again)."""
        if self._owner:
            remove_leftovers(self._directory, self._name)
        on_disk = managed_checkpoints(self._directory, self._name)
        recorded = self._latest if self._latest is not None and all(
            f.is_file() for f in checkpoint_files(self._latest)) else None
        newer = on_disk[on_disk.index(recorded):] if recorded in on_disk else on_disk
        candidates = newer + ([recorded] if recorded is not None and recorded not in on_disk else [])
        latest = newest_readable(candidates) or newest_readable(on_disk)
        if latest is None or latest == self._latest:
            return
        log.warning("%s: the newest complete checkpoint is %s (the state file names %s): an earlier save was "
                    "interrupted", self._directory, latest, self._latest)
        self._latest = latest
        self._maybe_delete.setdefault(latest, min(checkpoint_files(latest)[1].stat().st_mtime, now))
        if self._owner:
            self._record_state()

    @property
    def directory(self) -> str:
        """The directory the manager saves into."""
        return self._directory

    @property
    def checkpoint(self) -> Checkpoint:
        """The checkpoint the manager saves."""
        return self._checkpoint

    @property
    def checkpoints(self) -> list[str]:
        """The checkpoints this manager may still delete, oldest first."""
        return list(self._maybe_delete)

    @property
    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint: this manager's last save, else what the state file named at construction."""
        return self._latest

    @property
    def checkpoint_interval(self) -> Any:
        """The minimum number of steps between saves (None: no minimum)."""
        return self._interval

    def save(self, checkpoint_number: Any = None, check_interval: bool = True,
             options: CheckpointOptions | None = None) -> str | None:
        """Save (a collective: call it on every worker); returns the chief's path, or None when
        ``checkpoint_interval`` steps have not passed since the last save."""
        if self._interval is not None:
            step = _as_int(self._step_counter)
            if self._last_step is not None and (step == self._last_step or (
                    check_interval and step < self._last_step + self._interval)):
                return None
            self._last_step = step
        ckpt = self._checkpoint
        count = ckpt._count_save()
        number = count if checkpoint_number is None else _as_int(checkpoint_number)
        prefix = os.path.join(self._directory, f"{self._name}-{number}")
        owner = ckpt._write(prefix, options)
        current_environment().io_point("checkpoint-manifest")
        self._latest = prefix
        self._maybe_delete.pop(prefix, None)
        self._maybe_delete[prefix] = clock.now()
        # As TF: record the new checkpoint, then delete what falls out, then record again, so a kill at any point
        # leaves a state file naming a complete checkpoint. A non-chief given the chief's directory keeps the same
        # books but leaves the files to the chief.
        if owner:
            self._record_state()
        forgotten = self._sweep()
        if owner and forgotten is not None:
            for doomed in forgotten:
                delete_checkpoint(doomed)
            self._record_state()
        return prefix

    def _record_state(self) -> None:
        """Write the directory's state file from this manager's books (atomically)."""
        write_checkpoint_state(self._directory, self._latest, list(self._maybe_delete),
                               list(self._maybe_delete.values()), self._last_preserved)

    def _sweep(self) -> list[str] | None:
        """Forget the oldest checkpoints beyond ``max_to_keep``, preserving one per ``keep_checkpoint_every_n_hours``;
        returns those to delete, or None when the books did not change."""
        if self._max_to_keep is None or len(self._maybe_delete) <= self._max_to_keep:
            return None
        doomed = []
        while len(self._maybe_delete) > self._max_to_keep:
            oldest = next(iter(self._maybe_delete))
            stamp = self._maybe_delete.pop(oldest)
            if self._keep_every is not None and stamp - self._keep_every * 3600.0 >= self._last_preserved:
                self._last_preserved = stamp
                continue
            doomed.append(oldest)
        return doomed

    def restore_or_initialize(self) -> str | None:
        """Restore the latest checkpoint, or run ``init_fn`` when there is none."""
        if self.latest_checkpoint is not None:
            self._checkpoint.restore(self.latest_checkpoint)
            if self._interval is not None:
                self._last_step = _as_int(self._step_counter)
            return self.latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None

    def sync(self) -> None:
        """Wait for the checkpoint's outstanding saves (none: mirrorlab's are synchronous)."""
        self._checkpoint.sync()
