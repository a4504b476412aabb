"""Training callbacks: the hook points of ``Model.fit``, ``History`` and ``BackupAndRestore``."""

from __future__ import annotations

import csv
import os
import shutil
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ...callsite import user_call_site
from ...tensor import to_host
from ...distribute.variables import Variable
from ...train.checkpoint import Checkpoint, CheckpointManager
from ...train.files import is_chief

if TYPE_CHECKING:
    from .models import Model

__all__ = ["pythonify_logs", "Callback", "CallbackList", "History", "BackupAndRestore", "LambdaCallback",
           "EarlyStopping", "TerminateOnNaN", "LearningRateScheduler", "ReduceLROnPlateau", "CSVLogger",
           "ModelCheckpoint", "TensorBoard"]


class Callback:
    """Override the hooks you need; ``self.model`` is set by ``fit``."""

    def __init__(self) -> None:
        self.model: "Model | None" = None
        self.params: dict = {}

    def set_model(self, model: "Model") -> None:
        self.model = model

    def set_params(self, params: dict) -> None:
        self.params = params

    def on_train_begin(self, logs: dict | None = None) -> None: ...
    def on_train_end(self, logs: dict | None = None) -> None: ...
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None: ...
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None: ...
    def on_batch_begin(self, batch: int, logs: Mapping | None = None) -> None: ...
    def on_batch_end(self, batch: int, logs: Mapping | None = None) -> None: ...

    def on_train_batch_begin(self, batch: int, logs: Mapping | None = None) -> None:
        """Keras' default: the same as ``on_batch_begin``."""
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: Mapping | None = None) -> None:
        """Keras' default: the same as ``on_batch_end`` (``logs``: the running loss and metrics)."""
        self.on_batch_end(batch, logs)

    # ``evaluate`` (also fit's validation, with fit's callbacks) and ``predict`` call these, as Keras does.
    def on_test_begin(self, logs: dict | None = None) -> None: ...
    def on_test_end(self, logs: dict | None = None) -> None: ...
    def on_test_batch_begin(self, batch: int, logs: Mapping | None = None) -> None: ...
    def on_test_batch_end(self, batch: int, logs: Mapping | None = None) -> None: ...
    def on_predict_begin(self, logs: dict | None = None) -> None: ...
    def on_predict_end(self, logs: dict | None = None) -> None: ...
    def on_predict_batch_begin(self, batch: int, logs: Mapping | None = None) -> None: ...
    def on_predict_batch_end(self, batch: int, logs: Mapping | None = None) -> None: ...


class BatchLogs(Mapping):
    """A training batch's logs, the running loss and metrics, read (a cross-replica read of every metric) only
    when a callback looks at them, so callbacks that ignore them add no collectives to a step; sorted by name,
    as Keras hands logs to callbacks."""

    def __init__(self, read: Callable[[], dict[str, float]]) -> None:
        self._read, self._logs = read, None

    def _values(self) -> dict[str, float]:
        if self._logs is None:
            self._logs = pythonify_logs(self._read())
        return self._logs

    def __getitem__(self, key: str) -> float:
        return self._values()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __len__(self) -> int:
        return len(self._values())


def pythonify_logs(logs: Mapping | None) -> dict[str, Any]:
    """Keras' ``pythonify_logs``: a copy of ``logs`` (None: empty) sorted by name, a dict value's entries merged in
    (a custom step's nested logs), values as Python floats where they convert: what every callback of a hook
    shares."""
    result: dict[str, Any] = {}
    for key, value in sorted((logs or {}).items()):
        if isinstance(value, Mapping):
            result.update(pythonify_logs(value))
            continue
        array = np.asarray(to_host(value)) if not isinstance(value, (str, bytes)) else None
        convertible = array is not None and array.size == 1 and array.dtype.kind in "biuf"
        result[key] = float(array.reshape(())) if convertible else value
    return result


