"""Differences between mirrorlab and TF 2.21 that the dataset conformance cases (dataset_cases.py) found, and the
pytest parameters that mark them.

* ``ABORTED_PEER_CASES``: (setup, case) -> the workers whose collective TF aborts with a timing-dependent text
  (``ONE_FILE_REASON``): compared, except for the text after "Collective ops is aborted by: "
  (``test_aborted_peers_are_told_the_cause`` checks mirrorlab's text).
* ``KNOWN_DATASET_DIFFERENCES``: (setup, case) -> the difference (mirrorlab vs TF); the case is
  ``xfail(strict=True)``, so it turns into XPASS once mirrorlab is fixed: delete the entry then.

Deliberate differences that no case can record, because TF crashes, hangs or depends on timing there (found by
fuzz_against_tf.py, which steers clear of them):

* a collective (``ReplicaContext.all_reduce``/``all_gather``, ``strategy.gather``) of tensors that are empty on
  every replica: TF's MirroredStrategy over 2 CPUs segfaults (an all-reduce of empty tensors even with equal
  shapes), and so does a worker of a 2-worker MWMS (``strategy.reduce`` with ``axis=None`` too); mirrorlab returns
  the empty result;
* a collective whose replicas disagree on shapes: TF raises InvalidArgumentError from the kernel and every later
  collective of the process fails ("Restart your program to reset"), so no case can follow it (across the workers
  of MWMS, ``strategy.reduce`` included, the collective blocks until a peer dies); mirrorlab raises
  CollectiveShapeMismatchError, a subclass of InvalidArgumentError that names every member's shape;
* ``Dataset.rebatch`` with a negative size: TF builds the dataset and its kernel never returns from the first
  ``next()``; mirrorlab raises InvalidArgumentError when the dataset is built. ``rebatch([])``: TF fails by accident
  with NumPy's IndexError ("index 0 is out of bounds for axis 0 with size 0"); mirrorlab raises InvalidArgumentError
  naming the sizes;
* a ``map`` followed by ``batch`` (TF fuses them into MapAndBatch, which copies each element into a batch allocated
  from the first map call to finish): which element's shape the batch takes, in the error for elements with other
  numbers of values ("Shapes are: [tensor]: [1], [batch]: [7]", about one run in four the other way round) and for an
  element with as many values in another shape (copied into that shape), depends on thread timing; mirrorlab always
  takes the first element's;
* an input pipeline that fails on one worker only (in C; e.g. ``distribute_datasets_from_function`` batching the
  batches of its shard, where one worker's last batch is ragged): TF's other worker fails in its next collective
  with a timing-dependent message and the cluster cannot go on (the fuzzer reports such specs as BROKE); mirrorlab
  tells the other worker the failing worker's error through the group abort, as for ``ONE_FILE_REASON``;
* a pass over a distributed dataset stopped before its end, then a new pass: TF's prefetching threads have read
  ahead of the stop by a varying amount, so a seeded shuffle under a ``repeat`` may have drawn the seeds of rounds
  nobody consumed (and a ``cache`` may have completed), and the next pass depends on timing; mirrorlab reads nothing
  ahead (its next pass is TF's after a first pass read to the end).
"""

from __future__ import annotations

import pytest

from .dataset_cases import DATASET_SETUPS, recorded_dataset_cases

__all__ = ["ABORTED_PEER_CASES", "ONE_FILE_REASON", "DELIBERATE_CASE_DIFFERENCES", "KNOWN_DATASET_DIFFERENCES",
           "dataset_case_params"]

# -- deliberate ------------------------------------------------------------------------------------------

ONE_FILE_REASON = (
    "one text file for 2 workers under FILE/AUTO: worker 0 raises InvalidArgumentError 'Could not apply FILE based "
    "sharding: the dataset only has 1 file(s), ...' at its first next() in TF and mirrorlab; TF's worker 1 then "
    "fails in its first has-data collective with UnavailableError 'Collective ops is aborted by: <Socket closed | "
    "recvmsg:Connection reset by peer | Failed to send RPC to coordination service ...>' (the text depends on "
    "timing); mirrorlab's worker 1 raises the same class there, with worker 0's error as the text: "
    "UnavailableError 'Collective ops is aborted by: Could not apply FILE based sharding: ...'")

ABORTED_PEER_CASES: dict[tuple[str, str], tuple[int, ...]] = {
    ("C", f"text_files1_G{g}_{policy}"): (1,) for g in (1, 2, 3, 4, 8) for policy in ("FILE", "AUTO")
}

SHARD_HINT_REASON = (
    "the cardinality of a dataset with an unresolved shard(SHARD_HINT, SHARD_HINT): TF computes it by accident "
    "with -1 as the number of shards (range(8).shard(-1, -1) counts 8 / -1 + 1 = -7 elements, batch(3) then "
    "-7 / 3 + 1 = -1 = INFINITE; range(7) gives -2 = UNKNOWN); with a count of INFINITE, TF's MirroredStrategy then "
    "turns partial batches off and drops the last batch [6, 7] because its second replica has nothing. mirrorlab "
    "says UNKNOWN (the shard count is only known once the dataset is distributed) and keeps [6, 7] with an empty "
    "batch for the second replica; ``use_twice_hint_*`` compares the steps where they agree")

DELIBERATE_CASE_DIFFERENCES: dict[tuple[str, str], str] = {
    **{(setup, f"use_described_hint_range{n}_G3"): SHARD_HINT_REASON for setup in DATASET_SETUPS for n in (7, 8)},
    ("A", "use_twice_hint_range8_G3"): SHARD_HINT_REASON,  # the steps: C keeps [6, 7] in TF too (its shards)
}

# -- not fixed (none at the moment): xfail(strict=True) entries that turn into XPASS once fixed -----------------

KNOWN_DATASET_DIFFERENCES: dict[tuple[str, str], str] = {
    ("A", "generator_unknown_rank_G3_OFF"): (
        "from_generator declared without shapes (unknown rank), the last batch [6] split over 2 replicas: TF builds "
        "the empty replica batch from the unknown-rank spec as a scalar 0.0 and then fails tracing the reduce "
        "(ValueError 'in user code:'); mirrorlab's spec takes the first element's rank, so its empty batch is a "
        "(0, 0) array (unknown dimensions 0) and the reduce fails in AddN (InvalidArgumentError)"),
}


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
