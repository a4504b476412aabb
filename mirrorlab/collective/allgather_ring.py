"""Ring all-gather of blocks whose first dimension may differ between ranks.

Each message carries its block's shape, so uneven blocks (a partial batch, an empty replica) need
no padding. The result is every rank's block concatenated in rank order.
"""

from __future__ import annotations

from typing import Any

from ..tensor import array_module
from .communicator import Instance

__all__ = ["allgather_ring"]


def allgather_ring(inst: Instance, block: Any) -> list[Any]:
    """Blocks of all ranks, indexed by rank (this rank's own block included as given)."""
    n, r = inst.size, inst.rank
    blocks: list[Any] = [None] * n
    blocks[r] = block
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        inst.send(right, blocks[(r - s) % n], step=s)
        blocks[(r - s - 1) % n] = inst.recv(left, step=s)
    return blocks


def concat_blocks(blocks: list[Any]) -> Any:
    """Concatenate gathered blocks along the first axis."""
    return array_module(blocks[0]).concatenate(blocks, axis=0)
