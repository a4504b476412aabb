"""TF's ``tf.distribute.experimental.PreemptionCheckpointHandler``: when any worker is told it will be terminated,
every worker saves a checkpoint after the same step and exits; when the job restarts, the handler restores it and
``total_run_calls`` says how far training got.

A termination notice is a SIGTERM (the handler installs its handler when made on a process's main thread), a
``TerminationConfig.termination_watcher_fn`` that returns True, or in the simulator a ``Preempt`` fault. TF's
workers share the notice through the coordination service's key-value store and a watcher thread; mirrorlab's share
it through one small all-reduce per ``run`` on a multi-worker cluster, so every worker learns it at the same call,
deterministically. As in TF, the worker that sees a notice at call N asks for the checkpoint after step N + 1: each
worker then saves (the chief in ``checkpoint_dir``, the others in a ``workertemp_<id>`` directory they delete) and
calls ``exit_fn`` (by default ``sys.exit(42)``, TF's restart code off Google Cloud).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import errors
from ..aggregation import ReduceOp
from ..cluster import roles
from ..runtime.binding import current_environment
from ..train.checkpoint import Checkpoint, CheckpointManager
from ..train.files import remove_temp_dirpath, write_filepath
from .variables import Variable

__all__ = ["PreemptionCheckpointHandler", "TerminationConfig"]

RESTART_CODE = 42  # TF's exit code after the preemption checkpoint (its Borg and generic platforms)
_COUNTER = "checkpointed_runs"  # the variable TF adds to the checkpoint: the run count it was saved at


class TerminationConfig:
    """How the handler learns of a termination (``termination_watcher_fn() -> bool``, polled at every ``run``;
    else SIGTERM), what it calls after saving (``exit_fn``), and how it saves (``save_fn``, else the checkpoint
    manager). TF's ``grace_period`` (training on for a while after the first save) is not supported."""

    def __init__(self, termination_watcher_fn: Callable[[], bool] | None = None,
                 exit_fn: Callable[[], Any] | None = None, grace_period: float | None = None,
                 save_fn: Callable[..., Any] | None = None) -> None:
        if grace_period:
            raise NotImplementedError(
                f"TerminationConfig(grace_period={grace_period!r}) is not supported: mirrorlab saves once, after the "
                "step following the notice, and exits (TF's behaviour with no grace period).\nFix: leave grace_period "
                "unset or 0.")
        self.termination_watcher_fn = termination_watcher_fn
        self.exit_fn = exit_fn if exit_fn is not None else _default_exit
        self.grace_period = 0
        self.save_fn = save_fn


def _default_exit() -> None:
    sys.exit(RESTART_CODE)


