"""Real SIGKILLs in the middle of checkpoint saves (issue 26): a Keras fit backed up by BackupAndRestore after every
batch (a CheckpointManager with max_to_keep=1) is killed at random moments and at each point of a save (after the
data, after the manifest, in the middle of deleting the previous checkpoint). After every kill a fresh manager must
find a readable checkpoint at least as new as the last save the child finished, no leftovers may remain, and a fit
with BackupAndRestore must resume from it. The child processes are bounded in time and killed by pid."""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import mirrorlab.tf as tf

sys.path.insert(0, str(Path(__file__).parent))
from checkpoint_kill_child import X, Y, build_model  # noqa: E402

CHILD = Path(__file__).with_name("checkpoint_kill_child.py")
POINTS = ("checkpoint-commit", "checkpoint-manifest", "checkpoint-sweep")
LIMIT_S = 60.0  # no child may run longer than this


def run_child(backup: Path, point: str | None, nth: int, rng: random.Random) -> int:
    """Run the child until it is killed (by itself at ``point``, else by us after a random delay once it saved);
    returns the last save count it announced (0 if none)."""
    args = [sys.executable, str(CHILD), str(backup)] + ([point, str(nth)] if point else [])
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + LIMIT_S
    try:
        if point is None:
            assert select.select([child.stdout], [], [], LIMIT_S)[0], "the child saved nothing in time"
            first = child.stdout.readline()
            assert first.startswith("saved"), f"the child failed before saving: {first}{child.stderr.read()}"
            time.sleep(rng.uniform(0.0, 0.15))
            child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    lines = ([first] if point is None else []) + out.splitlines()
    saved = max([int(line.split()[1]) for line in lines if line.startswith("saved")], default=0)
    assert child.returncode == -signal.SIGKILL, f"the child was not killed (rc {child.returncode}):\n{err}"
    return saved


def check_recovered(backup: Path, saved: int, tmp_path: Path) -> None:
    """A fresh manager finds a readable checkpoint no older than the last announced save, removes the leftovers,
    and a fit with BackupAndRestore resumes from it."""
    chief = backup / "chief"
    counter = tf.Variable(np.int64(0))
    checkpoint = tf.train.Checkpoint(save_counter_probe=counter)
    manager = tf.train.CheckpointManager(checkpoint, chief, max_to_keep=1)
    if saved == 0 and manager.latest_checkpoint is None:
        return  # killed in its very first save: nothing was promised
    assert manager.latest_checkpoint is not None, f"lost every checkpoint: {sorted(os.listdir(chief))}"
    count = int(tf.train.load_variable(manager.latest_checkpoint, "save_counter/.ATTRIBUTES/VARIABLE_VALUE"))
    assert count >= saved, f"{manager.latest_checkpoint} holds save {count}, but save {saved} had finished"
    names = sorted(os.listdir(chief))
    assert not [n for n in names if ".tmp-" in n], names
    assert {n[:-4] for n in names if n.endswith(".npz")} == {n[:-11] for n in names if n.endswith(".index.json")}
    assert tf.train.latest_checkpoint(chief) is not None
    epoch = int(tf.train.load_variable(manager.latest_checkpoint, "saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"))
    copy = tmp_path / "resumed"
    shutil.copytree(backup, copy)  # resume a copy: the next child goes on with the original
    history = build_model().fit(X, Y, batch_size=8, epochs=epoch + 2, verbose=0, callbacks=[
        tf.keras.callbacks.BackupAndRestore(str(copy), save_freq=1)])
    assert history.epoch == [epoch + 1]
    assert not (copy / "chief").exists()  # the finished fit deleted its backup
    shutil.rmtree(copy)


def kill_trials(tmp_path: Path, trials: list[tuple[str | None, int]], seed: int) -> None:
    """Run the trials one after another on one backup directory, each child resuming where the last was killed."""
    rng, backup = random.Random(seed), tmp_path / "backup"
    for point, nth in trials:
        saved = run_child(backup, point, nth, rng)
        check_recovered(backup, saved, tmp_path)


def test_a_sigkill_in_any_window_of_a_save_loses_no_checkpoint(tmp_path):
    kill_trials(tmp_path, [(point, 3) for point in POINTS] + [(None, 0)] * 2, seed=0)


@pytest.mark.slow
def test_many_sigkills_during_saves_lose_no_checkpoint(tmp_path):
    rng = random.Random(1)
    trials = [(point, nth) for point in POINTS for nth in (1, 2, 3, 5, 8)] + [(None, 0)] * 40
    rng.shuffle(trials)
    kill_trials(tmp_path, trials, seed=1)