class CallbackList(Callback):
    """Fans every hook out to a list of callbacks, in order; epoch and training logs are handed over as Keras does,
    as one sorted copy (a callback may add to it, and the later ones see that)."""

    def __init__(self, callbacks: list[Callback], model: "Model", params: dict) -> None:
        super().__init__()
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            cb.set_model(model)
            cb.set_params(params)

    def _each(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(*args)


def _fan_out(hook: str) -> Callable[..., None]:
    """``CallbackList``'s ``hook``: every callback's, in order, the logs as one copy in Keras' form (sorted, nested
    logs merged, floats; a step's running metrics read only when a callback looks)."""
    if "batch" in hook:
        def each_batch(self: CallbackList, batch: int, logs: Mapping | None = None) -> None:
            self._each(hook, batch, logs if isinstance(logs, BatchLogs) else pythonify_logs(logs))
        return each_batch
    if "epoch" in hook:
        def each_epoch(self: CallbackList, epoch: int, logs: dict | None = None) -> None:
            self._each(hook, epoch, pythonify_logs(logs))
        return each_epoch

    def each(self: CallbackList, logs: dict | None = None) -> None:
        self._each(hook, pythonify_logs(logs))
    return each


for _hook in ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_test_begin", "on_test_end",
              "on_predict_begin", "on_predict_end", "on_train_batch_begin", "on_train_batch_end",
              "on_test_batch_begin", "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end"):
    setattr(CallbackList, _hook, _fan_out(_hook))


class History(Callback):
    """``history[metric]`` is the list of per-epoch values; ``epoch`` the epochs run."""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)


class LambdaCallback(Callback):
    """Callbacks from plain functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``."""

    def __init__(self, **hooks: Any) -> None:
        super().__init__()
        for name, fn in hooks.items():
            if not hasattr(Callback, name):
                raise ValueError(f"LambdaCallback has no hook named {name!r}")
            setattr(self, name, fn)


class BackupAndRestore(Callback):
    """Resume training after a worker restart (TF's ``BackupAndRestore``).

    Every worker saves model, optimizer and progress (a collective): the chief to ``backup_dir/chief``,
    the others to a ``workertemp_<task_id>`` directory, which they delete. ``save_freq="epoch"`` saves
    at the end of each epoch; an integer saves every ``save_freq`` batches, counted across epochs as
    TF 2.21 (Keras 3) counts them. When ``fit`` starts, every worker restores from ``backup_dir/chief``
    if a backup exists: training resumes at the epoch after the last completed one (a backup taken
    inside an epoch restarts that epoch, with the weights it had then, as TF 2.21 does). The backup is
    deleted when training ends unless ``delete_checkpoint=False``."""

    def __init__(self, backup_dir: str | os.PathLike, save_freq: str | int = "epoch",
                 delete_checkpoint: bool = True) -> None:
        super().__init__()
        if not backup_dir:
            raise ValueError("Empty `backup_dir` argument passed")
        if save_freq != "epoch" and (not isinstance(save_freq, int) or isinstance(save_freq, bool)
                                     or save_freq < 1):
            raise ValueError(f"Invalid value for argument `save_freq`. Received: save_freq={save_freq}. "
                             "Expected either 'epoch' or a positive integer (save every that many batches).")
        self.backup_dir = str(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = delete_checkpoint
        self._manager: CheckpointManager | None = None
        self._strategy: Any = None
        self._epoch = 0
        self._last_batch_seen = 0
        self._batches_since_save = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        model = self.model
        self._strategy = model.distribute_strategy
        with self._strategy.scope():
            self._saved_epoch = Variable(np.int64(-1), name="ckpt_saved_epoch", trainable=False)
        checkpoint = Checkpoint(model=model, optimizer=model.optimizer, saved_epoch=self._saved_epoch)
        chief_dir = os.path.join(self.backup_dir, "chief")
        self._manager = CheckpointManager(checkpoint, chief_dir, max_to_keep=1)
        if self._manager.latest_checkpoint is not None:
            checkpoint.restore(self._manager.latest_checkpoint).assert_existing_objects_matched()
            model._initial_epoch = int(self._saved_epoch.numpy()) + 1

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.save_freq == "epoch":
            return
        added = batch + 1 if batch <= self._last_batch_seen else batch - self._last_batch_seen
        self._last_batch_seen = batch
        self._batches_since_save += added
        if self._batches_since_save >= self.save_freq:
            self._batches_since_save = 0
            self._save(completed_epoch=self._epoch - 1)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._last_batch_seen = 0
        if self.save_freq == "epoch":
            self._save(completed_epoch=epoch)

    def _save(self, completed_epoch: int) -> None:
        with self._strategy.scope():
            self._saved_epoch.assign(np.int64(completed_epoch))
        self._manager.save()

    def on_train_end(self, logs: dict | None = None) -> None:
        if not self.delete_checkpoint:
            return
        # Every worker must have finished writing its last save (into the backup) before the chief deletes it.
        self._strategy.extended._group.barrier(user_call_site(), "BackupAndRestore cleanup")
        if is_chief(self._strategy):
            shutil.rmtree(os.path.join(self.backup_dir, "chief"), ignore_errors=True)


class _Monitor(Callback):
    """Keras' monitor logic: which way ``monitor`` improves (``mode``, or for "auto" the loss or the metric's own
    direction) and by how much (``min_delta``)."""

    def __init__(self, monitor: str, mode: str, baseline: float | None, min_delta: float = 0) -> None:
        super().__init__()
        if mode not in ("auto", "min", "max"):
            warnings.warn(f"{type(self).__name__} mode '{mode}' is unknown, fallback to auto mode.", stacklevel=3)
            mode = "auto"
        self.monitor, self.mode, self.min_delta = monitor, mode, abs(min_delta)
        self.best: float | None = baseline
        self.monitor_op: Callable[[Any, Any], Any] | None = None

    def _set_monitor_op(self) -> None:
        """Keras' direction for the monitored value: the mode, or for "auto" the loss or the metric's own."""
        if self.mode != "auto":
            self.monitor_op = np.less if self.mode == "min" else np.greater
        else:
            name = self.monitor.removeprefix("val_")
            if name == "loss":
                self.monitor_op = np.less
            for metric in self.model._compiled_metric_list:
                if metric.name == name and metric._direction is not None:
                    self.monitor_op = np.greater if metric._direction == "up" else np.less
            if self.monitor_op is None:
                raise ValueError(f"{type(self).__name__} callback received monitor={self.monitor}, but Keras isn't "
                                 "able to automatically determine whether that metric should be maximized or "
                                 "minimized. Pass `mode='max'` in order to monitor based on the highest metric value, "
                                 "or pass `mode='min'` in order to use the lowest value.")
        if self.monitor_op is np.less:
            self.min_delta *= -1

    def _is_improvement(self, value: float, reference: float | None) -> bool:
        return reference is None or bool(self.monitor_op(value - self.min_delta, reference))


class EarlyStopping(_Monitor):
    """Stop training when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs, as Keras 3
    does: ``mode="auto"`` minimises losses and maximises accuracies (other metrics need ``mode``), ``baseline`` must
    be beaten to reset the wait, epochs before ``start_from_epoch`` are ignored, and ``restore_best_weights`` sets the
    best epoch's weights when training ends."""

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0, patience: int = 0, verbose: int = 0,
                 mode: str = "auto", baseline: float | None = None, restore_best_weights: bool = False,
                 start_from_epoch: int = 0) -> None:
        super().__init__(monitor, mode, baseline, min_delta)
        self.patience, self.verbose, self.baseline = patience, verbose, baseline
        self.restore_best_weights, self.start_from_epoch = restore_best_weights, start_from_epoch
        self.wait = self.stopped_epoch = self.best_epoch = 0
        self.best_weights: list[Any] | None = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.wait = self.stopped_epoch = self.best_epoch = 0
        self.best, self.best_weights = None, None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.monitor_op is None:
            self._set_monitor_op()
        logs = logs or {}
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Early stopping conditioned on metric `{self.monitor}` which is not available. "
                          f"Available metrics are: {','.join(logs)}", stacklevel=2)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights, self.best_epoch = self.model.get_weights(), epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)


