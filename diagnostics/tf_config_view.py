"""A tolerant reading of a decoded TF_CONFIG: the well-typed parts only, so every check can run on broken input.

TensorFlow reads TF_CONFIG with ``str()``/``int()`` casts and crashes on the first surprise; the checks instead
see whatever is usable (jobs, task indices, addresses, this task) and report the rest as findings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["TFConfigView", "read_view", "task_label", "as_index"]


def task_label(job: str, index: int | None) -> str:
    """``"worker:1"``: how findings name a task (``"worker"`` when the index is unknown)."""
    return job if index is None else f"{job}:{index}"


def as_index(value: object) -> int | None:
    """The task index TensorFlow's ``int()`` would read *without surprise*: an int, an integral float or a digit
    string; None for anything else (booleans, fractions, words, null, containers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and value.strip().isascii():
        return int(value)
    return None


@dataclass(frozen=True)
class TFConfigView:
    """The usable parts of one TF_CONFIG read from ``source``."""

    source: str
    raw: Mapping[str, Any]
    jobs: dict[str, dict[int, str]] = field(default_factory=dict)  # job -> index -> address (strings only)
    task_type: str | None = None
    task_index: int | None = None

    @property
    def own_task(self) -> tuple[str, ...]:
        """The task this TF_CONFIG belongs to, as a findings ``workers`` tuple (empty when unknown)."""
        return (task_label(self.task_type, self.task_index),) if self.task_type else ()

    def addresses(self) -> list[tuple[str, str]]:
        """Every (task label, address) of the cluster, in job then index order."""
        return [(task_label(job, index), address)
                for job, tasks in self.jobs.items() for index, address in sorted(tasks.items())]


def read_view(config: Mapping[str, Any], source: str) -> TFConfigView:
    """Extracts the well-typed jobs, task type and task index of ``config`` (never raises)."""
    cluster = config.get("cluster")
    jobs: dict[str, dict[int, str]] = {}
    if isinstance(cluster, dict):
        for job, tasks in cluster.items():
            jobs[job] = _tasks(tasks)
    task = config.get("task")
    task_type = task_index = None
    if isinstance(task, dict):
        task_type = task.get("type") if isinstance(task.get("type"), str) else None
        task_index = as_index(task.get("index"))
    return TFConfigView(source, config, jobs, task_type, task_index)


def _tasks(tasks: object) -> dict[int, str]:
    """One job's {index: address} for the entries whose index and address are well typed."""
    if isinstance(tasks, list):
        pairs = list(enumerate(tasks))
    elif isinstance(tasks, dict):
        pairs = [(as_index(key), address) for key, address in tasks.items()]
    else:
        return {}
    return {index: address for index, address in pairs
            if index is not None and index >= 0 and isinstance(address, str)}
