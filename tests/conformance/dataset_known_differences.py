"""Differences between mirrorlab and TF 2.21 that the dataset conformance cases (dataset_cases.py) found, and the
pytest parameters that mark them.

* ``DELIBERATE_WORKER_DIFFERENCES``: (setup, case) -> (workers, reason): those workers' results are not compared
  (``test_deliberate_differences_are_as_documented`` checks what each side does instead).
* ``KNOWN_DATASET_DIFFERENCES``: (setup, case) -> the difference (mirrorlab vs TF); the case is
  ``xfail(strict=True)``, so it turns into XPASS once mirrorlab is fixed: delete the entry then.
"""

from __future__ import annotations

import pytest

from .dataset_cases import DATASET_SETUPS, recorded_dataset_cases

__all__ = ["DELIBERATE_WORKER_DIFFERENCES", "DELIBERATE_CASE_DIFFERENCES", "KNOWN_DATASET_DIFFERENCES",
           "dataset_case_params"]

# -- deliberate ------------------------------------------------------------------------------------------

ONE_FILE_REASON = (
    "one text file for 2 workers under FILE/AUTO: worker 0 raises InvalidArgumentError 'Could not apply FILE based "
    "sharding: the dataset only has 1 file(s), ...' at its first next() in TF and mirrorlab; TF's worker 1 then "
    "fails in its first has-data collective with UnavailableError 'Collective ops is aborted by: <Socket closed | "
    "recvmsg:Connection reset by peer | Failed to send RPC to coordination service ...>' (the text depends on "
    "timing); mirrorlab deliberately tells worker 1 worker 0's error instead, through the group abort: "
    "InvalidArgumentError 'Collective ops is aborted by: Could not apply FILE based sharding: ...' (at commit "
    "0110b41 the abort reaches worker 1 still inside its MultiWorkerMirroredStrategy() creation barrier, so it has "
    "no case result)")

DELIBERATE_WORKER_DIFFERENCES: dict[tuple[str, str], tuple[tuple[int, ...], str]] = {
    ("C", f"text_files1_G{g}_{policy}"): ((1,), ONE_FILE_REASON) for g in (1, 2, 3, 4, 8) for policy in ("FILE", "AUTO")
}

DELIBERATE_CASE_DIFFERENCES: dict[tuple[str, str], str] = {}

# -- not fixed (none at the moment): xfail(strict=True) entries that turn into XPASS once fixed -----------------

KNOWN_DATASET_DIFFERENCES: dict[tuple[str, str], str] = {}


def dataset_case_params() -> list:
    """``pytest.param(setup, case)`` for every case: deliberate differences skipped, known ones ``xfail(strict)``."""
    params = []
    for setup in DATASET_SETUPS:
        for name in recorded_dataset_cases(setup):
            deliberate = DELIBERATE_CASE_DIFFERENCES.get((setup, name))
            reason = KNOWN_DATASET_DIFFERENCES.get((setup, name))
            marks = ([pytest.mark.skip(reason="deliberate difference: " + deliberate)] if deliberate else
                     [pytest.mark.xfail(strict=True, reason=reason)] if reason else [])
            params.append(pytest.param(setup, name, id=f"{setup}-{name}", marks=marks))
    return params
