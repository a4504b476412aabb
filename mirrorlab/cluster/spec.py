"""``ClusterSpec``: TensorFlow's job -> task index -> address table, without the protobuf."""

from __future__ import annotations

from typing import Union

__all__ = ["ClusterSpec", "ClusterDict"]

#: A cluster as TF_CONFIG's "cluster" writes it: job -> dense list/tuple of addresses or sparse {index: address}.
ClusterDict = dict[str, Union[list[str], tuple[str, ...], dict[int, str]]]


class ClusterSpec:
    """A cluster as named jobs of indexed tasks, with ``tf.train.ClusterSpec``'s API, texts and quirks.

    Like TF: jobs keep the input dict's order (a copy of another spec sorts them), sparse keys are cast
    with ``int()`` (so TF_CONFIG's ``{"1": "host:port"}`` works), ``==`` compares the internal
    ``{job: {index: address}}`` table (so it equals such a dict but not the list form), instances are
    unhashable and ``str()`` is ``repr()``. Divergences, each to keep the table well defined:
    ``None`` means an empty cluster (TF raises ``TypeError``); ``bytes`` names and addresses are decoded
    to ``str`` (TF only does that when copying); a negative task index raises ``ValueError`` (TF stores
    it and ``job_tasks`` then garbles the list); ``job_tasks`` of an empty job is ``[]`` (TF: ``max()``
    error).
    """

    def __init__(self, cluster: ClusterSpec | ClusterDict | None) -> None:
        if isinstance(cluster, ClusterSpec):
            self._jobs = {job: dict(cluster._jobs[job]) for job in sorted(cluster._jobs)}
        elif cluster is None or isinstance(cluster, dict):
            self._jobs = {}
            for job, tasks in (cluster or {}).items():
                tasks = _tasks_of(job, tasks)
                self._jobs[_text(job, "Job name %r must be bytes or unicode")] = tasks
        else:
            raise TypeError("`cluster` must be a dictionary mapping one or more job names to lists of "
                            "network addresses, or a `ClusterDef` protocol buffer")

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other: object) -> bool:
        return self._jobs == (other._jobs if isinstance(other, ClusterSpec) else other)

    def __repr__(self) -> str:
        as_dict = self.as_dict()
        return "ClusterSpec({" + ", ".join(f"{job!r}: {as_dict[job]!r}" for job in sorted(as_dict)) + "})"

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """Returns a fresh {job: tasks}: a list where indices are 0..n-1, else {index: address}."""
        result: dict[str, list[str] | dict[int, str]] = {}
        for job, tasks in self._jobs.items():
            dense = bool(tasks) and max(tasks) + 1 == len(tasks)
            result[job] = list(tasks.values()) if dense else dict(tasks)
        return result

    @property
    def jobs(self) -> list[str]:
        """The job names, in the order the cluster dict gave them."""
        return list(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        """How many tasks ``job_name`` defines (not the highest index + 1 for a sparse job)."""
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """The sorted task indices defined in ``job_name``."""
        return list(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """The address of task ``task_index`` of ``job_name``."""
        tasks = self._job(job_name)
        try:
            return tasks[task_index]
        except KeyError:
            raise ValueError("No task with index %r in job %r" % (task_index, job_name)) from None

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Addresses by index; like TF, a sparse job's gaps are ``None`` (so len != num_tasks)."""
        tasks = self._job(job_name)
        if not tasks:  # TF takes max() of the task indices
            raise ValueError(f"max() arg is an empty sequence\n(job {job_name!r} has no tasks; list at least one "
                             "address for it in the cluster spec)")
        return [tasks.get(i) for i in range(max(tasks) + 1)]

    def _job(self, job_name: str) -> dict[int, str]:
        """The {index: address} table of ``job_name``, or TF's missing-job ``ValueError``."""
        try:
            return self._jobs[job_name]
        except KeyError:
            raise ValueError("No such job in cluster: %r" % (job_name,)) from None


def _tasks_of(job: object, tasks: object) -> dict[int, str]:
    """Checks one job's tasks and returns them as {index: address} sorted by index."""
    if isinstance(tasks, (list, tuple)):
        pairs = list(enumerate(tasks))
    elif isinstance(tasks, dict):
        pairs = [(int(index), address) for index, address in tasks.items()]
    else:
        raise TypeError("The tasks for job %r must be a list or a dictionary from integers to strings." % (job,))
    result = {}
    for index, address in sorted(dict(pairs).items()):  # later duplicates win, as in TF
        if index < 0:
            raise ValueError(f"Task index {index} of job {job!r} is negative; task indices count from 0. "
                             f"Use a list of addresses or non-negative integer keys.")
        result[index] = _text(address, "Task address %r must be bytes or unicode")
    return result


def _text(value: object, message: str) -> str:
    """Returns ``value`` as ``str`` (decoding bytes) or raises TF's ``TypeError`` ``message % value``."""
    if isinstance(value, bytes):
        return value.decode()
    if not isinstance(value, str):
        raise TypeError(message % (value,))
    return value
