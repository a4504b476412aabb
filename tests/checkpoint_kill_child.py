"""The child of test_checkpoint_kill.py: a Keras ``fit`` backed up by ``BackupAndRestore`` after every batch (a
``CheckpointManager`` with ``max_to_keep=1``), which the test SIGKILLs in the middle of a save.

Usage: ``python checkpoint_kill_child.py BACKUP_DIR [IO_POINT NTH]``. With ``IO_POINT`` (e.g.
``checkpoint-sweep``) the child kills itself at its ``NTH`` pass through that point of a save (see
``Environment.io_point``); without it the parent kills it after a random delay. After every completed save it
prints ``saved <save count>``.
"""

from __future__ import annotations

import os
import signal
import sys

import numpy as np

import mirrorlab.tf as tf
from mirrorlab.runtime import bind_environment
from mirrorlab.runtime.local import LocalEnvironment

X = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
Y = X @ np.arange(4, dtype=np.float32)


class KillAt(LocalEnvironment):
    """This process, killed by SIGKILL at its ``nth`` pass through the save point ``point``."""

    def __init__(self, point: str, nth: int) -> None:
        super().__init__()
        self.point, self.left = point, nth

    def io_point(self, what: str) -> None:
        if what == self.point:
            self.left -= 1
            if self.left == 0:
                os.kill(os.getpid(), signal.SIGKILL)


class AnnounceSaves(tf.keras.callbacks.Callback):
    """Prints the save count after BackupAndRestore saved (it runs first)."""

    def __init__(self, backup: tf.keras.callbacks.BackupAndRestore) -> None:
        super().__init__()
        self.backup = backup

    def on_train_batch_end(self, batch, logs=None):
        # One write of the whole line: print() writes its parts apart, and with PYTHONUNBUFFERED each part is a write
        # of its own, so a SIGKILL between them would leave the test a torn "saved" line without its number.
        sys.stdout.write(f"saved {int(self.backup._manager.checkpoint.save_counter.numpy())}\n")
        sys.stdout.flush()


def build_model() -> tf.keras.Model:
    """A small regression model, the same in the child and in the test's resumed fit."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    return model


def main(argv: list[str]) -> None:
    if len(argv) == 3:
        bind_environment(KillAt(argv[1], int(argv[2])))
    backup = tf.keras.callbacks.BackupAndRestore(argv[0], save_freq=1)
    build_model().fit(X, Y, batch_size=8, epochs=10_000, verbose=0, callbacks=[backup, AnnounceSaves(backup)])


if __name__ == "__main__":
    main(sys.argv[1:])
