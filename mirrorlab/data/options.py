"""``Options`` and ``AutoShardPolicy``: how a dataset is split across workers (TF's tf.data.Options)."""

from __future__ import annotations

import enum

__all__ = ["AutoShardPolicy", "DistributeOptions", "OptimizationOptions", "Options", "SHARD_HINT"]

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


class OptimizationOptions:
    """``options.experimental_optimization``: TF's graph rewrites. mirrorlab runs pipelines as written, so
    only the rewrites that change which random seeds a shuffle draws matter (``shuffle_and_repeat_fusion``,
    and ``noop_elimination`` of ``repeat(1)``, ``skip(0)``, ``take(-1)``, ``shard(1, 0)``, ``prefetch(0)``);
    the others are accepted for compatibility. None means TF's
    default (on, unless ``apply_default_optimizations`` is False)."""

    _FIELDS = ("apply_default_optimizations", "filter_fusion", "filter_parallelization", "inject_prefetch",
               "map_and_batch_fusion", "map_and_filter_fusion", "map_fusion", "map_parallelization",
               "noop_elimination", "parallel_batch", "seq_interleave_prefetch", "shuffle_and_repeat_fusion")

    def __init__(self) -> None:
        for name in self._FIELDS:
            setattr(self, name, None)

    def enabled(self, rewrite: str) -> bool:
        """Whether a default rewrite runs: its own setting, else ``apply_default_optimizations``."""
        own = getattr(self, rewrite)
        return own if own is not None else self.apply_default_optimizations is not False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OptimizationOptions) and vars(self) == vars(other)


class Options:
    """Dataset options: ``experimental_distribute`` (auto-sharding), ``experimental_optimization`` (the
    rewrites that change shuffle seeding) and ``deterministic``."""

    def __init__(self) -> None:
        self.experimental_distribute = DistributeOptions()
        self.experimental_optimization = OptimizationOptions()
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
            for name in OptimizationOptions._FIELDS:
                if getattr(source.experimental_optimization, name) is not None:
                    setattr(merged.experimental_optimization, name, getattr(source.experimental_optimization, name))
        return merged

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and vars(self) == vars(other)
