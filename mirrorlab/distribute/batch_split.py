"""How a global batch is split across replicas, as TF 2.21 splits it (the rules; tf.data applies them).

Two rules: with a static global batch size G, ``batch_sizes_for_worker`` (RebatchDatasetV2: the first G mod N
replicas get one more row, rotated so each worker's replicas come first); otherwise the legacy split of each batch
into ``num_replicas`` slices of ``ceil(rows / N)`` (``legacy_slices``), which leaves the last replicas short or empty.
"""

from __future__ import annotations

__all__ = ["batch_sizes_for_worker", "legacy_slices"]


def batch_sizes_for_worker(global_batch_size: int, num_workers: int, num_replicas_per_worker: int,
                           worker_index: int) -> list[int]:
    """TF's split of a global batch into ``N`` sub-batch sizes, rotated so each worker's R come first."""
    n = num_workers * num_replicas_per_worker
    floor = global_batch_size // n
    num_ceil = global_batch_size - n * floor
    worker0 = [floor + 1] * num_ceil + [floor] * (n - num_ceil)
    shift = worker_index * num_replicas_per_worker
    return worker0[shift:] + worker0[:shift]


def legacy_slices(rows: int, num_replicas: int) -> list[tuple[int, int]]:
    """TF's legacy rebatch: ``(start, stop)`` of each replica's slice of a ``rows``-row batch, ``ceil(rows / N)``
    rows each until the rows run out."""
    interval = -(-rows // num_replicas)
    bounds = []
    for k in range(num_replicas):
        start = min(k * interval, rows)
        bounds.append((start, min(start + interval, rows)))
    return bounds
