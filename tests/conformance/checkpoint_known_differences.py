"""Differences between mirrorlab and TF 2.21 that the checkpoint conformance cases (checkpoint_cases.py) found, and
the pytest parameters (setup, case) that mark them.

* ``DELIBERATE_CHECKPOINT_DIFFERENCES``: (setup, case) -> the reason; skipped (mirrorlab differs on purpose where TF
  crashes or behaves by accident);
* ``KNOWN_CHECKPOINT_DIFFERENCES``: (setup, case) -> the difference (mirrorlab vs TF); ``xfail(strict=True)``, so it
  turns into XPASS once mirrorlab is fixed: delete the entry then.

Deliberate differences that no case can record, because TF crashes or behaves by accident there:

* every worker of a multi-worker MWMS saving to the chief's very prefix: TF's workers race on the shared files
  (``MergeV2Checkpoints`` fails with NotFound on one worker, ray-project/ray#27938, and the cluster's next collective
  aborts); mirrorlab's non-chief workers write a temporary copy they delete, so the chief's files are the result,
  and a non-chief's CheckpointManager keeps the chief's books (latest_checkpoint, checkpoints);
* ``Checkpoint.save`` inside ``strategy.run``: TF creates the save counter as a MirroredVariable there, and every
  replica returns ``<prefix>-1``; mirrorlab counts each replica's save (``-1``, ``-2``);
* ``load_variable(path, "_CHECKPOINTABLE_OBJECT_GRAPH")``: TF returns the serialized TrackableObjectGraph proto;
  mirrorlab returns its object graph as JSON bytes (the type, bytes, is compared);
* the files themselves: TF writes ``<prefix>.index`` + ``<prefix>.data-00000-of-00001``, mirrorlab ``<prefix>.npz`` +
  ``<prefix>.index.json`` (cases compare prefixes and the ``checkpoint`` state file only);
* the order of several objects listed by a status check (``Found 2 Python objects ... [<a>, <b>]``,
  ``assert_nontrivial_match``'s list): TF iterates an identity set there, so its order follows memory addresses;
  mirrorlab lists them in saving order (fuzz_checkpoint_api.py compares the count, not the list);
* Keras weights in those lists: Keras 3's variables have a repr of their own (``<Variable path=..., shape=...>``),
  mirrorlab's Keras weights are its variables and show theirs; for the same reason a Keras weight restored from a
  value of another shape raises Keras 3's ValueError (``The shape of the target variable and the shape of the target
  value in `variable.assign(value)` must match. ...``) in TF and mirrorlab's variable assign ValueError (the fuzzer
  compares the class).
"""

from __future__ import annotations

import pytest

from mirrorlab.runtime.local import count_gpus

from .checkpoint_cases import CHECKPOINT_SETUPS, recorded_checkpoint_cases

__all__ = ["DELIBERATE_CHECKPOINT_DIFFERENCES", "KNOWN_CHECKPOINT_DIFFERENCES", "checkpoint_case_params"]

DELIBERATE_CHECKPOINT_DIFFERENCES: dict[tuple[str, str], str] = {
    (setup, "manager_latest_after_files_deleted"): "a CheckpointManager recovers from interrupted saves and sweeps "
    "(issue 26): where the state file names a checkpoint whose files are gone, it takes the newest complete one on "
    "disk (ckpt-1) as the latest and records it, instead of TF's latest that restore_or_initialize cannot read"
    for setup in ("A", "B", "C")}

KNOWN_CHECKPOINT_DIFFERENCES: dict[tuple[str, str], str] = {}


def _marks(setup: str, name: str) -> list:
    """The pytest marks of case ``name`` in ``setup``: skip a deliberate difference, strict xfail a known one, and
    skip B where mirrorlab sees GPUs (its local MWMS would use them; TF's B ran on one CPU)."""
    if setup == "B" and count_gpus():
        return [pytest.mark.skip(reason="MWMS would run on the visible GPUs; B is CPU-only")]
    if (setup, name) in DELIBERATE_CHECKPOINT_DIFFERENCES:
        return [pytest.mark.skip(reason="deliberate difference: " + DELIBERATE_CHECKPOINT_DIFFERENCES[setup, name])]
    if (setup, name) in KNOWN_CHECKPOINT_DIFFERENCES:
        return [pytest.mark.xfail(strict=True, reason=KNOWN_CHECKPOINT_DIFFERENCES[setup, name])]
    return []


def checkpoint_case_params(setups: tuple[str, ...] = CHECKPOINT_SETUPS) -> list:
    """``pytest.param(setup, case)`` for every case of ``setups``, marked by ``_marks``."""
    return [pytest.param(setup, name, id=f"{setup}-{name}", marks=_marks(setup, name))
            for setup in setups for name in recorded_checkpoint_cases(setup)]