class PreemptionCheckpointHandler:
    """Saves a checkpoint on every worker and exits when any worker is about to be terminated; restores the latest
    checkpoint of ``checkpoint_dir`` when made (see the module docstring)."""

    def __init__(self, cluster_resolver: Any, checkpoint_or_checkpoint_manager: Checkpoint | CheckpointManager,
                 checkpoint_dir: str | None = None, termination_config: TerminationConfig | None = None) -> None:
        if isinstance(checkpoint_or_checkpoint_manager, Checkpoint) and not checkpoint_dir:
            raise errors.InvalidArgumentError(
                "When a checkpoint is passed, a checkpoint_dir must be passed as well.\nFix: pass the directory to "
                "save and restore in, or a tf.train.CheckpointManager instead of the checkpoint.")
        cluster = cluster_resolver.cluster_spec() if cluster_resolver is not None else None
        if cluster is not None and "ps" in cluster.as_dict():
            raise NotImplementedError("PreemptionCheckpointHandler does not supportusage with "
                                      "tf.distribute.experimental.ParameterServerStrategy.\nFix: train with "
                                      "MultiWorkerMirroredStrategy, or save with a CheckpointManager yourself.")
        config = termination_config or TerminationConfig()
        self._checkpoint_dir = checkpoint_dir
        self._watcher = config.termination_watcher_fn
        self._exit_fn = config.exit_fn
        self._save_fn = config.save_fn
        self._local = cluster is None or not cluster.jobs
        self._is_chief = self._local or roles.is_chief(cluster, cluster_resolver.task_type, cluster_resolver.task_id)
        self._checkpointed_runs = Variable(np.int64(0), trainable=False, name=_COUNTER)
        self._made_manager = not isinstance(checkpoint_or_checkpoint_manager, CheckpointManager)
        self._read_manager = (CheckpointManager(checkpoint_or_checkpoint_manager, checkpoint_dir, max_to_keep=1)
                              if self._made_manager else checkpoint_or_checkpoint_manager)
        checkpoint = self._read_manager.checkpoint
        if not hasattr(checkpoint, _COUNTER):
            setattr(checkpoint, _COUNTER, self._checkpointed_runs)
        self._strategy = self._agreeing_strategy(checkpoint)
        self._write_manager = self._read_manager
        if self._made_manager and not self._is_chief:  # (TF's: a workertemp_<id> directory beside checkpoint_dir)
            self._write_manager = CheckpointManager(checkpoint, write_filepath(checkpoint_dir, self._strategy),
                                                    max_to_keep=1)
        self._read_manager.restore_or_initialize()
        self._run_counter = int(self._checkpointed_runs.numpy())
        self._step_to_checkpoint: int | None = None  # agreed by every worker
        self._own_notice = threading.Event()  # this worker was told it will be terminated
        self._announced = False
        if (self._watcher is None and threading.current_thread() is threading.main_thread()
                and current_environment().owns_process):
            signal.signal(signal.SIGTERM, lambda signum, frame: self._own_notice.set())

    def _agreeing_strategy(self, checkpoint: Checkpoint) -> Any:
        """The strategy whose collectives the workers agree through: that of the checkpoint's variables, else the
        current one (none is needed on one worker)."""
        strategy = checkpoint._distribute_strategy()
        if not self._local and getattr(strategy.extended, "_num_workers", 1) <= 1:
            raise ValueError(
                "PreemptionCheckpointHandler on a multi-worker cluster found no MultiWorkerMirroredStrategy: the "
                "checkpoint holds none of its variables and the handler was made outside its scope, so the workers "
                "could not agree on when to save.\nFix: make the handler inside `with strategy.scope():`, or give it "
                "a checkpoint of the strategy's variables.")
        return strategy

    @property
    def total_run_calls(self) -> np.int64:
        """How many times ``run`` was called, counting those before the checkpoint training restored from."""
        return np.int64(self._run_counter)

    def run(self, distributed_train_function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``distributed_train_function(*args, **kwargs)`` (one training step), after saving and exiting if the
        cluster agreed to checkpoint at this call."""
        self._check_preemption_and_maybe_checkpoint()
        result = distributed_train_function(*args, **kwargs)
        self._run_counter += 1
        return result

    def save_checkpoint_if_preempted(self, *args: Any, **kwargs: Any) -> None:
        """``run`` without a function: for loops that run their steps themselves (counts as a call)."""
        self._check_preemption_and_maybe_checkpoint(*args, **kwargs)
        self._run_counter += 1

    @contextlib.contextmanager
    def watch_preemption_scope(self) -> Iterator[None]:
        """TF's scope for TPUStrategy; with mirrored strategies it only lets errors through, as TF's."""
        yield

    def _noticed(self) -> bool:
        """Whether this worker has been told it will be terminated (and has not told the cluster yet)."""
        if self._announced:
            return False
        if self._watcher is not None and self._watcher():
            self._own_notice.set()
        if current_environment().termination_noticed():
            self._own_notice.set()
        return self._own_notice.is_set()

    def _agree(self) -> None:
        """Tell the cluster of a new notice and learn of the others': the checkpoint comes after the next step."""
        own = self._noticed()
        if self._local or getattr(self._strategy.extended, "_num_workers", 1) <= 1:
            anyone = own
        else:
            strategy = self._strategy
            flags = strategy.experimental_distribute_values_from_function(
                lambda ctx: np.int64(own and ctx.replica_id_in_sync_group % len(strategy.extended.worker_devices) == 0))
            anyone = int(np.asarray(strategy.reduce(ReduceOp.SUM, flags, axis=None))) > 0
        if own:
            self._announced = True
        if anyone and self._step_to_checkpoint is None:
            self._step_to_checkpoint = self._run_counter + 1

    def _check_preemption_and_maybe_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """At the agreed call: save and exit (the arguments go to the save); at any other: agree on notices."""
        if self._step_to_checkpoint is not None and self._step_to_checkpoint == self._run_counter:
            self._save(*args, **kwargs)
            if self._made_manager and not self._is_chief:  # (the workertemp_<id> directory beside checkpoint_dir)
                remove_temp_dirpath(os.path.dirname(os.path.normpath(self._checkpoint_dir)), self._strategy)
            self._exit_fn()
            return
        self._agree()

    def _save(self, *args: Any, **kwargs: Any) -> None:
        """Record the run count in the checkpoint and save it on every worker."""
        self._checkpointed_runs.assign(np.int64(self._run_counter))
        if self._save_fn is not None:
            self._save_fn(*args, **kwargs)
        else:
            self._write_manager.save(*args, **kwargs)
