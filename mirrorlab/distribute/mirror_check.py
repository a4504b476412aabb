"""The optional check that a mirrored variable's copies are still equal after replica-context updates.

An ON_WRITE variable with aggregation NONE updated inside ``strategy.run`` changes only the updating replica's copy,
so its copies may silently differ, which TF accepts. With the check on (``MIRRORLAB_CHECK_MIRRORS=1``,
``strategy.extended.check_mirrored_copies = True``; on by default in ``SimCluster``) the ``run`` that made them differ
raises ``MirroredCopiesDifferError`` naming the variable, the replicas and their values, the update's call site and
the fix. Only such variables are compared (the others are equal by construction); across workers only in the
simulator, whose workers share one process (a real cluster would need a collective for it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import errors

__all__ = ["CHECK_MIRRORS_ENV", "CopyPost", "allow_differing_copies", "check_copies", "check_mirrors_from_env",
           "copies_may_differ", "describe"]

CHECK_MIRRORS_ENV = "MIRRORLAB_CHECK_MIRRORS"
SMALL = 8  # values with at most this many elements are shown whole

FIX = ("Fix: create the variable with aggregation=tf.VariableAggregation.MEAN or SUM (the replicas' updates are "
       "combined), or ONLY_FIRST_REPLICA (the first replica's update goes to every copy), or update it in "
       "cross-replica context (outside strategy.run, or with strategy.extended.update). If the copies are meant to "
       f"differ, turn the check off: strategy.extended.check_mirrored_copies = False, {CHECK_MIRRORS_ENV}=0, or "
       "SimCluster(check_mirrors=False).")


def check_mirrors_from_env() -> bool:
    """Whether ``MIRRORLAB_CHECK_MIRRORS`` asks for the check ("1") or not ("0" or unset)."""
    raw = os.environ.get(CHECK_MIRRORS_ENV, "0").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{CHECK_MIRRORS_ENV}={raw!r} is neither 0 nor 1. Fix: set it to 1 to check that mirrored "
                         "variables' copies stay equal, or to 0 (the default outside SimCluster) not to.")
    return raw == "1"


def allow_differing_copies(var: Any) -> Any:
    """Mark ``var`` as a variable whose copies differ on purpose (e.g. Keras' BatchNormalization moving statistics,
    per replica as in TF): the check skips it. Returns ``var``."""
    var._copies_may_differ = True
    return var


def copies_may_differ(var: Any) -> bool:
    """True for a variable marked by ``allow_differing_copies``."""
    return getattr(var, "_copies_may_differ", False)


@dataclass(frozen=True)
class CopyPost:
    """What one worker's (equal) local copies of a variable hold, as posted to its simulated peers."""

    worker: int
    replicas: tuple[int, ...]
    digest: str
    summary: str


def describe(value: np.ndarray) -> str:
    """A short text of one copy's value: the value itself when small, else its dtype, shape, first values and (for
    numbers) mean."""
    if value.size <= SMALL:
        return repr(value.item()) if value.ndim == 0 else np.array2string(value, separator=", ")
    text = f"{value.dtype}{list(value.shape)} starting {np.array2string(value.ravel()[:4], separator=', ')[:-1]}, ...]"
    if value.dtype.kind in "biuf":
        text += f", mean {float(np.mean(value, dtype=np.float64)):.6g}"
    return text


def _difference(value: np.ndarray, reference: np.ndarray, replica: int) -> str:
    """For a large numeric copy: how many elements differ from ``reference`` (replica ``replica``'s copy) and by how
    much at most."""
    if value.size <= SMALL or value.dtype.kind not in "biuf" or value.shape != reference.shape:
        return ""
    differ = int(np.count_nonzero(value != reference))
    largest = float(np.max(np.abs(value.astype(np.float64) - reference.astype(np.float64))))
    return f" ({differ} of {value.size} elements differ from replica {replica}'s, by at most {largest:.6g})"


def _error(name: str, site: str, step: int, worker: str, lines: list[str]) -> errors.MirroredCopiesDifferError:
    message = (f"the copies of mirrored variable {name!r} differ after step {step} (strategy.run call {step} of "
               f"this worker): it has aggregation NONE and was updated in replica context at {site}, so each "
               "replica kept its own value (TF accepts this silently; mirrorlab's check of mirrored copies is on).\n"
               + "\n".join(f"  {line}" for line in lines) + "\n" + FIX)
    return errors.MirroredCopiesDifferError(message, worker=worker)


def check_copies(name: str, site: str, step: int, copies: Sequence[np.ndarray], digests: Sequence[str], rank: int,
                 devices: Sequence[str], names: Sequence[str],
                 post: Callable[[CopyPost], dict[int, CopyPost]]) -> None:
    """Raise ``MirroredCopiesDifferError`` if this worker's ``copies`` of variable ``name`` differ, else post them
    (``post`` returns what the other workers posted for the same variable and step) and raise if a peer's differ."""
    first = rank * len(copies)
    worker = f"worker {rank} ({names[rank]})"
    if len(set(digests)) > 1:
        raise _error(name, site, step, worker, [
            f"replica {first + k} ({devices[k]}): {describe(c)}{_difference(c, copies[0], first) if k else ''}"
            for k, c in enumerate(copies)])
    mine = CopyPost(rank, tuple(range(first, first + len(copies))), digests[0], describe(copies[0]))
    peers = post(mine)
    if any(p.digest != mine.digest for p in peers.values()):
        posts = sorted([mine, *peers.values()], key=lambda p: p.worker)
        raise _error(name, site, step, worker, [
            f"worker {p.worker} ({names[p.worker]}), replica{'s' if len(p.replicas) > 1 else ''} "
            f"{', '.join(map(str, p.replicas))}: {p.summary}" for p in posts])
