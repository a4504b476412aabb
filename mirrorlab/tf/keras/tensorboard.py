"""Keras 3's ``TensorBoard`` callback for scalars: each epoch's logs (``epoch_<name>``, with the learning rate) in
``log_dir/train`` and the validation logs in ``log_dir/validation``, batch logs (``batch_<name>``) every
``update_freq`` batches, and evaluate's results (``evaluation_<name>_vs_iterations``), in TF's event-file format.

As in Keras 3 on TF 2.21, every worker writes its own files into ``log_dir``. mirrorlab builds no TF graph, so
``write_graph`` has nothing to write; weight histograms, images, embeddings and the profiler are not available and
are refused when asked for."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mirrorlab.runtime import clock
from ..io.event_file import EventFileWriter
from .callbacks import Callback

__all__ = ["TensorBoard"]


class TensorBoard(Callback):
    """Write training, validation and evaluation scalars for TensorBoard under ``log_dir``."""

    def __init__(self, log_dir: str | os.PathLike = "logs", histogram_freq: int = 0, write_graph: bool = True,
                 write_images: bool = False, write_steps_per_second: bool = False, update_freq: Any = "epoch",
                 profile_batch: Any = 0, embeddings_freq: int = 0, embeddings_metadata: Any = None) -> None:
        super().__init__()
        unavailable = {"histogram_freq": histogram_freq, "write_images": write_images,
                       "embeddings_freq": embeddings_freq, "profile_batch": profile_batch}
        asked = [name for name, value in unavailable.items() if value not in (0, False, None)]
        if asked:
            raise NotImplementedError(f"TensorBoard({', '.join(asked)}=...): mirrorlab writes scalar summaries only "
                                      "(no weight histograms, images, embeddings or profiles).\nFix: leave "
                                      f"{', '.join(asked)} at the default.")
        if update_freq != "epoch" and update_freq != "batch" and not (isinstance(update_freq, int) and update_freq > 0):
            raise ValueError(f"TensorBoard(update_freq={update_freq!r}): expected 'epoch', 'batch' or a positive "
                             "integer number of batches.\nFix: pass one of those.")
        self.log_dir = os.fspath(log_dir)
        self.write_graph = write_graph  # (kept for Keras' signature: there is no graph to write)
        self.write_steps_per_second = write_steps_per_second
        self.update_freq = 1 if update_freq == "batch" else update_freq
        self._writers: dict[str, EventFileWriter] = {}
        self._global_train_batch = self._global_test_batch = 0
        self._steps: list[int] = []  # the batch counts a write is gated on, innermost last (see _recording)
        self._batch_start = self._epoch_start = 0.0
        self._epoch_start_iterations = 0

    def _writer(self, run: str) -> EventFileWriter:
        """The open writer of ``run`` (``train`` or ``validation``), made on first use."""
        if run not in self._writers:
            self._writers[run] = EventFileWriter(os.path.join(self.log_dir, run))
        return self._writers[run]

    def _iterations(self) -> int:
        return int(np.asarray(self.model.optimizer.iterations))

    def _recording(self) -> bool:
        """Whether a summary written now is kept. With ``update_freq`` in batches Keras 3 gates every write (epoch
        and evaluation summaries too) on the current training or test batch count being a multiple of it."""
        return self.update_freq == "epoch" or not self._steps or self._steps[-1] % self.update_freq == 0

    def _gate(self, step: int, replace: bool = True) -> None:
        """Gate writes on ``step`` (replacing the current gate, or entering a new one)."""
        if replace and self._steps:
            self._steps.pop()
        self._steps.append(step)

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._global_train_batch = 0
        self._gate(0, replace=False)

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._steps:
            self._steps.pop()
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._global_train_batch += 1
        self._gate(self._global_train_batch)
        self._batch_start = clock.now()

    def on_test_begin(self, logs: dict | None = None) -> None:
        self._gate(self._global_test_batch, replace=False)

    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._global_test_batch += 1
        self._gate(self._global_test_batch)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self.update_freq == "epoch" or not self._recording():
            return
        writer, step = self._writer("train"), self._global_train_batch
        if self.write_steps_per_second:
            writer.scalar("batch_steps_per_second", 1.0 / max(clock.now() - self._batch_start, 1e-9), step)
        for name, value in (logs or {}).items():
            writer.scalar(f"batch_{name}", value, step)

    def on_test_end(self, logs: dict | None = None) -> None:
        if getattr(self.model, "optimizer", None) is not None and self._recording():
            step = self._iterations()
            for name, value in (logs or {}).items():
                self._writer("validation").scalar(f"evaluation_{name}_vs_iterations", value, step)
        if self._steps:
            self._steps.pop()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self.write_steps_per_second:
            self._epoch_start_iterations, self._epoch_start = self._iterations(), clock.now()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        """The epoch's training logs, the learning rate (and steps per second) and its validation logs."""
        logs = logs or {}
        if not logs or not self._recording():
            return
        train = {name: value for name, value in logs.items() if not name.startswith("val_")}
        if getattr(self.model, "optimizer", None) is not None:
            train["learning_rate"] = float(np.asarray(self.model.optimizer.learning_rate))
        if self.write_steps_per_second:
            elapsed = max(clock.now() - self._epoch_start, 1e-9)
            train["steps_per_second"] = (self._iterations() - self._epoch_start_iterations) / elapsed
        for name, value in train.items():
            self._writer("train").scalar(f"epoch_{name}", value, epoch)
        for name, value in logs.items():
            if name.startswith("val_"):
                self._writer("validation").scalar(f"epoch_{name[4:]}", value, epoch)