class TerminateOnNaN(Callback):
    """Stop training after the batch whose running loss is NaN or infinite (or raise, with ``raise_error``)."""

    def __init__(self, raise_error: bool = False) -> None:
        super().__init__()
        self.raise_error = raise_error

    def on_batch_end(self, batch: int, logs: Mapping | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is None or np.isfinite(loss):
            return
        if self.raise_error:
            raise RuntimeError(f"NaN or Inf loss encountered at batch {batch}. Loss value: {loss}. Terminating "
                               "training immediately.")
        print(f"Batch {batch}: Invalid loss, terminating training")
        self.model.stop_training = True


class LearningRateScheduler(Callback):
    """Set the optimizer's learning rate to ``schedule(epoch, lr)`` (or ``schedule(epoch)``) before each epoch, and
    log it as ``learning_rate`` after each."""

    def __init__(self, schedule: Callable[..., float], verbose: int = 0) -> None:
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        optimizer = self.model.optimizer
        if not hasattr(optimizer, "learning_rate"):
            raise ValueError('Optimizer must have a "learning_rate" attribute.')
        try:
            learning_rate = self.schedule(epoch, float(np.asarray(optimizer.learning_rate)))
        except TypeError:  # a schedule of the epoch alone (Keras' older signature)
            learning_rate = self.schedule(epoch)
        if not isinstance(learning_rate, (float, np.float32, np.float64)):
            raise ValueError(f"The output of the `schedule` function should be a float. Got: {learning_rate}")
        optimizer.learning_rate = learning_rate
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {learning_rate}.")

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs:  # (Keras writes into ``logs or {}``: empty logs, of an epoch before any step, stay empty)
            logs["learning_rate"] = float(np.asarray(self.model.optimizer.learning_rate))


class CSVLogger(Callback):
    """Write each epoch's logs as a CSV row to ``filename`` (Keras 3's format: an ``epoch`` column, then the log names
    sorted, ``val_`` columns of ``NA`` when there is no validation; ``append`` continues a file, with no second
    header)."""

    def __init__(self, filename: str | os.PathLike, separator: str = ",", append: bool = False) -> None:
        super().__init__()
        self.sep, self.filename, self.append = separator, os.fspath(filename), append
        self.keys: list[str] | None = None
        self.append_header = True
        self._file: Any = None
        self._writer: Any = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self.append and os.path.exists(self.filename):
            with open(self.filename) as existing:
                self.append_header = not existing.readline()
        if self._file is not None and not self._file.closed:
            self._file.close()
        self._file = open(self.filename, "a" if self.append else "w", newline="")  # noqa: SIM115 (kept for the run)
        self._writer, self.keys = None, None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
            if self.keys and not any(key.startswith("val_") for key in self.keys):
                self.keys += [f"val_{key}" for key in self.keys]
        if self._writer is None:
            dialect = type("Dialect", (csv.excel,), {"delimiter": self.sep})
            self._writer = csv.DictWriter(self._file, fieldnames=["epoch", *self.keys], dialect=dialect)
            if self.append_header:
                self._writer.writeheader()
        self._writer.writerow({"epoch": epoch, **{key: _csv_value(logs.get(key, "NA")) for key in self.keys}})
        self._file.flush()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._file is not None and not self._file.closed:
            self._file.close()
        self._writer = None


def _csv_value(value: Any) -> Any:
    """A log value as Keras writes it: strings and numbers as they are, a sequence as ``"[a, b]"``."""
    if isinstance(value, str) or not isinstance(value, Iterable) or (isinstance(value, np.ndarray) and not value.ndim):
        return value
    return f'"[{", ".join(map(str, value))}]"'


class ReduceLROnPlateau(_Monitor):
    """Multiply the learning rate by ``factor`` (not below ``min_lr``) when ``monitor`` has not improved by more than
    ``min_delta`` for ``patience`` epochs, then wait ``cooldown`` epochs; logs ``learning_rate`` each epoch (Keras 3's
    rules, ``mode`` as EarlyStopping's)."""

    def __init__(self, monitor: str = "val_loss", factor: float = 0.1, patience: int = 10, verbose: int = 0,
                 mode: str = "auto", min_delta: float = 1e-4, cooldown: int = 0, min_lr: float = 0.0,
                 **kwargs: Any) -> None:
        super().__init__(monitor, mode, None, min_delta)
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau does not support a factor >= 1.0. Received factor={factor}")
        self.factor, self.min_lr, self.patience, self.verbose = factor, min_lr, patience, verbose
        self.cooldown = cooldown
        self.cooldown_counter = self.wait = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.best, self.cooldown_counter, self.wait = None, 0, 0

    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.monitor_op is None:
            self._set_monitor_op()
        logs = logs or {}  # (Keras writes into ``logs or {}``: empty logs stay empty)
        optimizer = self.model.optimizer
        logs["learning_rate"] = float(np.asarray(optimizer.learning_rate))
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Learning rate reduction is conditioned on metric `{self.monitor}` which is not available. "
                          f"Available metrics are: {','.join(logs)}.", stacklevel=2)
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current, self.best):
            self.best, self.wait = current, 0
        elif not self.in_cooldown():
            self.wait += 1
            old_lr = float(np.asarray(optimizer.learning_rate))
            if self.wait >= self.patience and old_lr > np.float32(self.min_lr):
                new_lr = max(old_lr * self.factor, self.min_lr)
                optimizer.learning_rate = new_lr
                if self.verbose > 0:
                    print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.")
                self.cooldown_counter, self.wait = self.cooldown, 0


