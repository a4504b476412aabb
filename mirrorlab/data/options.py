"""``Options`` and ``AutoShardPolicy``: how a dataset is split across workers (TF's tf.data.Options)."""

from __future__ import annotations

import enum

__all__ = ["AutoShardPolicy", "DistributeOptions", "Options", "SHARD_HINT"]

SHARD_HINT = -1


class AutoShardPolicy(enum.IntEnum):
    """OFF: every worker reads everything; FILE: split the input files; DATA: split the elements;
    AUTO: FILE for datasets read from files, else DATA; HINT: replace ``shard(SHARD_HINT, SHARD_HINT)``."""

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class DistributeOptions:
    """``options.experimental_distribute``."""

    def __init__(self) -> None:
        self.auto_shard_policy = AutoShardPolicy.AUTO
        self.num_devices: int | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DistributeOptions) and vars(self) == vars(other)


class Options:
    """Dataset options; only ``experimental_distribute`` and ``deterministic`` affect mirrorlab."""

    def __init__(self) -> None:
        self.experimental_distribute = DistributeOptions()
        self.deterministic: bool | None = None

    def merge(self, other: "Options") -> "Options":
        """These options overridden by the fields ``other`` changed from the defaults."""
        merged = Options()
        for source in (self, other):
            if source.experimental_distribute.auto_shard_policy != AutoShardPolicy.AUTO:
                merged.experimental_distribute.auto_shard_policy = source.experimental_distribute.auto_shard_policy
            if source.experimental_distribute.num_devices is not None:
                merged.experimental_distribute.num_devices = source.experimental_distribute.num_devices
            if source.deterministic is not None:
                merged.deterministic = source.deterministic
        return merged

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and vars(self) == vars(other)
