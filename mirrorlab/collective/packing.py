"""Grouping tensors into packs of about ``bytes_per_pack`` bytes, as TF's ``group_by_size`` does.

Tensors are taken in reverse order (the last-computed gradients go first), a new pack opens once the
current one holds strictly more than ``bytes_per_pack`` bytes, and 0 means a single pack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["group_by_size"]


def group_by_size(arrays: Sequence[Any], bytes_per_pack: int) -> list[list[int]]:
    """Indices into ``arrays`` grouped into packs (in TF's order: last tensor first)."""
    order = list(range(len(arrays)))[::-1]
    if bytes_per_pack <= 0 or not order:
        return [order] if order else []
    packs: list[list[int]] = [[]]
    size = 0
    for i in order:
        if size > bytes_per_pack:
            packs.append([])
            size = 0
        packs[-1].append(i)
        size += arrays[i].nbytes
    return packs
