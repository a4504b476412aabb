"""Named simulated cluster shapes for parametrizing tests, as TF's internal ``strategy_combinations.py`` names
them (``multi_worker_mirrored_2x1_cpu`` is a chief plus one worker, one CPU each); here they are public API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mirrorlab.sim import Fault, SimCluster

__all__ = ["ClusterShape", "multi_worker_mirrored_2x1_cpu", "multi_worker_mirrored_2x2_cpu",
           "multi_worker_mirrored_4x1_cpu", "mirrored_1x4_cpu", "one_device_1x1_cpu", "ALL", "by_name"]


@dataclass(frozen=True)
class ClusterShape:
    """A simulated cluster's shape: ``workers`` tasks (the first a chief when ``chief``) x ``devices_per_worker``."""

    workers: int
    devices_per_worker: int = 1
    chief: bool = False
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            chief = "_chief" if self.chief else ""
            object.__setattr__(self, "name", f"{self.workers}x{self.devices_per_worker}{chief}")

    @property
    def replicas(self) -> int:
        return self.workers * self.devices_per_worker

    def cluster(self, seed: int = 0, faults: Sequence[Fault] = ()) -> SimCluster:
        """A ``SimCluster`` of this shape."""
        return SimCluster(workers=self.workers, devices_per_worker=self.devices_per_worker, chief=self.chief,
                          seed=seed, faults=tuple(faults))

    def __str__(self) -> str:
        return self.name


multi_worker_mirrored_2x1_cpu = ClusterShape(2, 1, chief=True, name="multi_worker_mirrored_2x1_cpu")
multi_worker_mirrored_2x2_cpu = ClusterShape(2, 2, chief=True, name="multi_worker_mirrored_2x2_cpu")
multi_worker_mirrored_4x1_cpu = ClusterShape(4, 1, chief=True, name="multi_worker_mirrored_4x1_cpu")
mirrored_1x4_cpu = ClusterShape(1, 4, name="mirrored_1x4_cpu")
one_device_1x1_cpu = ClusterShape(1, 1, name="one_device_1x1_cpu")

#: Every named shape, by name.
ALL: dict[str, ClusterShape] = {shape.name: shape for shape in (
    multi_worker_mirrored_2x1_cpu, multi_worker_mirrored_2x2_cpu, multi_worker_mirrored_4x1_cpu, mirrored_1x4_cpu,
    one_device_1x1_cpu)}


def by_name(name: str) -> ClusterShape:
    """The named shape; a ``ValueError`` listing the names otherwise."""
    try:
        return ALL[name]
    except KeyError:
        raise ValueError(f"no cluster shape named {name!r}. Fix: use one of {', '.join(ALL)}.") from None