class ModelCheckpoint(_Monitor):
    """Save the model (a ``.keras`` file, ``Model.save``) or with ``save_weights_only`` its weights (a
    ``.weights.h5`` file) after every epoch (or every ``save_freq`` batches) to ``filepath`` formatted with the
    epoch, the batch and the logs (``"m{epoch:02d}-{val_loss:.2f}.keras"``), only on improvement of ``monitor`` with
    ``save_best_only``, as Keras 3 does, with Keras' argument and path checks.

    Differs from Keras on purpose: the files hold mirrorlab's formats under Keras' names (NumPy archives where
    Keras writes HDF5 through h5py), and legacy ``.h5`` model files are refused."""

    def __init__(self, filepath: str | os.PathLike, monitor: str = "val_loss", verbose: int = 0,
                 save_best_only: bool = False, save_weights_only: bool = False, mode: str = "auto",
                 save_freq: str | int = "epoch", initial_value_threshold: float | None = None) -> None:
        super().__init__(monitor, mode, initial_value_threshold)
        self.filepath = os.fspath(filepath)
        self.verbose, self.save_best_only, self.save_weights_only = verbose, save_best_only, save_weights_only
        self.save_freq = save_freq
        self._batches_since_save, self._last_batch_seen = 0, None
        self._current_epoch = 0
        if save_freq != "epoch" and not isinstance(save_freq, int):
            raise ValueError(f"Unrecognized save_freq: {save_freq}. Expected save_freq are 'epoch' or integer values")
        if save_weights_only and not self.filepath.endswith(".weights.h5"):
            raise ValueError("When using `save_weights_only=True` in `ModelCheckpoint`, the filepath provided must end "
                             f"in `.weights.h5` (Keras weights format). Received: filepath={self.filepath}")
        if not save_weights_only and not self.filepath.endswith((".keras", ".h5")):
            raise ValueError("The filepath provided must end in `.keras` (Keras model format). Received: "
                             f"filepath={self.filepath}")
        if not save_weights_only and self.filepath.endswith(".h5"):
            raise ValueError("mirrorlab does not write Keras' legacy HDF5 model files (it needs h5py). Received: "
                             f"filepath={self.filepath}\nFix: end the filepath in `.keras`.")

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._current_epoch = epoch

    def on_train_batch_end(self, batch: int, logs: Mapping | None = None) -> None:
        if self.save_freq == "epoch":
            return
        seen = self._last_batch_seen
        self._batches_since_save += batch + 1 if seen is None or batch <= seen else batch - seen
        self._last_batch_seen = batch
        if self._batches_since_save >= self.save_freq:
            self._batches_since_save = 0
            self._save(self._current_epoch, batch, logs)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.monitor_op is None:
            self._set_monitor_op()
        if self.save_freq == "epoch":
            self._save(epoch, None, logs)

    def _path(self, epoch: int, batch: int | None, logs: Mapping) -> str:
        """``filepath`` formatted with the (1-based) epoch and batch and the logs."""
        try:
            if batch is None or "batch" in logs:
                return self.filepath.format(epoch=epoch + 1, **logs)
            return self.filepath.format(epoch=epoch + 1, batch=batch + 1, **logs)
        except KeyError as error:
            raise KeyError(f'Failed to format this callback filepath: "{self.filepath}". Reason: {error}') from None

    def _should_save(self, epoch: int, logs: Mapping, path: str) -> bool:
        """Always, or with ``save_best_only`` when ``monitor`` improved (or is missing, with Keras' warning)."""
        if not self.save_best_only:
            self._say(f"\nEpoch {epoch + 1}: saving model to {path}")
            return True
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Can save best model only with {self.monitor} available.", stacklevel=3)
            return True
        best = "None" if self.best is None else f"{self.best:.5f}"
        if not self._is_improvement(current, self.best):
            self._say(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {best}")
            return False
        self._say(f"\nEpoch {epoch + 1}: {self.monitor} improved from {best} to {current:.5f}, saving model to {path}")
        self.best = current
        return True

    def _save(self, epoch: int, batch: int | None, logs: Mapping | None) -> None:
        logs = logs or {}
        path = self._path(epoch, batch, logs)
        if self._should_save(epoch, logs, path):
            if os.path.isdir(path):
                raise OSError("Please specify a non-directory filepath for ModelCheckpoint. Filepath used is an "
                              f"existing directory: {path}")
            if os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            if self.save_weights_only:
                self.model.save_weights(path, overwrite=True)
            else:
                self.model.save(path, overwrite=True)
            self._say(f"\nEpoch {epoch + 1}: finished saving model to {path}")

    def _say(self, text: str) -> None:
        if self.verbose > 0:
            print(text)


from .tensorboard import TensorBoard  # noqa: E402 (it builds on Callback)
