"""``Options`` and ``AutoShardPolicy``: how a dataset is split across workers (TF's tf.data.Options)."""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["AutoShardPolicy", "AutotuneOptions", "DistributeOptions", "OptimizationOptions", "Options",
           "OptionsBase", "SHARD_HINT", "ThreadingOptions"]

SHARD_HINT = -1


class AutoShardPolicy(enum.IntEnum):
    """OFF: every worker reads everything; FILE: split the input files; DATA: split the elements;
    AUTO: FILE for datasets read from files, else DATA; HINT: replace ``shard(SHARD_HINT, SHARD_HINT)``."""

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class OptionsBase:
    """TF's typed options: ``_FIELDS`` maps each name to its type and default (a nested options class is
    created fresh); unknown names and values of another type are refused with TF's errors."""

    _FIELDS: dict[str, tuple[type, Any]] = {}

    def __init__(self) -> None:
        values = {name: kind() if issubclass(kind, OptionsBase) else default
                  for name, (kind, default) in self._FIELDS.items()}
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name not in values:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._FIELDS:
            raise AttributeError(f"Cannot set the property {name} on {type(self).__name__}.")
        kind = self._FIELDS[name][0]
        if not isinstance(value, kind):
            raise TypeError(f'Property "{name}" must be of type {kind}, got: {value} (type: {type(value)})')
        self._values[name] = value

    def _merged(self, other: "OptionsBase") -> "OptionsBase":
        """A copy with the fields ``other`` changed from their defaults taken from ``other`` (as TF merges)."""
        merged = type(self)()
        for name, (kind, default) in self._FIELDS.items():
            mine, theirs = self._values[name], other._values[name]
            merged._values[name] = (mine._merged(theirs) if issubclass(kind, OptionsBase)
                                    else theirs if theirs != default else mine)
        return merged

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values == other._values  # type: ignore[attr-defined]


class DistributeOptions(OptionsBase):
    """``options.experimental_distribute``."""

    _FIELDS = {"auto_shard_policy": (AutoShardPolicy, AutoShardPolicy.AUTO), "num_devices": (int, None)}


class OptimizationOptions(OptionsBase):
    """``options.experimental_optimization``: TF's graph rewrites. mirrorlab runs pipelines as written, so
    only the rewrites that change which random seeds a shuffle draws matter (``shuffle_and_repeat_fusion``,
    and ``noop_elimination`` of ``repeat(1)``, ``skip(0)``, ``take(-1)``, ``shard(1, 0)``, ``prefetch(0)``);
    the others are accepted for compatibility. None means TF's
    default (on, unless ``apply_default_optimizations`` is False)."""

    _FIELDS = {name: (bool, None) for name in (
        "apply_default_optimizations", "filter_fusion", "filter_parallelization", "inject_prefetch",
        "map_and_batch_fusion", "map_and_filter_fusion", "map_fusion", "map_parallelization", "noop_elimination",
        "parallel_batch", "seq_interleave_prefetch", "shuffle_and_repeat_fusion")}

    def enabled(self, rewrite: str) -> bool:
        """Whether a default rewrite runs: its own setting, else ``apply_default_optimizations``."""
        own = getattr(self, rewrite)
        return own if own is not None else self.apply_default_optimizations is not False


class ThreadingOptions(OptionsBase):
    """``options.threading`` (accepted for compatibility: mirrorlab produces elements on demand)."""

    _FIELDS = {"max_intra_op_parallelism": (int, None), "private_threadpool_size": (int, None)}


class AutotuneOptions(OptionsBase):
    """``options.autotune`` (accepted for compatibility: mirrorlab has nothing to tune)."""

    _FIELDS = {"enabled": (bool, None), "cpu_budget": (int, None), "ram_budget": (int, None)}


class Options(OptionsBase):
    """Dataset options: ``experimental_distribute`` (auto-sharding), ``experimental_optimization`` (the
    rewrites that change shuffle seeding); the others (``deterministic``, ``threading``, ...) are accepted
    for compatibility and do not change what a pipeline yields."""

    _FIELDS = {"experimental_distribute": (DistributeOptions, None),
               "experimental_optimization": (OptimizationOptions, None),
               "threading": (ThreadingOptions, None), "autotune": (AutotuneOptions, None),
               "deterministic": (bool, None), "experimental_slack": (bool, None),
               "experimental_warm_start": (bool, None), "experimental_symbolic_checkpoint": (bool, None),
               "dataset_name": (str, None)}

    def merge(self, other: "Options") -> "Options":
        """These options overridden by the fields ``other`` changed from the defaults."""
        merged = self._merged(other)
        assert isinstance(merged, Options)
        return merged
